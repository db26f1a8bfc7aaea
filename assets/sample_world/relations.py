"""Visual-Genome-like relationships computed from the 3D truth of one view.

Every predicate has a geometric rule with a margin, so a relation is only stated where it is
clearly true:

- `on` / `under`: the subject stands on the object (support truth) / the reverse;
- `above` / `below`: the subject's lowest point is at least `ABOVE_GAP` over the object's highest
  point and their floor footprints (world AABBs) overlap, without support;
- `next to`: both stand on the same surface and their world AABBs are less than `NEXT_TO_GAP`
  apart in the floor plane;
- `left of` / `right of`: the subject's centroid is left / right of the object's in the image, by
  at least `LATERAL_MARGIN` in `x / z` camera units;
- `behind` / `in front of`: the subject's centroid is farther / nearer along the camera's z axis by
  at least `DEPTH_MARGIN` metres and their 2D boxes overlap horizontally;
- `bigger than` / `smaller than`: oriented-box volumes differ by a factor of `SIZE_RATIO`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from assets.sample_world.facts import ObjectInView, ViewFacts

logger = logging.getLogger(__name__)

LATERAL_MARGIN = 0.15
DEPTH_MARGIN = 0.5
NEXT_TO_GAP = 0.4
ABOVE_GAP = 0.05
SIZE_RATIO = 2.5

PREDICATES = (
    "on",
    "under",
    "above",
    "below",
    "next to",
    "left of",
    "right of",
    "behind",
    "in front of",
    "bigger than",
    "smaller than",
)
_SUPPORT_PREDICATES = ("on", "under")


@dataclass(frozen=True)
class Relation:
    """`subject_id predicate object_id`, ids within the scene."""

    subject_id: int
    predicate: str
    object_id: int


def _aabb_gap_xy(first: ObjectInView, second: ObjectInView) -> float:
    first_min, first_max = first.scene_object.aabb
    second_min, second_max = second.scene_object.aabb
    gaps = np.maximum(0.0, np.maximum(first_min[:2] - second_max[:2], second_min[:2] - first_max[:2]))
    return float(np.linalg.norm(gaps))


def _boxes_overlap_horizontally(first: ObjectInView, second: ObjectInView) -> bool:
    first_box, second_box = first.visibility.bbox_px, second.visibility.bbox_px
    if first_box is None or second_box is None:
        return False
    return first_box[0] < second_box[2] and second_box[0] < first_box[2]


def true_predicates(subject: ObjectInView, target: ObjectInView) -> list[str]:
    """Every predicate of `PREDICATES` that holds for `subject predicate target`.

    >>> from assets.sample_world.config import SampleWorldConfig
    >>> from assets.sample_world.render import SceneRenderer
    >>> from assets.sample_world.scene import sample_scene, sample_views
    >>> config = SampleWorldConfig(num_scenes=1, views_per_scene=1, width=64, height=48)
    >>> scene = sample_scene(config, 0)
    >>> view = sample_views(config, scene)[0]
    >>> facts = ViewFacts.build(scene, view, SceneRenderer(scene).render(view), config)
    >>> first, second = facts.objects[:2]
    >>> set(true_predicates(first, second)) <= set(PREDICATES)
    True
    """
    first, second = subject.scene_object, target.scene_object
    predicates = []
    if first.support_id == second.object_id:
        predicates.append("on")
    if second.support_id == first.object_id:
        predicates.append("under")
    supported = bool(predicates)
    first_min, first_max = first.aabb
    second_min, second_max = second.aabb
    overlap_xy = bool(np.all(first_min[:2] < second_max[:2]) and np.all(second_min[:2] < first_max[:2]))
    if not supported and overlap_xy and first_min[2] >= second_max[2] + ABOVE_GAP:
        predicates.append("above")
    if not supported and overlap_xy and second_min[2] >= first_max[2] + ABOVE_GAP:
        predicates.append("below")
    if (
        not supported
        and first.support_id == second.support_id
        and _aabb_gap_xy(subject, target) < NEXT_TO_GAP
    ):
        predicates.append("next to")
    if subject.centroid_camera[2] > 0 and target.centroid_camera[2] > 0:
        if subject.lateral < target.lateral - LATERAL_MARGIN:
            predicates.append("left of")
        if subject.lateral > target.lateral + LATERAL_MARGIN:
            predicates.append("right of")
    if _boxes_overlap_horizontally(subject, target):
        if subject.centroid_camera[2] > target.centroid_camera[2] + DEPTH_MARGIN:
            predicates.append("behind")
        if subject.centroid_camera[2] < target.centroid_camera[2] - DEPTH_MARGIN:
            predicates.append("in front of")
    if first.volume >= SIZE_RATIO * second.volume:
        predicates.append("bigger than")
    if second.volume >= SIZE_RATIO * first.volume:
        predicates.append("smaller than")
    return predicates


def view_relationships(facts: ViewFacts, rng: np.random.Generator, max_relationships: int) -> list[Relation]:
    """At most one relation per pair of annotated objects, at most `max_relationships` in all.

    Support relations (`on`, `under`) win where they hold; otherwise the predicate and its
    direction are drawn from those that hold. Pairs are kept in a random subset, listed in pair order.

    >>> from assets.sample_world.config import SampleWorldConfig
    >>> from assets.sample_world.render import SceneRenderer
    >>> from assets.sample_world.scene import sample_scene, sample_views
    >>> config = SampleWorldConfig(num_scenes=1, views_per_scene=1, width=64, height=48)
    >>> scene = sample_scene(config, 0)
    >>> view = sample_views(config, scene)[0]
    >>> facts = ViewFacts.build(scene, view, SceneRenderer(scene).render(view), config)
    >>> len(view_relationships(facts, np.random.default_rng(0), 3)) <= 3
    True
    """
    annotated = facts.annotated
    chosen: list[Relation] = []
    for first_index in range(len(annotated)):
        for second_index in range(first_index + 1, len(annotated)):
            first, second = annotated[first_index], annotated[second_index]
            candidates = [(first, predicate, second) for predicate in true_predicates(first, second)]
            candidates += [(second, predicate, first) for predicate in true_predicates(second, first)]
            if not candidates:
                continue
            support = [candidate for candidate in candidates if candidate[1] in _SUPPORT_PREDICATES]
            pool = support or candidates
            subject, predicate, target = pool[int(rng.integers(len(pool)))]
            chosen.append(Relation(subject.object_id, predicate, target.object_id))
    if len(chosen) > max_relationships:
        keep = np.sort(rng.choice(len(chosen), size=max_relationships, replace=False))
        chosen = [chosen[index] for index in keep]
    return chosen
