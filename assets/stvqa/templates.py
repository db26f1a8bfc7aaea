"""Template questions for the nine STVQA categories, and the scene-graph solver that answers them.

Every template asks only what :mod:`assets.stvqa.facts` can decide for the scene, with distractor
options that the same facts show to be false, so its gold answer is right by construction. Each
template also knows how to read its own question back (:attr:`Template.pattern`) and answer it
from the scene: :func:`solve_question` is the offline pass@2 backend, a consistency check that the
text round trip (names resolve to one object, options parse, the letter points at the true
option) holds. It abstains (returns no letter) on questions no template wrote, or when the scene
does not settle exactly one option.

Levels follow the number of options (2 easy, 3 medium, 4 hard) unless the template says otherwise;
ratings (1-10) rise with how much spatial reasoning a question needs and whether metric geometry
backs it.

| category | templates |
|---|---|
| relation | ``relation.where``, ``relation.verify``, ``relation.which`` |
| reach | ``reach.verify``, ``reach.which`` |
| size | ``size.compare``, ``size.biggest``, ``size.image`` |
| orientation | ``orientation.facing``, ``orientation.faces_camera``, ``orientation.perspective``, ``orientation.box`` |
| instance_location | ``location.half``, ``location.third``, ``location.height``, ``location.quadrant`` |
| depth | ``depth.compare``, ``depth.extreme`` |
| distance | ``distance.compare``, ``distance.closest``, ``distance.image`` |
| count | ``count.how_many`` |
| existence | ``existence.verify``, ``existence.which`` |
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from assets.stvqa import facts
from assets.stvqa.scene import Scene, SceneObject
from assets.stvqa.text import article, lemmatize_phrase
from assets.stvqa.vocabulary import VERIFIABLE_PREDICATES, fact_predicate
from data_contracts.nouns import pluralize
from data_contracts.stable_hash import stable_int

YES, NO = "yes", "no"
LEVEL_BY_OPTION_COUNT = {2: "easy", 3: "medium", 4: "hard"}
WHERE_PREDICATES = (
    "left of",
    "right of",
    "above",
    "below",
    "on",
    "under",
    "behind",
    "in front of",
    "next to",
)
"""Predicates a ``relation.where`` question offers as options."""

DEFAULT_ABSENT_NAMES = (
    "dog",
    "cat",
    "bicycle",
    "umbrella",
    "guitar",
    "pizza",
    "horse",
    "surfboard",
    "clock",
    "laptop",
    "bottle",
    "kite",
    "banana",
    "teddy bear",
    "skateboard",
    "bus",
    "airplane",
    "elephant",
    "giraffe",
    "traffic light",
    "fire hydrant",
    "toothbrush",
    "motorcycle",
    "boat",
)
"""Names offered for "is there ..." questions whose answer is no (when the scene has none of them)."""

SYNONYM_GROUPS = (
    frozenset({"sofa", "couch"}),
    frozenset({"cup", "mug"}),
    frozenset({"tv", "television", "monitor", "screen"}),
    frozenset({"bike", "bicycle"}),
    frozenset({"motorcycle", "motorbike"}),
    frozenset({"table", "desk"}),
    frozenset({"cabinet", "cupboard"}),
    frozenset({"bag", "backpack", "handbag", "purse"}),
    frozenset({"phone", "cellphone", "cell phone"}),
    frozenset({"rug", "carpet", "mat"}),
    frozenset({"shelf", "bookshelf", "bookcase"}),
    frozenset({"plant", "potted plant", "flower", "houseplant"}),
    frozenset({"airplane", "plane", "aeroplane", "jet"}),
    frozenset({"car", "vehicle", "taxi"}),
    frozenset(
        {"person", "man", "woman", "boy", "girl", "child", "kid", "guy", "lady", "people", "player", "skier"}
    ),
    frozenset({"lamp", "light"}),
)
"""Names that may denote the same thing: a scene with one of them has none of the others absent."""


@dataclass(frozen=True)
class TemplateQuestion:
    """A generated question with its gold option.

    Attributes:
        template (`str`): template name (``"depth.compare"``).
        category (`str`): STVQA category.
        level (`str`): ``easy``, ``medium`` or ``hard``.
        question (`str`): the question text.
        options (`tuple[str, ...]`): 2-4 options, already in their final generation order.
        answer_index (`int`): index of the gold option.
        rating (`int`): 1-10.
        about (`tuple[str, ...]`): what the question is about: object ids, or the noun for count and
            existence questions.
        fact_key (`str`): identifies the underlying fact; two questions with one key are redundant.
        facts (`dict`): the values that justify the answer (for audit).
    """

    template: str
    category: str
    level: str
    question: str
    options: tuple[str, ...]
    answer_index: int
    rating: int
    about: tuple[str, ...]
    fact_key: str
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def answer_letter(self) -> str:
        """The gold letter."""
        return "ABCD"[self.answer_index]


@dataclass(frozen=True)
class GenerationContext:
    """What the templates need beyond the scene.

    Args:
        seed (`int`): seed of every deterministic choice (distractors, option order).
        absent_names (`tuple[str, ...]`): candidate names for "no" existence questions.
        max_per_template (`int`): questions each template may propose per image.
    """

    seed: int = 0
    absent_names: tuple[str, ...] = DEFAULT_ABSENT_NAMES
    max_per_template: int = 6


def stable_rng(*parts: object) -> random.Random:
    """A `random.Random` seeded by a SHA-256 of the parts (never Python's salted `hash()`).

    >>> stable_rng(0, "a").random() == stable_rng(0, "a").random()
    True
    """
    return random.Random(stable_int(*parts))


def stable_order(items: Sequence[Any], *parts: object) -> list[Any]:
    """`items` in a deterministic pseudo-random order keyed by `parts`."""
    ordered = list(items)
    stable_rng(*parts).shuffle(ordered)
    return ordered


def _predicate_pattern(predicates: Sequence[str]) -> str:
    return "|".join(re.escape(predicate) for predicate in sorted(predicates, key=len, reverse=True))


def _clip_rating(value: float) -> int:
    return int(max(1, min(10, math.floor(value + 0.5))))


class Template:
    """A question family: proposes questions for a scene and answers its own questions from a scene."""

    name: str = ""
    category: str = ""
    pattern: re.Pattern[str] = re.compile(r"(?!)")

    def generate(self, scene: Scene, context: GenerationContext) -> Iterator[TemplateQuestion]:
        """Questions this template can ask about `scene`."""
        raise NotImplementedError

    def truth(self, scene: Scene, match: re.Match[str], option: str) -> bool | None:
        """Whether `option` answers the matched question correctly (`None` when the scene cannot tell)."""
        raise NotImplementedError

    def solve(self, scene: Scene, question: str, options: Sequence[str]) -> int | None:
        """The index of the one true option, when every other option is false; else `None`."""
        match = self.pattern.fullmatch(question.strip())
        if match is None:
            return None
        verdicts = [self.truth(scene, match, option) for option in options]
        if verdicts.count(True) == 1 and verdicts.count(False) == len(options) - 1:
            return verdicts.index(True)
        return None

    # -- helpers used by the subclasses ------------------------------------------------------------
    def _questions(
        self,
        scene: Scene,
        context: GenerationContext,
        question: str,
        correct: str,
        distractors: Sequence[str],
        about: Sequence[str],
        rating: float,
        fact_details: dict[str, Any],
        sizes: Sequence[int] = (2, 3, 4),
        level: str | None = None,
    ) -> Iterator[TemplateQuestion]:
        """One question per option count in `sizes` that the distractors allow, options in a stable order."""
        key = f"{self.name}|{'|'.join(sorted(about))}"
        chosen = stable_order(distractors, context.seed, scene.image_id, key, question)
        for size in sizes:
            if size - 1 > len(chosen):
                continue
            options = [correct, *chosen[: size - 1]]
            options = stable_order(options, context.seed, scene.image_id, question, size)
            yield TemplateQuestion(
                template=self.name,
                category=self.category,
                level=level or LEVEL_BY_OPTION_COUNT[size],
                question=question,
                options=tuple(options),
                answer_index=options.index(correct),
                rating=_clip_rating(rating + (0.5 if size >= 3 else 0.0)),
                about=tuple(about),
                fact_key=key,
                facts={**fact_details, "gold": correct},
            )

    @staticmethod
    def _limit(items: Sequence[Any], context: GenerationContext, scene: Scene, name: str) -> list[Any]:
        return stable_order(items, context.seed, scene.image_id, name)[: context.max_per_template]


def _yes_no(value: bool | None, option: str) -> bool | None:
    if value is None or option not in (YES, NO):
        return None
    return (option == YES) == value


MAX_PAIR_OBJECTS = 24
"""Pair templates consider the largest this many nameable objects of an image (salient ones first)."""
MAX_TRIPLE_OBJECTS = 12
"""Three-object templates (distance) consider the largest this many, keeping big scenes cheap."""


def _salient(scene: Scene, limit: int) -> list[SceneObject]:
    """The `limit` nameable objects with the largest boxes, in scene order."""
    nameable = scene.nameable()
    if len(nameable) <= limit:
        return nameable
    keep = {obj.object_id for obj in sorted(nameable, key=lambda o: (-o.area_px, o.object_id))[:limit]}
    return [obj for obj in nameable if obj.object_id in keep]


def _pairs(scene: Scene) -> list[tuple[SceneObject, SceneObject]]:
    return list(itertools.permutations(_salient(scene, MAX_PAIR_OBJECTS), 2))


def _metric_bonus(*objects: SceneObject) -> float:
    return 1.0 if all(obj.geometry is not None for obj in objects) else 0.0


# -- relation ---------------------------------------------------------------------------------------
class RelationWhere(Template):
    """ "Where is the cup with respect to the table?" -> a predicate (on / under / left of ...)."""

    name, category = "relation.where", "relation"
    pattern = re.compile(r"Where is (the .+?) with respect to (the .+)\?")

    def generate(self, scene, context):
        proposals = []
        for relation in scene.relations:
            predicate = relation.fact
            if predicate not in WHERE_PREDICATES:
                continue
            subject, obj = scene.get(relation.subject_id), scene.get(relation.object_id)
            if scene.referring_expression(subject) is None or scene.referring_expression(obj) is None:
                continue
            proposals.append((subject, predicate, obj))
        for subject, predicate, obj in self._limit(proposals, context, scene, self.name):
            distractors = [
                other
                for other in WHERE_PREDICATES
                if other != predicate and facts.relation_truth(scene, subject, other, obj) is False
            ]
            question = f"Where is {scene.referring_expression(subject)} with respect to {scene.referring_expression(obj)}?"
            yield from self._questions(
                scene,
                context,
                question,
                predicate,
                distractors,
                (subject.object_id, obj.object_id),
                7,
                {"relation": [subject.scene_id, predicate, obj.scene_id]},
            )

    def truth(self, scene, match, option):
        subject, obj = scene.resolve(match.group(1)), scene.resolve(match.group(2))
        if subject is None or obj is None or fact_predicate(option) not in WHERE_PREDICATES:
            return None
        return facts.relation_truth(scene, subject, option, obj)


_VERIFY_PREDICATES = tuple(dict.fromkeys((*WHERE_PREDICATES, *VERIFIABLE_PREDICATES)))


class RelationVerify(Template):
    """ "Is the cup on the table?" -> yes / no (no: the inverse of a stated relation, or a refuted one)."""

    name, category = "relation.verify", "relation"
    pattern = re.compile(rf"Is (the .+?) ({_predicate_pattern(_VERIFY_PREDICATES)}) (the .+)\?")

    def generate(self, scene, context):
        proposals = []
        for relation in scene.relations:
            if relation.fact not in _VERIFY_PREDICATES:
                continue
            subject, obj = scene.get(relation.subject_id), scene.get(relation.object_id)
            if scene.referring_expression(subject) is None or scene.referring_expression(obj) is None:
                continue
            proposals.append((subject, relation.fact, obj, True))
            false_predicates = [
                other
                for other in _VERIFY_PREDICATES
                if facts.relation_truth(scene, subject, other, obj) is False
            ]
            if false_predicates:
                choice = stable_order(
                    false_predicates, context.seed, scene.image_id, subject.object_id, obj.object_id
                )[0]
                proposals.append((subject, choice, obj, False))
        for subject, predicate, obj, holds in self._limit(proposals, context, scene, self.name):
            question = (
                f"Is {scene.referring_expression(subject)} {predicate} {scene.referring_expression(obj)}?"
            )
            correct = YES if holds else NO
            yield from self._questions(
                scene,
                context,
                question,
                correct,
                [NO if holds else YES],
                (subject.object_id, obj.object_id),
                6,
                {"statement": [subject.scene_id, predicate, obj.scene_id], "holds": holds},
                sizes=(2,),
            )

    def truth(self, scene, match, option):
        subject, obj = scene.resolve(match.group(1)), scene.resolve(match.group(3))
        if subject is None or obj is None:
            return None
        return _yes_no(facts.relation_truth(scene, subject, match.group(2), obj), option)


class RelationWhich(Template):
    """ "Which object is left of the sofa?" -> the one object the relation holds for."""

    name, category = "relation.which", "relation"
    pattern = re.compile(rf"Which object is ({_predicate_pattern(_VERIFY_PREDICATES)}) (the .+)\?")

    def generate(self, scene, context):
        proposals = []
        for relation in scene.relations:
            if relation.fact not in _VERIFY_PREDICATES:
                continue
            subject, obj = scene.get(relation.subject_id), scene.get(relation.object_id)
            if scene.label(subject) is None or scene.referring_expression(obj) is None:
                continue
            proposals.append((subject, relation.fact, obj))
        for subject, predicate, obj in self._limit(proposals, context, scene, self.name):
            distractors = [
                scene.label(other)
                for other in scene.nameable()
                if other.object_id not in (subject.object_id, obj.object_id)
                and facts.relation_truth(scene, other, predicate, obj) is False
            ]
            question = f"Which object is {predicate} {scene.referring_expression(obj)}?"
            yield from self._questions(
                scene,
                context,
                question,
                scene.label(subject),
                distractors,
                (subject.object_id, obj.object_id),
                7,
                {"relation": [subject.scene_id, predicate, obj.scene_id]},
                sizes=(3, 4),
            )

    def truth(self, scene, match, option):
        candidate, obj = scene.resolve(option), scene.resolve(match.group(2))
        if candidate is None or obj is None:
            return None
        return facts.relation_truth(scene, candidate, match.group(1), obj)


# -- reach ------------------------------------------------------------------------------------------
class ReachVerify(Template):
    """ "Is the lamp within arm's reach of the sofa?" -> yes / no."""

    name, category = "reach.verify", "reach"
    pattern = re.compile(r"Is (the .+?) within arm's reach of (the .+)\?")

    def generate(self, scene, context):
        proposals = [
            (a, b, facts.within_reach(scene, a, b)) for a, b in _pairs(scene) if a.object_id < b.object_id
        ]
        proposals = [item for item in proposals if item[2] is not None]
        for first, second, reachable in self._limit(proposals, context, scene, self.name):
            question = f"Is {scene.referring_expression(first)} within arm's reach of {scene.referring_expression(second)}?"
            correct = YES if reachable else NO
            yield from self._questions(
                scene,
                context,
                question,
                correct,
                [NO if reachable else YES],
                (first.object_id, second.object_id),
                6 + _metric_bonus(first, second),
                {"reachable": reachable},
                sizes=(2,),
            )

    def truth(self, scene, match, option):
        first, second = scene.resolve(match.group(1)), scene.resolve(match.group(2))
        if first is None or second is None:
            return None
        return _yes_no(facts.within_reach(scene, first, second), option)


class ReachWhich(Template):
    """ "Which object is within arm's reach of the table?" -> the one reachable object."""

    name, category = "reach.which", "reach"
    pattern = re.compile(r"Which object is within arm's reach of (the .+)\?")

    def generate(self, scene, context):
        proposals = []
        for reference in scene.nameable():
            others = [other for other in scene.nameable() if other.object_id != reference.object_id]
            reachable = [other for other in others if facts.within_reach(scene, reference, other) is True]
            unreachable = [other for other in others if facts.within_reach(scene, reference, other) is False]
            for target in reachable:
                proposals.append((reference, target, unreachable))
        for reference, target, unreachable in self._limit(proposals, context, scene, self.name):
            question = f"Which object is within arm's reach of {scene.referring_expression(reference)}?"
            yield from self._questions(
                scene,
                context,
                question,
                scene.label(target),
                [scene.label(other) for other in unreachable],
                (reference.object_id, target.object_id),
                7 + _metric_bonus(reference, target),
                {"reference": reference.scene_id, "reachable": target.scene_id},
                sizes=(2, 3, 4),
                level=None,
            )

    def truth(self, scene, match, option):
        reference, candidate = scene.resolve(match.group(1)), scene.resolve(option)
        if reference is None or candidate is None or candidate.object_id == reference.object_id:
            return None
        return facts.within_reach(scene, reference, candidate)


# -- size -------------------------------------------------------------------------------------------
class SizeCompare(Template):
    """ "Which is bigger, the chair or the mug?" (real size: relations or volumes)."""

    name, category = "size.compare", "size"
    pattern = re.compile(r"Which is bigger, (the .+?) or (the .+)\?")

    def generate(self, scene, context):
        proposals = [
            (a, b)
            for a, b in _pairs(scene)
            if a.object_id < b.object_id and facts.bigger_than(scene, a, b) is not None
        ]
        for first, second in self._limit(proposals, context, scene, self.name):
            bigger = first if facts.bigger_than(scene, first, second) else second
            smaller = second if bigger is first else first
            question = f"Which is bigger, {scene.referring_expression(first)} or {scene.referring_expression(second)}?"
            yield from self._questions(
                scene,
                context,
                question,
                scene.label(bigger),
                [scene.label(smaller)],
                (first.object_id, second.object_id),
                6 + _metric_bonus(first, second),
                {"bigger": bigger.scene_id, "smaller": smaller.scene_id},
                sizes=(2,),
            )

    def truth(self, scene, match, option):
        first, second, candidate = (
            scene.resolve(match.group(1)),
            scene.resolve(match.group(2)),
            scene.resolve(option),
        )
        if first is None or second is None or candidate is None:
            return None
        if candidate.object_id not in (first.object_id, second.object_id):
            return False
        other = second if candidate.object_id == first.object_id else first
        return facts.bigger_than(scene, candidate, other)


def _extreme(
    scene: Scene, objects: Sequence[SceneObject], beats: Callable[[SceneObject, SceneObject], bool | None]
) -> list[tuple[SceneObject, list[SceneObject]]]:
    """For each object, the others it provably beats, when it beats at least two."""
    winners = []
    for candidate in objects:
        beaten = [
            other
            for other in objects
            if other.object_id != candidate.object_id and beats(candidate, other) is True
        ]
        if len(beaten) >= 2:
            winners.append((candidate, beaten))
    return winners


class SizeBiggest(Template):
    """ "Which of these objects is the biggest?" over 3-4 objects the winner provably beats."""

    name, category = "size.biggest", "size"
    pattern = re.compile(r"Which of these objects is the biggest\?")

    def generate(self, scene, context):
        winners = _extreme(scene, scene.nameable(), lambda a, b: facts.bigger_than(scene, a, b))
        for winner, beaten in self._limit(winners, context, scene, self.name):
            yield from self._questions(
                scene,
                context,
                "Which of these objects is the biggest?",
                scene.label(winner),
                [scene.label(other) for other in beaten],
                (winner.object_id,),
                7 + _metric_bonus(winner),
                {"biggest": winner.scene_id},
                sizes=(3, 4),
            )

    def truth(self, scene, match, option):
        return None

    def solve(self, scene, question, options):
        if self.pattern.fullmatch(question.strip()) is None:
            return None
        objects = [scene.resolve(option) for option in options]
        if any(obj is None for obj in objects) or len({obj.object_id for obj in objects}) != len(objects):
            return None
        return _solve_extreme(objects, lambda a, b: facts.bigger_than(scene, a, b))


def _solve_extreme(
    objects: Sequence[SceneObject], beats: Callable[[SceneObject, SceneObject], bool | None]
) -> int | None:
    winners = [
        index
        for index, candidate in enumerate(objects)
        if all(beats(candidate, other) is True for other in objects if other.object_id != candidate.object_id)
    ]
    return winners[0] if len(winners) == 1 else None


class SizeInImage(Template):
    """ "Which object takes up more of the image, the rug or the cup?" (2D box areas)."""

    name, category = "size.image", "size"
    pattern = re.compile(r"Which object takes up more of the image, (the .+?) or (the .+)\?")

    def generate(self, scene, context):
        proposals = [
            (a, b)
            for a, b in _pairs(scene)
            if a.object_id < b.object_id and facts.larger_in_image(a, b) is not None
        ]
        for first, second in self._limit(proposals, context, scene, self.name):
            larger = first if facts.larger_in_image(first, second) else second
            smaller = second if larger is first else first
            question = (
                f"Which object takes up more of the image, {scene.referring_expression(first)} or "
                f"{scene.referring_expression(second)}?"
            )
            yield from self._questions(
                scene,
                context,
                question,
                scene.label(larger),
                [scene.label(smaller)],
                (first.object_id, second.object_id),
                5,
                {"larger_in_image": larger.scene_id},
                sizes=(2,),
            )

    def truth(self, scene, match, option):
        first, second, candidate = (
            scene.resolve(match.group(1)),
            scene.resolve(match.group(2)),
            scene.resolve(option),
        )
        if first is None or second is None or candidate is None:
            return None
        if candidate.object_id not in (first.object_id, second.object_id):
            return False
        other = second if candidate.object_id == first.object_id else first
        return facts.larger_in_image(candidate, other)


# -- orientation ------------------------------------------------------------------------------------
class OrientationFacing(Template):
    """ "Which way is the chair facing?" -> toward / away from the camera, toward the left / right of the image."""

    name, category = "orientation.facing", "orientation"
    pattern = re.compile(r"Which way is (the .+?) facing\?")

    def generate(self, scene, context):
        proposals = [(obj, facts.facing_direction(obj)) for obj in scene.nameable()]
        for obj, direction in self._limit([item for item in proposals if item[1]], context, scene, self.name):
            question = f"Which way is {scene.referring_expression(obj)} facing?"
            distractors = [other for other in facts.FACING_DIRECTIONS if other != direction]
            yield from self._questions(
                scene,
                context,
                question,
                direction,
                distractors,
                (obj.object_id,),
                8,
                {"facing": direction},
                sizes=(3, 4),
            )

    def truth(self, scene, match, option):
        obj = scene.resolve(match.group(1))
        if obj is None or option not in facts.FACING_DIRECTIONS:
            return None
        direction = facts.facing_direction(obj)
        return None if direction is None else direction == option


class OrientationFacesCamera(Template):
    """ "Is the sofa facing the camera?" -> yes / no."""

    name, category = "orientation.faces_camera", "orientation"
    pattern = re.compile(r"Is (the .+?) facing the camera\?")

    def generate(self, scene, context):
        proposals = [(obj, facts.faces_camera(obj)) for obj in scene.nameable()]
        for obj, facing in self._limit(
            [item for item in proposals if item[1] is not None], context, scene, self.name
        ):
            question = f"Is {scene.referring_expression(obj)} facing the camera?"
            correct = YES if facing else NO
            yield from self._questions(
                scene,
                context,
                question,
                correct,
                [NO if facing else YES],
                (obj.object_id,),
                6,
                {"faces_camera": facing},
                sizes=(2,),
            )

    def truth(self, scene, match, option):
        obj = scene.resolve(match.group(1))
        return None if obj is None else _yes_no(facts.faces_camera(obj), option)


class OrientationPerspective(Template):
    """ "From the perspective of the chair, where is the lamp?" -> in front of it / behind it / to its left / right."""

    name, category = "orientation.perspective", "orientation"
    pattern = re.compile(r"From the perspective of (the .+?), where is (the .+)\?")

    def generate(self, scene, context):
        proposals = []
        for viewer, target in _pairs(scene):
            direction = facts.direction_from(viewer, target)
            if direction is not None:
                proposals.append((viewer, target, direction))
        for viewer, target, direction in self._limit(proposals, context, scene, self.name):
            question = (
                f"From the perspective of {scene.referring_expression(viewer)}, where is "
                f"{scene.referring_expression(target)}?"
            )
            distractors = [other for other in facts.PERSPECTIVE_DIRECTIONS if other != direction]
            yield from self._questions(
                scene,
                context,
                question,
                direction,
                distractors,
                (viewer.object_id, target.object_id),
                9,
                {"direction": direction},
                sizes=(2, 4),
                level="hard",
            )

    def truth(self, scene, match, option):
        viewer, target = scene.resolve(match.group(1)), scene.resolve(match.group(2))
        if viewer is None or target is None or option not in facts.PERSPECTIVE_DIRECTIONS:
            return None
        direction = facts.direction_from(viewer, target)
        return None if direction is None else direction == option


class OrientationBox(Template):
    """ "Is the bench oriented horizontally or vertically in the image?" (the box's aspect ratio)."""

    name, category = "orientation.box", "orientation"
    pattern = re.compile(r"Is (the .+?) oriented horizontally or vertically in the image\?")

    def generate(self, scene, context):
        proposals = [(obj, facts.box_orientation(obj)) for obj in scene.nameable()]
        for obj, shape in self._limit([item for item in proposals if item[1]], context, scene, self.name):
            question = (
                f"Is {scene.referring_expression(obj)} oriented horizontally or vertically in the image?"
            )
            other = facts.SHAPES[1] if shape == facts.SHAPES[0] else facts.SHAPES[0]
            yield from self._questions(
                scene,
                context,
                question,
                shape,
                [other],
                (obj.object_id,),
                4,
                {"box_orientation": shape},
                sizes=(2,),
            )

    def truth(self, scene, match, option):
        obj = scene.resolve(match.group(1))
        if obj is None or option not in facts.SHAPES:
            return None
        shape = facts.box_orientation(obj)
        return None if shape is None else shape == option


# -- instance location ------------------------------------------------------------------------------
class _LocationTemplate(Template):
    """Where an object's box centre lies in the frame (one region function, one option set)."""

    category = "instance_location"
    question_format = ""
    regions: tuple[str, ...] = ()
    region_of: Callable[[SceneObject], str | None] = staticmethod(lambda obj: None)
    sizes: tuple[int, ...] = (2,)
    rating = 5.0

    def generate(self, scene, context):
        proposals = [(obj, self.region_of(obj)) for obj in scene.nameable()]
        for obj, region in self._limit([item for item in proposals if item[1]], context, scene, self.name):
            question = self.question_format.format(obj=scene.referring_expression(obj))
            distractors = [other for other in self.regions if other != region]
            yield from self._questions(
                scene,
                context,
                question,
                region,
                distractors,
                (obj.object_id,),
                self.rating,
                {"region": region},
                sizes=self.sizes,
            )

    def truth(self, scene, match, option):
        obj = scene.resolve(match.group(1))
        if obj is None or option not in self.regions:
            return None
        region = self.region_of(obj)
        return None if region is None else region == option


class LocationHalf(_LocationTemplate):
    """ "Is the lamp in the left half or the right half of the image?"."""

    name = "location.half"
    pattern = re.compile(r"Is (the .+?) in the left half or the right half of the image\?")
    question_format = "Is {obj} in the left half or the right half of the image?"
    regions = facts.HALVES
    region_of = staticmethod(facts.horizontal_half)
    sizes = (2,)
    rating = 4.0


class LocationThird(_LocationTemplate):
    """ "In which part of the image is the lamp located?" -> left side / middle / right side."""

    name = "location.third"
    pattern = re.compile(r"In which part of the image is (the .+?) located\?")
    question_format = "In which part of the image is {obj} located?"
    regions = facts.HORIZONTAL_THIRDS
    region_of = staticmethod(facts.horizontal_third)
    sizes = (3,)
    rating = 5.0


class LocationHeight(_LocationTemplate):
    """ "Is the lamp at the top, in the middle or at the bottom of the image?"."""

    name = "location.height"
    pattern = re.compile(r"Is (the .+?) at the top, in the middle or at the bottom of the image\?")
    question_format = "Is {obj} at the top, in the middle or at the bottom of the image?"
    regions = facts.VERTICAL_THIRDS
    region_of = staticmethod(facts.vertical_third)
    sizes = (3,)
    rating = 5.0


class LocationQuadrant(_LocationTemplate):
    """ "In which quarter of the image is the lamp located?" -> top left / top right / bottom left / bottom right."""

    name = "location.quadrant"
    pattern = re.compile(r"In which quarter of the image is (the .+?) located\?")
    question_format = "In which quarter of the image is {obj} located?"
    regions = facts.QUADRANTS
    region_of = staticmethod(facts.quadrant)
    sizes = (4,)
    rating = 6.0


# -- depth ------------------------------------------------------------------------------------------
class DepthCompare(Template):
    """ "Which is closer to the camera, the chair or the table?"."""

    name, category = "depth.compare", "depth"
    pattern = re.compile(r"Which is closer to the camera, (the .+?) or (the .+)\?")

    def generate(self, scene, context):
        proposals = [
            (a, b)
            for a, b in _pairs(scene)
            if a.object_id < b.object_id and facts.closer_to_camera(scene, a, b) is not None
        ]
        for first, second in self._limit(proposals, context, scene, self.name):
            closer = first if facts.closer_to_camera(scene, first, second) else second
            farther = second if closer is first else first
            question = f"Which is closer to the camera, {scene.referring_expression(first)} or {scene.referring_expression(second)}?"
            yield from self._questions(
                scene,
                context,
                question,
                scene.label(closer),
                [scene.label(farther)],
                (first.object_id, second.object_id),
                6 + _metric_bonus(first, second),
                {
                    "closer": closer.scene_id,
                    "distances_m": [facts.camera_distance(first), facts.camera_distance(second)],
                },
                sizes=(2,),
            )

    def truth(self, scene, match, option):
        first, second, candidate = (
            scene.resolve(match.group(1)),
            scene.resolve(match.group(2)),
            scene.resolve(option),
        )
        if first is None or second is None or candidate is None:
            return None
        if candidate.object_id not in (first.object_id, second.object_id):
            return False
        other = second if candidate.object_id == first.object_id else first
        return facts.closer_to_camera(scene, candidate, other)


class DepthExtreme(Template):
    """ "Which of these objects is closest to (farthest from) the camera?" over 3-4 objects."""

    name, category = "depth.extreme", "depth"
    pattern = re.compile(r"Which of these objects is (closest to|farthest from) the camera\?")

    def generate(self, scene, context):
        for wording in ("closest to", "farthest from"):
            beats = self._beats(scene, wording)
            winners = _extreme(scene, scene.nameable(), beats)
            for winner, beaten in self._limit(winners, context, scene, f"{self.name}|{wording}"):
                yield from self._questions(
                    scene,
                    context,
                    f"Which of these objects is {wording} the camera?",
                    scene.label(winner),
                    [scene.label(other) for other in beaten],
                    (winner.object_id,),
                    7 + _metric_bonus(winner),
                    {"extreme": wording, "object": winner.scene_id},
                    sizes=(3, 4),
                )

    @staticmethod
    def _beats(scene: Scene, wording: str) -> Callable[[SceneObject, SceneObject], bool | None]:
        if wording == "closest to":
            return lambda a, b: facts.closer_to_camera(scene, a, b)
        return lambda a, b: facts.closer_to_camera(scene, b, a)

    def truth(self, scene, match, option):
        return None

    def solve(self, scene, question, options):
        match = self.pattern.fullmatch(question.strip())
        if match is None:
            return None
        objects = [scene.resolve(option) for option in options]
        if any(obj is None for obj in objects) or len({obj.object_id for obj in objects}) != len(objects):
            return None
        return _solve_extreme(objects, self._beats(scene, match.group(1)))


# -- distance ---------------------------------------------------------------------------------------
class DistanceCompare(Template):
    """ "Which object is closer to the sofa, the lamp or the table?" (3D distances)."""

    name, category = "distance.compare", "distance"
    pattern = re.compile(r"Which object is closer to (the .+?), (the .+?) or (the .+)\?")

    def generate(self, scene, context):
        proposals = []
        nameable = _salient(scene, MAX_TRIPLE_OBJECTS)
        for reference in nameable:
            for first, second in itertools.combinations(
                [o for o in nameable if o.object_id != reference.object_id], 2
            ):
                if facts.nearer_to(scene, reference, first, second) is not None:
                    proposals.append((reference, first, second))
        for reference, first, second in self._limit(proposals, context, scene, self.name):
            nearer = first if facts.nearer_to(scene, reference, first, second) else second
            farther = second if nearer is first else first
            question = (
                f"Which object is closer to {scene.referring_expression(reference)}, "
                f"{scene.referring_expression(first)} or {scene.referring_expression(second)}?"
            )
            yield from self._questions(
                scene,
                context,
                question,
                scene.label(nearer),
                [scene.label(farther)],
                (reference.object_id, first.object_id, second.object_id),
                7 + _metric_bonus(reference, first, second),
                {"reference": reference.scene_id, "nearer": nearer.scene_id},
                sizes=(2,),
                level="medium",
            )

    def truth(self, scene, match, option):
        reference, first, second = (scene.resolve(match.group(index)) for index in (1, 2, 3))
        candidate = scene.resolve(option)
        if None in (reference, first, second, candidate):
            return None
        if candidate.object_id not in (first.object_id, second.object_id):
            return False
        other = second if candidate.object_id == first.object_id else first
        return facts.nearer_to(scene, reference, candidate, other)


class DistanceClosest(Template):
    """ "Which of these objects is closest to the table?" over 3 objects (3D distances)."""

    name, category = "distance.closest", "distance"
    pattern = re.compile(r"Which of these objects is closest to (the .+)\?")

    def generate(self, scene, context):
        proposals = []
        salient = _salient(scene, MAX_TRIPLE_OBJECTS)
        for reference in salient:
            others = [o for o in salient if o.object_id != reference.object_id]
            for winner, beaten in _extreme(scene, others, partial(facts.nearer_to, scene, reference)):
                proposals.append((reference, winner, beaten))
        for reference, winner, beaten in self._limit(proposals, context, scene, self.name):
            yield from self._questions(
                scene,
                context,
                f"Which of these objects is closest to {scene.referring_expression(reference)}?",
                scene.label(winner),
                [scene.label(other) for other in beaten],
                (reference.object_id, winner.object_id),
                8 + _metric_bonus(reference, winner),
                {"reference": reference.scene_id, "closest": winner.scene_id},
                sizes=(3, 4),
                level="hard",
            )

    def truth(self, scene, match, option):
        return None

    def solve(self, scene, question, options):
        match = self.pattern.fullmatch(question.strip())
        if match is None:
            return None
        reference = scene.resolve(match.group(1))
        objects = [scene.resolve(option) for option in options]
        if reference is None or any(obj is None for obj in objects):
            return None
        if len({obj.object_id for obj in objects}) != len(objects) or reference.object_id in {
            o.object_id for o in objects
        }:
            return None
        return _solve_extreme(objects, lambda a, b: facts.nearer_to(scene, reference, a, b))


class DistanceInImage(Template):
    """ "In the image, which object appears closer to the sofa, the lamp or the table?" (box centres)."""

    name, category = "distance.image", "distance"
    pattern = re.compile(r"In the image, which object appears closer to (the .+?), (the .+?) or (the .+)\?")

    def generate(self, scene, context):
        proposals = []
        nameable = _salient(scene, MAX_TRIPLE_OBJECTS)
        for reference in nameable:
            for first, second in itertools.combinations(
                [o for o in nameable if o.object_id != reference.object_id], 2
            ):
                if facts.nearer_in_image(reference, first, second) is not None:
                    proposals.append((reference, first, second))
        for reference, first, second in self._limit(proposals, context, scene, self.name):
            nearer = first if facts.nearer_in_image(reference, first, second) else second
            farther = second if nearer is first else first
            question = (
                f"In the image, which object appears closer to {scene.referring_expression(reference)}, "
                f"{scene.referring_expression(first)} or {scene.referring_expression(second)}?"
            )
            yield from self._questions(
                scene,
                context,
                question,
                scene.label(nearer),
                [scene.label(farther)],
                (reference.object_id, first.object_id, second.object_id),
                5,
                {"reference": reference.scene_id, "nearer_in_image": nearer.scene_id},
                sizes=(2,),
                level="medium",
            )

    def truth(self, scene, match, option):
        reference, first, second = (scene.resolve(match.group(index)) for index in (1, 2, 3))
        candidate = scene.resolve(option)
        if None in (reference, first, second, candidate):
            return None
        if candidate.object_id not in (first.object_id, second.object_id):
            return False
        other = second if candidate.object_id == first.object_id else first
        return facts.nearer_in_image(reference, candidate, other)


# -- count ------------------------------------------------------------------------------------------
COUNT_QUESTION = re.compile(r"How many (.+?) are there in the image\?")


class CountHowMany(Template):
    """ "How many chairs are there in the image?" counted in the filtered scene (duplicates merged)."""

    name, category = "count.how_many", "count"
    pattern = COUNT_QUESTION

    def generate(self, scene, context):
        names: dict[str, str] = {}
        for obj in scene.objects:
            names.setdefault(obj.lemma, obj.name)
        for lemma, name in self._limit(sorted(names.items()), context, scene, self.name):
            count = scene.count(lemma)
            distractors = [str(value) for value in (count + 1, count - 1, count + 2, count - 2) if value >= 0]
            yield from self._questions(
                scene,
                context,
                f"How many {pluralize(name)} are there in the image?",
                str(count),
                distractors,
                (lemma,),
                5 + (1 if count >= 2 else 0),
                {"noun": lemma, "count": count},
            )

    def truth(self, scene, match, option):
        if not option.strip().isdigit():
            return None
        return scene.count(lemmatize_phrase(match.group(1))) == int(option)


# -- existence --------------------------------------------------------------------------------------
def absent_names(scene: Scene, context: GenerationContext) -> list[str]:
    """Names from the context's vocabulary that the scene has nothing of (synonyms included)."""
    present = scene.name_vocabulary()
    blocked = set(present)
    for group in SYNONYM_GROUPS:
        if group & present:
            blocked |= group
    names = []
    for name in dict.fromkeys(context.absent_names):
        lemma = lemmatize_phrase(name)
        if (
            lemma
            and lemma not in blocked
            and not any(lemma in group for group in SYNONYM_GROUPS if group & present)
        ):
            names.append(name)
    return names


class ExistenceVerify(Template):
    """ "Is there a mug in the image?" -> yes (a scene object) / no (a name the scene has nothing of)."""

    name, category = "existence.verify", "existence"
    pattern = re.compile(r"Is there (?:a|an) (.+?) in the image\?")

    def generate(self, scene, context):
        present = sorted({obj.name for obj in scene.objects})
        proposals = [(name, True) for name in present] + [
            (name, False) for name in absent_names(scene, context)
        ]
        for name, exists in self._limit(proposals, context, scene, self.name):
            question = f"Is there {article(name)} {name} in the image?"
            correct = YES if exists else NO
            yield from self._questions(
                scene,
                context,
                question,
                correct,
                [NO if exists else YES],
                (name,),
                5 if exists else 4,
                {"name": name, "exists": exists},
                sizes=(2,),
            )

    def truth(self, scene, match, option):
        return _yes_no(scene.count(lemmatize_phrase(match.group(1))) > 0, option)


class ExistenceWhich(Template):
    """ "Which of these objects can be seen in the image?" -> the one present name among absent ones."""

    name, category = "existence.which", "existence"
    pattern = re.compile(r"Which of these objects can be seen in the image\?")

    def generate(self, scene, context):
        absent = absent_names(scene, context)
        present = sorted({obj.name for obj in scene.objects})
        for name in self._limit(present, context, scene, self.name):
            yield from self._questions(
                scene,
                context,
                "Which of these objects can be seen in the image?",
                name,
                absent,
                (name,),
                5,
                {"present": name},
                sizes=(3, 4),
            )

    def truth(self, scene, match, option):
        return scene.count(lemmatize_phrase(option)) > 0


TEMPLATES: tuple[Template, ...] = (
    RelationWhere(),
    RelationVerify(),
    RelationWhich(),
    ReachVerify(),
    ReachWhich(),
    SizeCompare(),
    SizeBiggest(),
    SizeInImage(),
    OrientationFacing(),
    OrientationFacesCamera(),
    OrientationPerspective(),
    OrientationBox(),
    LocationHalf(),
    LocationThird(),
    LocationHeight(),
    LocationQuadrant(),
    DepthCompare(),
    DepthExtreme(),
    DistanceCompare(),
    DistanceClosest(),
    DistanceInImage(),
    CountHowMany(),
    ExistenceVerify(),
    ExistenceWhich(),
)
"""Every template, in a fixed order (the solver tries them in this order)."""


def generate_template_questions(
    scene: Scene, context: GenerationContext | None = None
) -> list[TemplateQuestion]:
    """Every question the templates propose for `scene` (before balancing), de-duplicated by text and options.

    Example:
        >>> from assets.stvqa.scene import Scene, SceneObject
        >>> cup = SceneObject("1", "cup", "cup", (), (), (100, 500, 200, 600), (10.0, 50.0, 20.0, 60.0), "cup.1")
        >>> questions = generate_template_questions(Scene("1", 100, 100, [cup], []))
        >>> sorted({q.category for q in questions})
        ['count', 'existence', 'instance_location']
    """
    context = context or GenerationContext()
    seen: set[tuple[str, tuple[str, ...]]] = set()
    questions: list[TemplateQuestion] = []
    for template in TEMPLATES:
        for question in template.generate(scene, context):
            key = (question.question, question.options)
            if key in seen or len(set(question.options)) != len(question.options):
                continue
            seen.add(key)
            questions.append(question)
    return questions


@dataclass(frozen=True)
class SolverAnswer:
    """The solver's reading of one question: the letter (or `None`) and which template it recognised."""

    letter: str | None
    template: str | None
    reason: str


def solve_question(scene: Scene, question: str, options: Sequence[str]) -> SolverAnswer:
    """Answer a template question from the scene graph (the offline pass@2 backend).

    Returns the letter of the one option the scene shows true (all others false), or no letter with the
    reason: the question matches no template, or the scene does not settle it.

    Example:
        >>> from assets.stvqa.scene import Scene, SceneObject
        >>> cup = SceneObject("1", "cup", "cup", (), (), (100, 500, 200, 600), (10.0, 50.0, 20.0, 60.0), "cup.1")
        >>> solve_question(Scene("1", 100, 100, [cup], []), "How many cups are there in the image?", ["2", "1"]).letter
        'B'
    """
    for template in TEMPLATES:
        if template.pattern.fullmatch(question.strip()) is None:
            continue
        index = template.solve(scene, question, options)
        if index is not None:
            return SolverAnswer("ABCD"[index], template.name, "answered from the scene graph")
        return SolverAnswer(None, template.name, f"the scene does not settle this {template.name} question")
    return SolverAnswer(None, None, "the question matches no template the solver knows")
