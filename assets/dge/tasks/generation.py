"""Generation: the clear questions of the configured task types for one scene, balanced and without duplicates.

Per task type, a generator seeded by ``(seed, scene, task type)`` drives the type's sampler. Each
distinct candidate spec is answered by :func:`~assets.dge.tasks.registry.evaluate_spec`; unclear
answers are withheld and counted by reason in a :class:`GenerationReport`. Candidates that ask the
same question about the same objects and frames as an earlier one (e.g. with other distractors)
are near-duplicates and dropped. Up to ``candidate_pool_factor * max_tasks_per_type`` clear
candidates are collected, grouped by answer value (the chosen option, or the count for counting
questions), and at most ``max_tasks_per_type`` are picked round-robin from the least-used group, so
a scene gives every answer value it can before repeating one, and no value takes more than
``max_answer_share`` of the type's questions the scene emits (:func:`within_answer_share`: fewer questions
rather than one answer, none when every clear candidate has the same answer). The type's balance rule then settles
the options (the spec records them) and orders them by the task id; the answer then goes to a letter
uniform over the question's options, from a seeded permutation per round of questions with as many
options (see :func:`~assets.dge.tasks.balance.gold_position`): every letter of an n-option question
holds the answer with chance 1/n whatever n the other questions have, and a scene's questions with n
options use every letter before one repeats.

>>> task_id_for("scene0000_00", "room_size", {"frames": [0, 3]})
'scene0000_00/room_size/b633ec566f'
>>> question_key({"frame": 2, "object_id": 5, "options": ["top left"]}, "Where?", [2])
('Where?', (2,), (5,))
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from assets.dge.tasks.answers import TaskAnswer
from assets.dge.tasks.balance import gold_position, place_answer
from assets.dge.tasks.facts import SceneFacts
from assets.dge.tasks.registry import DEFAULT_TASK_SETTINGS, evaluate_spec, task_type_entry
from assets.dge.tasks.sampling import CandidatePool
from assets.dge.tasks.settings import TaskSettings
from data_contracts.stable_hash import stable_int

NOT_AMONG_OPTIONS = "true answer not among the options"
ANSWER_SHARE_EXCEEDED = "its answer value would hold more than max_answer_share of the scene's questions"


def task_id_for(scene_id: str, task_type: str, spec: Mapping[str, Any]) -> str:
    """``<scene_id>/<task_type>/<10 hex digits of the spec's sha256>``."""
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:10]
    return f"{scene_id}/{task_type}/{digest}"


def _object_ids(value: Any) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, (list, tuple)):
        return [i for item in value for i in _object_ids(item)]
    return []


def question_key(spec: Mapping[str, Any], question: str, frames: list[int]) -> tuple:
    """What makes two questions the same: the text, the frames shown and the objects asked about (options aside)."""
    objects = [
        i
        for key, value in spec.items()
        if key not in ("frame", "frames", "options")
        for i in _object_ids(value)
    ]
    return question, tuple(sorted(frames)), tuple(sorted(objects))


@dataclass
class GeneratedTask:
    """One emitted question before images are attached."""

    task_id: str
    scene_id: str
    task_type: str
    spec: dict[str, Any]
    answer: TaskAnswer
    options: list[str]
    answer_index: int | None


@dataclass
class GenerationReport:
    """Per task type: distinct candidates examined, candidates withheld by reason, near-duplicates, questions emitted.

    :meth:`missing` names the configured task types with no question and why; reports of several
    scenes are combined with :meth:`merge`.
    """

    candidates: dict[str, int] = field(default_factory=dict)
    withheld: dict[str, dict[str, int]] = field(default_factory=dict)
    duplicates: dict[str, int] = field(default_factory=dict)
    emitted: dict[str, int] = field(default_factory=dict)

    def count(self, task_type: str, reason: str) -> None:
        """One candidate of the type withheld for the reason."""
        reasons = self.withheld.setdefault(task_type, {})
        reasons[reason] = reasons.get(reason, 0) + 1

    def merge(self, other: GenerationReport) -> None:
        """Add another report's counts to this one."""
        for name, value in other.candidates.items():
            self.candidates[name] = self.candidates.get(name, 0) + value
        for name, value in other.emitted.items():
            self.emitted[name] = self.emitted.get(name, 0) + value
        for name, value in other.duplicates.items():
            self.duplicates[name] = self.duplicates.get(name, 0) + value
        for name, reasons in other.withheld.items():
            for reason, value in reasons.items():
                self.withheld.setdefault(name, {})[reason] = (
                    self.withheld.get(name, {}).get(reason, 0) + value
                )

    def missing(self, task_types: list[str]) -> dict[str, str]:
        """Each configured task type with no question, and why (no candidate, or the commonest reasons)."""
        out = {}
        for name in task_types:
            if self.emitted.get(name, 0):
                continue
            candidates = self.candidates.get(name, 0)
            if not candidates:
                out[name] = "no candidate (too few frames or nameable, clearly visible objects)"
                continue
            reasons = sorted(self.withheld.get(name, {}).items(), key=lambda item: (-item[1], item[0]))
            listed = "; ".join(f"{reason}: {value}" for reason, value in reasons[:3])
            out[name] = f"no clear question among {candidates} candidates ({listed})"
        return out


def _answer_group(answer: TaskAnswer) -> Any:
    """The value answers are balanced over: the chosen option, a count, or one group for measured numbers."""
    if answer.options:
        return answer.answer_option
    if answer.unit is None:
        return answer.numeric_answer
    return None


def within_answer_share(groups: list[Any], share: float) -> list[int]:
    """Positions of the picks to keep so that no answer value holds more than ``share`` of the kept ones: the latest
    pick of the commonest value goes first (measured numbers, group None, are not limited).

    >>> within_answer_share(["a", "b", "a"], 0.5), within_answer_share(["a", "a"], 0.5), within_answer_share([None, None], 0.5)
    ([0, 1], [], [0, 1])
    """
    kept = list(range(len(groups)))
    while kept:
        counts: dict[Any, int] = {}
        for position in kept:
            if groups[position] is not None:
                counts[groups[position]] = counts.get(groups[position], 0) + 1
        if not counts:
            break
        commonest = max(counts, key=lambda group: counts[group])
        if counts[commonest] <= share * len(kept):
            break
        kept.remove(max(position for position in kept if groups[position] == commonest))
    return kept


def generate_tasks_of_type(
    task_type: str, facts: SceneFacts, settings: TaskSettings, report: GenerationReport | None = None
) -> list[GeneratedTask]:
    """The clear questions of one task type for one scene (at most ``max_tasks_per_type``), answer values balanced."""
    entry = task_type_entry(task_type)
    report = report if report is not None else GenerationReport()
    rng = np.random.default_rng(stable_int(settings.seed, facts.scene_id, task_type))
    groups: dict[Any, list[tuple[dict[str, Any], TaskAnswer]]] = {}
    seen_specs: set[str] = set()
    seen_questions: set[tuple] = set()
    wanted = settings.candidate_pool_factor * settings.max_tasks_per_type
    collected = 0
    for spec in entry.sampler(CandidatePool(facts, settings, rng)):
        spec_text = json.dumps(spec, sort_keys=True)
        if spec_text in seen_specs:
            continue
        seen_specs.add(spec_text)
        report.candidates[task_type] = report.candidates.get(task_type, 0) + 1
        answer = evaluate_spec(task_type, spec, facts, settings)
        if not answer.clear:
            report.count(task_type, answer.reason or "not clear")
            continue
        if answer.options and answer.answer_option not in answer.options:
            report.count(task_type, NOT_AMONG_OPTIONS)
            continue
        key = question_key(spec, answer.question, answer.frame_indices)
        if key in seen_questions:
            report.duplicates[task_type] = report.duplicates.get(task_type, 0) + 1
            continue
        seen_questions.add(key)
        groups.setdefault(_answer_group(answer), []).append((spec, answer))
        collected += 1
        if collected >= wanted:
            break
    order = list(groups)
    order = [order[i] for i in rng.permutation(len(order))]  # ties between groups broken at random
    used = dict.fromkeys(order, 0)
    tasks: list[GeneratedTask] = []
    cap = max(1, math.ceil(settings.max_answer_share * settings.max_tasks_per_type))

    def open_groups() -> list[Any]:
        return [g for g in order if groups[g] and (g is None or used[g] < cap)]

    picks: list[tuple[Any, dict[str, Any], TaskAnswer]] = []
    while len(picks) < settings.max_tasks_per_type and open_groups():
        group = min(open_groups(), key=lambda g: used[g])
        spec, answer = groups[group].pop(0)
        used[group] += 1
        picks.append((group, spec, answer))
    kept = within_answer_share([group for group, _, _ in picks], settings.max_answer_share)
    for _ in range(len(picks) - len(kept)):
        report.count(task_type, ANSWER_SHARE_EXCEEDED)
    placed: dict[int, int] = {}  # questions placed so far, by option count
    for position in kept:
        _, spec, answer = picks[position]
        answer = entry.balance.settle(answer, rng)
        if answer.options and answer.options != spec.get("options", answer.options):
            spec = {**spec, "options": answer.options}
        task_id = task_id_for(facts.scene_id, task_type, spec)
        options = entry.balance.order(task_id, answer.options)
        index = None
        if options:
            # An answer with options was collected only when its answer is one of them.
            assert answer.answer_option is not None
            count = len(options)
            position = gold_position(settings.seed, facts.scene_id, task_type, count, placed.get(count, 0))
            placed[count] = placed.get(count, 0) + 1
            options = place_answer(options, answer.answer_option, position)
            index = options.index(answer.answer_option)
        tasks.append(GeneratedTask(task_id, facts.scene_id, task_type, spec, answer, options, index))
    report.emitted[task_type] = report.emitted.get(task_type, 0) + len(tasks)
    return tasks


def generate_tasks(
    facts: SceneFacts, settings: TaskSettings = DEFAULT_TASK_SETTINGS, report: GenerationReport | None = None
) -> list[GeneratedTask]:
    """Every clear question of the configured types for one scene (at most ``max_tasks_per_type`` each).

    ``report``, when given, receives the candidates, withheld counts and emitted questions per type.
    """
    return [
        task
        for task_type in settings.task_types
        for task in generate_tasks_of_type(task_type, facts, settings, report)
    ]
