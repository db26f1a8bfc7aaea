"""SpatialThinker reward: dense, lexicographically gated format -> count -> accuracy -> spatial.

Terms (SpatialThinker project page and its public reward code; neither is part of this repository),
for ``P`` predicted and ``G`` ground-truth scene objects:

* format ``F`` in {0, 1}: the ``<observe>``, ``<scene>``, ``<think>``, ``<answer>`` blocks each appear exactly
  once and in that order, and the ``<scene>`` JSON is valid (every object has exactly ``id`` "name.N"
  and a 4-number ``bbox`` with positive area, relations are subject-predicate-object triplets of
  ids, object ids are unique).
* count ``C = 0.7 * max(0, 1 - |P - G| / max(G, 1)) + 0.3 * max(0, 1 - |P_rel - G_rel| / max(G_rel, 1))``;
  the object term alone when the ground truth has no relations.
* accuracy ``A`` in {0, 1}: the ``<answer>`` names the gold option of ``answer_option_text``
  (``"(X) option text"``): its letter, in any form of
  :func:`~training.rewards.parsing.read_choice_answer` (``"(C)"``, ``"C"``, ``"C."``, ``"C)"``), and,
  when option text follows the letter, that option's text (case, spaces and a final period
  ignored). A letter alone counts when ``accept_letter_only``. The evaluator uses the same
  :func:`answer_matches`; the accepted and rejected forms are tabled in ``training/rewards/README.md``.
* spatial ``S``: objects matched one-to-one by the Hungarian algorithm on the cost
  ``2 (1 - sim) + (1 - (CIoU + 1) / 2)`` (label similarity of :mod:`training.rewards.similarity`, CIoU
  of :mod:`training.rewards.geometry`), then ``S = (1 / G) sum_matched (CIoU + 1) / 2`` (unmatched
  ground-truth objects count 0; ``(CIoU + 1) / 2`` is clipped to ``[0, 1]``). With no ground-truth
  objects, ``S = 1`` when none were predicted, else 0. Boxes are compared in original-image pixels.
* gating: ``F = 0`` zeroes every other term; ``S`` counts only with a correct answer.
* total ``= 0.1 F + 0.2 C + 0.5 A + 0.2 S``, in ``[0, 1]``.

>>> completion = ('<observe>a mug</observe><scene>{"objects": [{"id": "mug.1", "bbox": [64, 48, 128, 96]}], '
...               '"relationships": []}</scene><think>left side</think><answer>(A) left</answer>')
>>> gt = {"objects": [{"id": "mug.1", "bbox_2d": [100, 100, 200, 200]}], "relationships": []}
>>> score = score_spatialthinker(completion, answer_option_text="(A) left", gt_scene=gt, image_size=(640, 480))
>>> score.format, score.count, score.accuracy, round(score.spatial, 4), round(score.total, 4)
(1.0, 1.0, 1.0, 1.0, 1.0)
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from data_contracts.boxes import BoxError, grid_to_pixels
from training.rewards.geometry import pairwise_ciou
from training.rewards.matching import hungarian_min
from training.rewards.parsing import (
    ChoiceAnswer,
    choice_answer_matches,
    load_json,
    parse_option_letter,
    parse_spatialthinker,
    read_choice_answer,
    scene_object_name,
)
from training.rewards.similarity import LabelSimilarity

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SpatialThinkerConfig:
    """Weights and switches of the SpatialThinker reward.

    Args:
        format_weight (`float`, defaults to `0.1`), count_weight (`float`, defaults to `0.2`),
        accuracy_weight (`float`, defaults to `0.5`), spatial_weight (`float`, defaults to `0.2`):
            weights of the four terms.
        object_count_weight (`float`, defaults to `0.7`), relation_count_weight (`float`, defaults to `0.3`):
            split of the count term when the ground truth has relations.
        semantic_cost_weight (`float`, defaults to `2.0`), box_cost_weight (`float`, defaults to `1.0`):
            Hungarian cost ``semantic * (1 - sim) + box * (1 - (CIoU + 1) / 2)``.
        normalize_boxes (`bool`, defaults to `False`):
            Compare boxes after dividing x by the width and y by the height (the public code's frame)
            instead of in pixels; CIoU's distance and aspect terms differ between the two.
        accept_letter_only (`bool`, defaults to `True`): a bare option letter answers correctly.
        label_similarity ([`LabelSimilarity`]): label similarity (ids lose their ``.N`` suffix).
    """

    format_weight: float = 0.1
    count_weight: float = 0.2
    accuracy_weight: float = 0.5
    spatial_weight: float = 0.2
    object_count_weight: float = 0.7
    relation_count_weight: float = 0.3
    semantic_cost_weight: float = 2.0
    box_cost_weight: float = 1.0
    normalize_boxes: bool = False
    accept_letter_only: bool = True
    label_similarity: LabelSimilarity = field(
        default_factory=lambda: LabelSimilarity(word_normalizer="singular", strip_instance_suffix=True)
    )

    def __post_init__(self) -> None:
        for name in (
            "format_weight",
            "count_weight",
            "accuracy_weight",
            "spatial_weight",
            "object_count_weight",
            "relation_count_weight",
            "semantic_cost_weight",
            "box_cost_weight",
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"SpatialThinkerConfig.{name} must be finite and >= 0, got {value!r}")

    @property
    def total_range(self) -> tuple[float, float]:
        """Bounds of ``SpatialThinkerScore.total``."""
        return 0.0, self.format_weight + self.count_weight + self.accuracy_weight + self.spatial_weight


@dataclass(frozen=True)
class SpatialThinkerScore:
    """Every term of the SpatialThinker reward for one completion (gated values).

    Attributes:
        total: weighted sum of the four gated terms.
        format: 0 or 1.
        count: count reward (0 when the format fails).
        accuracy: 0 or 1 (0 when the format fails).
        spatial: spatial reward (0 unless the format holds and the answer is correct).
        answer_correct: the answer matches, whatever the format (for accuracy logging).
        has_answer: a closed ``<answer>`` was found.
        n_pred_objects: objects in the predicted scene (0 when it is invalid).
        n_gt_objects: usable ground-truth objects.
        mean_matched_ciou: mean ``(CIoU + 1) / 2`` over matched pairs, when the spatial term was computed.
        problems: reasons the completion is malformed.
    """

    total: float
    format: float
    count: float
    accuracy: float
    spatial: float
    answer_correct: bool
    has_answer: bool
    n_pred_objects: int
    n_gt_objects: int
    mean_matched_ciou: float | None
    problems: tuple[str, ...]


@dataclass(frozen=True)
class SceneTruth:
    """Ground-truth scene of one question: object boxes in pixels, names and relation count."""

    boxes: np.ndarray
    names: tuple[str, ...]
    n_relations: int


def _image_size(image_size: Any) -> tuple[float, float]:
    try:
        width, height = (float(value) for value in image_size)
    except (TypeError, ValueError) as error:
        raise ValueError(f"image_size must be (width, height), got {image_size!r}") from error
    if not (math.isfinite(width) and math.isfinite(height) and width > 0 and height > 0):
        raise ValueError(f"image_size must be positive, got {image_size!r}")
    return width, height


def read_gt_scene(gt_scene: Any, image_size: tuple[float, float]) -> SceneTruth:
    """Read the ``gt_scene`` cell (a struct/dict or its JSON string); boxes go to pixels.

    Objects are ``{"id": "name.N", "bbox_2d": [x1, y1, x2, y2]}`` on the 0..1000 grid; those without a
    finite box of positive area are skipped.

    >>> truth = read_gt_scene('{"objects": [{"id": "cup.1", "bbox_2d": [0, 0, 500, 500]}]}', (200, 100))
    >>> truth.boxes.tolist(), truth.names, truth.n_relations
    ([[0.0, 0.0, 100.0, 50.0]], ('cup',), 0)
    """
    width, height = _image_size(image_size)
    if isinstance(gt_scene, str):
        gt_scene, error = load_json(gt_scene)
        if error is not None:
            logger.warning("gt_scene is not valid JSON (%s); treating it as empty", error)
            gt_scene = None
    if not isinstance(gt_scene, dict):
        gt_scene = {}
    boxes: list[list[float]] = []
    names: list[str] = []
    for item in gt_scene.get("objects") or []:
        if not isinstance(item, dict):
            continue
        object_id = item.get("id")
        try:
            box = grid_to_pixels(list(item.get("bbox_2d") or ()), round(width), round(height))
        except (BoxError, TypeError, ValueError):
            logger.debug("skipping ground-truth object with an unreadable box: %r", item)
            continue
        if box[2] <= box[0] or box[3] <= box[1]:
            continue
        boxes.append(box)
        names.append(scene_object_name(object_id) if isinstance(object_id, str) else "")
    relations = gt_scene.get("relationships") or []
    n_relations = sum(1 for relation in relations if isinstance(relation, dict))
    return SceneTruth(np.asarray(boxes, dtype=np.float64).reshape(-1, 4), tuple(names), n_relations)


def read_gold_option(gold_option_text: Any) -> ChoiceAnswer | None:
    """The gold letter and option text of an ``answer_option_text`` cell (``"(X) option text"``).

    The letter is the cell's leading token (never a letter inside the option text); ``None`` when
    the cell does not start with one.

    >>> read_gold_option("(C) Turn a bit to the left")
    ChoiceAnswer(letter='C', option_text='Turn a bit to the left')
    """
    if not isinstance(gold_option_text, str) or parse_option_letter(gold_option_text) is None:
        return None
    return read_choice_answer(gold_option_text)


def answer_matches(predicted: str | None, gold_option_text: str, *, accept_letter_only: bool = True) -> bool:
    """Whether an ``<answer>`` text names the gold ``"(X) option text"`` (reward and evaluator alike).

    >>> answer_matches("C. Turn a bit to the left", "(C) Turn a bit to the left")
    True
    >>> answer_matches("(B) red car.", "(B) Red car"), answer_matches("B", "(B) red car"), answer_matches("A", "(B) x")
    (True, True, False)
    """
    gold = read_gold_option(gold_option_text)
    if gold is None:
        return False
    return choice_answer_matches(
        read_choice_answer(predicted), gold.letter, gold.option_text, accept_letter_only=accept_letter_only
    )


def count_reward(
    n_pred_objects: int,
    n_gt_objects: int,
    n_pred_relations: int,
    n_gt_relations: int,
    config: SpatialThinkerConfig,
) -> float:
    """Count term: object (and, with GT relations, relation) count agreement.

    >>> round(count_reward(2, 4, 1, 1, SpatialThinkerConfig()), 4)
    0.65
    """
    objects = max(0.0, 1.0 - abs(n_pred_objects - n_gt_objects) / max(n_gt_objects, 1))
    if n_gt_relations == 0:
        return objects
    relations = max(0.0, 1.0 - abs(n_pred_relations - n_gt_relations) / max(n_gt_relations, 1))
    return config.object_count_weight * objects + config.relation_count_weight * relations


def spatial_match(
    pred_boxes: np.ndarray,
    pred_names,
    truth: SceneTruth,
    image_size: tuple[float, float],
    config: SpatialThinkerConfig,
) -> tuple[float, float | None]:
    """Spatial term and mean matched ``(CIoU + 1) / 2`` for pixel boxes against the ground truth.

    >>> truth = SceneTruth(np.array([[0.0, 0, 10, 10]]), ("cup",), 0)
    >>> spatial_match(np.array([[0.0, 0, 10, 10]]), ["cup.1"], truth, (100, 100), SpatialThinkerConfig())
    (1.0, 1.0)
    """
    n_gt = len(truth.names)
    if n_gt == 0:
        return (1.0 if len(pred_names) == 0 else 0.0), None
    if len(pred_names) == 0:
        return 0.0, None
    pred, gt = pred_boxes, truth.boxes
    if config.normalize_boxes:
        width, height = image_size
        scale = np.array([width, height, width, height], dtype=np.float64)
        pred, gt = pred / scale, gt / scale
    mapped = np.clip((pairwise_ciou(pred, gt) + 1.0) / 2.0, 0.0, 1.0)
    similarity = config.label_similarity.matrix(pred_names, truth.names)
    cost = config.semantic_cost_weight * (1.0 - similarity) + config.box_cost_weight * (1.0 - mapped)
    rows, cols = hungarian_min(cost)
    matched = mapped[rows, cols]
    return float(matched.sum() / n_gt), (float(matched.mean()) if len(matched) else None)


def score_spatialthinker(
    completion: Any,
    *,
    answer_option_text: str,
    gt_scene: Any,
    image_size: tuple[int, int],
    config: SpatialThinkerConfig | None = None,
) -> SpatialThinkerScore:
    """Score one SpatialThinker completion.

    Args:
        completion (`str` or `list[dict]`): the completion.
        answer_option_text (`str`): the gold ``"(X) option text"`` (STVQA ``answer_option_text``).
        gt_scene (`dict` or JSON `str`): ``{"objects": [{"id", "bbox_2d" (0..1000)}], "relationships": [...]}``.
        image_size (`tuple[int, int]`): ``(width, height)`` of the original image; predicted boxes
            are in its pixels.
        config ([`SpatialThinkerConfig`], *optional*): weights; the paper's when omitted.

    Returns:
        [`SpatialThinkerScore`]

    Raises:
        `ValueError`: when ``image_size`` is not two positive numbers or the gold text is missing.

    >>> score_spatialthinker("<answer>(A) left</answer>", answer_option_text="(A) left",
    ...                      gt_scene={"objects": []}, image_size=(10, 10)).total
    0.0
    """
    config = config or SpatialThinkerConfig()
    if not isinstance(answer_option_text, str) or not answer_option_text.strip():
        raise ValueError(f"answer_option_text must be the gold option text, got {answer_option_text!r}")
    size = _image_size(image_size)
    truth = read_gt_scene(gt_scene, size)
    parse = parse_spatialthinker(completion)
    correct = answer_matches(
        parse.answer_text, answer_option_text, accept_letter_only=config.accept_letter_only
    )
    n_pred = len(parse.objects)
    if not parse.format_ok:
        return SpatialThinkerScore(
            total=0.0,
            format=0.0,
            count=0.0,
            accuracy=0.0,
            spatial=0.0,
            answer_correct=correct,
            has_answer=parse.answer_text is not None,
            n_pred_objects=n_pred,
            n_gt_objects=len(truth.names),
            mean_matched_ciou=None,
            problems=parse.problems,
        )
    count = count_reward(n_pred, len(truth.names), len(parse.relations), truth.n_relations, config)
    accuracy = 1.0 if correct else 0.0
    spatial, mean_ciou = 0.0, None
    if correct:
        pred_boxes = np.asarray([obj.bbox for obj in parse.objects], dtype=np.float64).reshape(-1, 4)
        spatial, mean_ciou = spatial_match(pred_boxes, [obj.id for obj in parse.objects], truth, size, config)
    total = (
        config.format_weight
        + config.count_weight * count
        + config.accuracy_weight * accuracy
        + config.spatial_weight * spatial
    )
    return SpatialThinkerScore(
        total=float(total),
        format=1.0,
        count=float(count),
        accuracy=accuracy,
        spatial=float(spatial),
        answer_correct=correct,
        has_answer=parse.answer_text is not None,
        n_pred_objects=n_pred,
        n_gt_objects=len(truth.names),
        mean_matched_ciou=mean_ciou,
        problems=parse.problems,
    )
