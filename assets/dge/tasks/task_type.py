"""One DGE task type as a registry entry: how its candidates are drawn, answered, worded and balanced.

Each family module (:mod:`~assets.dge.tasks.counting`, :mod:`~assets.dge.tasks.measurement`,
:mod:`~assets.dge.tasks.distance`, :mod:`~assets.dge.tasks.direction`,
:mod:`~assets.dge.tasks.views`) defines its task types as :class:`TaskType` entries, and
:mod:`~assets.dge.tasks.registry` collects them; adding a task type is adding one entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from assets.dge.tasks.answers import Evaluation, Spec
from assets.dge.tasks.balance import BalanceRule
from assets.dge.tasks.facts import SceneFacts
from assets.dge.tasks.sampling import CandidatePool
from assets.dge.tasks.settings import TaskSettings

Sampler = Callable[[CandidatePool], Iterator[Spec]]
"""Candidate specs of a scene, drawn at random from the pool (seeded)."""

Evaluator = Callable[[Spec, SceneFacts, TaskSettings], Evaluation]
"""The exact answer of a spec on the facts, and whether it is clear; raises ``SpecError`` for unknown ids."""

Wording = Callable[[Mapping[str, Any], SceneFacts], str]
"""The question text of a spec (objects are named by their labels)."""


@dataclass(frozen=True)
class TaskType:
    """A DGE task type: its name, sampler, evaluator, wording and balance rule.

    ``margins`` names the settings, beyond the visibility thresholds every type uses, that decide
    whether its answers are clear; they are recorded in each row's facts. ``needs_up``: the answer depends on
    the gravity direction (sizes and heights, directions seen from above, camera turns), so it is withheld on a
    scan whose "up" is a guess (``SceneFacts.up_problem``).
    """

    name: str
    sampler: Sampler
    evaluator: Evaluator
    wording: Wording
    balance: BalanceRule
    margins: tuple[str, ...] = ()
    needs_up: bool = False
