"""What candidate questions are drawn from: nameable objects, the frames that show them, and a seeded draw.

A task type's sampler receives a :class:`CandidatePool` and yields candidate specs;
combinatorial spaces (object triples, frame pairs) are sampled, never enumerated, so long scans
cost no more than short ones, and at most ``candidate_draws`` candidates are drawn. Which
candidates become questions is the evaluator's decision (a candidate whose answer is not clear is
dropped).

>>> spread_frames([0, 1, 2, 3, 4, 5, 6], 3)
[0, 3, 6]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

import numpy as np

from assets.dge.tasks.answers import Spec, clearly_visible
from assets.dge.tasks.facts import SceneFacts
from assets.dge.tasks.settings import TaskSettings

Item = TypeVar("Item")


def nameable_objects(facts: SceneFacts, settings: TaskSettings) -> list[int]:
    """Objects a question can name by label alone: the label is unique in the scene and not excluded."""
    counts: dict[str, int] = {}
    for obj in facts.objects.values():
        counts[obj.label] = counts.get(obj.label, 0) + 1
    return sorted(
        o
        for o, obj in facts.objects.items()
        if counts[obj.label] == 1
        and obj.label not in facts.unmeasured_labels
        and obj.label.lower() not in settings.excluded_labels
        and obj.label.strip()
    )


def frames_showing(facts: SceneFacts, object_id: int, settings: TaskSettings) -> list[int]:
    """Frames where the object is clearly visible, best first (largest visible share, then lowest index)."""
    frames = [f for f in facts.cameras if clearly_visible(facts, f, object_id, settings)]
    return sorted(frames, key=lambda f: (-facts.seen[(f, object_id)].visible_fraction, f))


def cover_frames(facts: SceneFacts, object_ids: Iterable[int], settings: TaskSettings) -> list[int] | None:
    """Few frames (at most ``max_images``) in which every object is clearly visible at least once; None if impossible."""
    remaining = set(object_ids)
    chosen: list[int] = []
    candidates = sorted(facts.cameras)
    while remaining:
        best = max(
            candidates,
            key=lambda f: (sum(clearly_visible(facts, f, o, settings) for o in remaining), -f),
            default=None,
        )
        if best is None:
            return None
        covered = {o for o in remaining if clearly_visible(facts, best, o, settings)}
        if not covered or len(chosen) >= settings.max_images:
            return None
        chosen.append(best)
        remaining -= covered
    return sorted(chosen)


def spread_frames(frames: list[int], count: int) -> list[int]:
    """At most ``count`` frames spread evenly over the sequence (first and last included)."""
    if len(frames) <= count:
        return list(frames)
    positions = np.linspace(0, len(frames) - 1, count).round().astype(int)
    return [frames[p] for p in positions]


@dataclass
class CandidatePool:
    """One scene's material for candidate questions of one task type, and the seeded generator that draws them."""

    facts: SceneFacts
    settings: TaskSettings
    rng: np.random.Generator

    @cached_property
    def frames(self) -> list[int]:
        """The scene's frames in sequence order."""
        return sorted(self.facts.cameras)

    @cached_property
    def showing(self) -> dict[int, list[int]]:
        """Per nameable object, the frames that clearly show it (best first)."""
        return {
            o: frames_showing(self.facts, o, self.settings)
            for o in nameable_objects(self.facts, self.settings)
        }

    @cached_property
    def visible(self) -> list[int]:
        """Nameable objects that at least one frame clearly shows."""
        return [o for o, frames in self.showing.items() if frames]

    @property
    def draws(self) -> int:
        """How many random candidates to draw."""
        return self.settings.candidate_draws

    def pick(self, items: Sequence[Item]) -> Item:
        """One item drawn uniformly."""
        return items[int(self.rng.integers(len(items)))]

    def distinct(self, items: Sequence[Item], count: int) -> list[Item]:
        """``count`` different items drawn uniformly, in the order drawn."""
        return [items[i] for i in self.rng.choice(len(items), size=count, replace=False)]

    def clearly_visible(self, frame_index: int, object_id: int) -> bool:
        """The frame clearly shows the object (see :func:`assets.dge.tasks.answers.clearly_visible`)."""
        return clearly_visible(self.facts, frame_index, object_id, self.settings)

    def cover(self, object_ids: Iterable[int]) -> list[int] | None:
        """Few frames that together show every object (see :func:`cover_frames`)."""
        return cover_frames(self.facts, object_ids, self.settings)


def draw_object_in_frame(pool: CandidatePool) -> Iterator[tuple[int, int]]:
    """``(frame, object)`` pairs: a random visible object and a random frame that clearly shows it."""
    for _ in range(pool.draws if pool.visible else 0):
        object_id = pool.pick(pool.visible)
        yield pool.pick(pool.showing[object_id]), object_id


def draw_object_groups(
    pool: CandidatePool, minimum: int, group_size: Callable[[], int]
) -> Iterator[tuple[list[int], list[int]]]:
    """``(objects, frames)``: groups of different visible objects and few frames that together show them.

    Nothing is drawn when fewer than ``minimum`` objects are visible; ``group_size`` says how many
    objects the next group has.
    """
    for _ in range(pool.draws if len(pool.visible) >= minimum else 0):
        group = pool.distinct(pool.visible, group_size())
        cover = pool.cover(group)
        if cover is not None:
            yield group, cover


def draw_object_pairs_in_frame(pool: CandidatePool) -> Iterator[Spec]:
    """``{"frame", "objects"}``: a random frame clearly showing two visible objects, and two of them (sorted)."""
    in_view = {f: [o for o in pool.visible if pool.clearly_visible(f, o)] for f in pool.frames}
    usable = [f for f in pool.frames if len(in_view[f]) >= 2]
    for _ in range(pool.draws if usable else 0):
        frame = pool.pick(usable)
        yield {"frame": frame, "objects": sorted(pool.distinct(in_view[frame], 2))}


def draw_frame_pairs(pool: CandidatePool) -> Iterator[list[int]]:
    """Two different frames, in the order drawn."""
    for _ in range(pool.draws if len(pool.frames) >= 2 else 0):
        yield pool.distinct(pool.frames, 2)
