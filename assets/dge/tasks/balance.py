"""Balance rules: how a clear answer is offered, so that gold answers are spread evenly and reproducibly.

A rule has two steps. :meth:`BalanceRule.settle` fixes the options a question offers before its
task id is derived (the settled options become part of the spec, so the answer can be recomputed
from the row); it may draw from the scene's seeded generator. :meth:`BalanceRule.order` then lays
the options out in an order drawn from the task id, and generation moves the answer to a letter drawn uniformly
(:func:`gold_position`), which spreads gold letters evenly.

>>> NUMERIC.order("scene/room_size/0", [])
[]
>>> sorted(SHUFFLED.order("scene/depth_order/0", ["lamp", "chair"]))
['chair', 'lamp']
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol, runtime_checkable

import numpy as np

from assets.dge.tasks.answers import TaskAnswer
from data_contracts.stable_hash import stable_int


def shuffled_options(task_id: str, options: list[str]) -> list[str]:
    """Options in an order drawn from the task id (so gold letters are spread evenly and reproducibly)."""
    rng = np.random.default_rng(stable_int(task_id, "options"))
    return [options[i] for i in rng.permutation(len(options))]


def gold_position(seed: int, scene_id: str, task_type: str, option_count: int, asked: int) -> int:
    """The letter (0-based) of a question's answer: uniform over its ``option_count`` options, seeded, and balanced.

    ``asked`` counts the questions of the type with as many options already placed in the scene. They take the
    letters in the order of a permutation drawn per round of ``option_count`` questions (seeded by scene, type,
    option count and round), so each question's letter is uniform over its options whatever option counts the
    others have, and a scene's questions of one option count use every letter once before one repeats.

    >>> sorted(gold_position(0, "scene0000_00", "depth_order", 4, asked) for asked in range(4))
    [0, 1, 2, 3]
    """
    rng = np.random.default_rng(
        stable_int(seed, scene_id, task_type, option_count, asked // option_count, "gold letters")
    )
    return int(rng.permutation(option_count)[asked % option_count])


def place_answer(options: list[str], answer: str, position: int) -> list[str]:
    """The options with the answer moved to ``position`` (swapped with the option there).

    >>> place_answer(["a", "b", "c", "d"], "a", 2)
    ['c', 'b', 'a', 'd']
    """
    placed = list(options)
    current, target = placed.index(answer), position % len(placed)
    placed[current], placed[target] = placed[target], placed[current]
    return placed


@runtime_checkable
class BalanceRule(Protocol):
    """How a task type's clear answers are offered."""

    def settle(self, answer: TaskAnswer, rng: np.random.Generator) -> TaskAnswer:
        """The answer with the options the question offers."""
        ...

    def order(self, task_id: str, options: list[str]) -> list[str]:
        """The offered options in the order the row shows them."""
        ...


@dataclass(frozen=True)
class NumericAnswer:
    """A number is the answer: there are no options to balance."""

    def settle(self, answer: TaskAnswer, rng: np.random.Generator) -> TaskAnswer:
        """The answer as it is."""
        return answer

    def order(self, task_id: str, options: list[str]) -> list[str]:
        """No options."""
        return []


@dataclass(frozen=True)
class ShuffledOptions:
    """Every option is offered, in an order drawn from the task id."""

    def settle(self, answer: TaskAnswer, rng: np.random.Generator) -> TaskAnswer:
        """The answer as it is."""
        return answer

    def order(self, task_id: str, options: list[str]) -> list[str]:
        """The options shuffled by the task id."""
        return shuffled_options(task_id, options)


@dataclass(frozen=True)
class AnswerAndDistractors:
    """Long option lists are cut to the answer plus seeded distractors, then shuffled by the task id."""

    max_options: int = 4

    def settle(self, answer: TaskAnswer, rng: np.random.Generator) -> TaskAnswer:
        """The answer and ``max_options - 1`` distractors, in the order of the full list."""
        if len(answer.options) <= self.max_options or answer.answer_option is None:
            return answer
        others = [option for option in answer.options if option != answer.answer_option]
        picked = [others[i] for i in rng.choice(len(others), size=self.max_options - 1, replace=False)]
        return replace(answer, options=sorted([answer.answer_option, *picked], key=answer.options.index))

    def order(self, task_id: str, options: list[str]) -> list[str]:
        """The options shuffled by the task id."""
        return shuffled_options(task_id, options)


NUMERIC = NumericAnswer()
SHUFFLED = ShuffledOptions()
ANSWER_AND_THREE_DISTRACTORS = AnswerAndDistractors(max_options=4)
