"""SpatialCORE reward: answer + format + answer-gated, confidence-weighted spatial reward.

Equations of the SpatialCORE paper (Sec. 3.2 and Appendix A.3/A.4; the paper is not part of this
repository), in the terms of this module (``P`` valid predicted boxes of the reasoning segment, ``G`` pseudo-GT boxes):

* Eq. 3 / 12, pair score: ``R[j, k] = (w_iou * max(0, IoU(b_j, g_k) - tau) + w_label * Sim(l_j, l_k)) * v_k``
  (``Sim`` is the bag-of-words cosine of Eq. 13, :mod:`training.rewards.similarity`).
* Eq. 4 / 14, matching: Hungarian assignment ``M*`` maximising ``sum R`` over one-to-one pairs; it
  holds ``min(P, G)`` pairs, zero-score pairs included (as in the public code).
* Eq. 5-6, confidence: ``omega_j = beta + (1 - beta)(1 - H_j)`` (:mod:`training.rewards.confidence`);
  ``omega = 1`` when no uncertainties are given or ``use_confidence`` is off.
* Eq. 7, precision: ``P_i = (1 / |M*|) sum_{(j,k) in M*} omega_j R[j, k]`` (0 without pairs).
* Eq. 8, recall: ``Recall_i = (sum_k v_k)^-1 sum_k max_j R[j, k]``; ``F_alpha = (1 + a^2) P R / (a^2 P + R)``
  (0 when ``sum v = 0`` or the denominator is 0).
* Appendix A.3/A.4 shaping: ``spatial = F_alpha - over_prediction_penalty * (P - |M*|)``; with
  pseudo-GT but no valid box, ``spatial = -min(1, missing_box_penalty * sum_k v_k)``; without
  pseudo-GT, ``spatial = 0``. The spatial reward is floored at ``-1``.
* Eq. 9, answer: ``R_ans = 1`` when the single answer letter after the single ``</think>`` equals the
  gold letter (the ``answer`` column, derived upstream from the integer index), else 0. The letter
  stands alone, in either case (:func:`~training.rewards.parsing.read_spatialcore_answer`; the
  accepted and rejected forms are tabled in ``training/rewards/README.md``); the evaluator reads it
  with the same function.
* Eq. 10, total: ``r = R_ans + lambda_fmt * R_fmt + attempt_bonus + lambda_s * g(R_ans) * spatial``,
  ``g(1) = 1``, ``g(0) = gamma``, the gate applied to a positive spatial reward only (a negative one is
  never softened).

Format reward ``R_fmt`` in ``[0, 1]`` (paper Sec. 3.2.2: a valid reasoning segment, a single final
answer token, a valid grounding format): 0 unless the completion has exactly one ``</think>``, no
stray ``<think>``, and one option letter alone after it (the answer grammar above); otherwise
``1 - penalties``, floored at 0, where the penalties are the public reference's format checks
expressed as fractions of its format weight 0.2: any ``bbox_2d`` after ``</think>`` (1.0), each extra
repeat of a label (0.25, at most 0.75), each repeated identical box (0.5), and, for the "valid grounding
format" property, each malformed or invalid box entry in the reasoning (0.25, at most 0.75).
The attempt bonus (A.4, 0.05) is added when the structure is valid, pseudo-GT exists, and at least one
valid box's label shares a word (stop words aside) with the question or options.

>>> completion = '{"bbox_2d": [100, 100, 300, 300], "label": "red car"}\\nThe car is left.</think>A'
>>> score = score_spatialcore(completion, answer="A", options=["left", "right"], question="Where is the red car?",
...                           pseudo_gt=[{"bbox_2d": [100, 100, 300, 300], "label": "red car", "validity": 1.0}])
>>> round(score.total, 4), score.answer, score.format, round(score.spatial, 4)
(2.05, 1.0, 1.0, 0.8)
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from training.rewards.confidence import BoxAlignmentError, confidence_weights
from training.rewards.geometry import pairwise_iou
from training.rewards.matching import hungarian_max
from training.rewards.parsing import (
    SpatialCoreParse,
    gold_option_letter,
    is_allowed_letter,
    label_words,
    load_json,
    parse_spatialcore,
)
from training.rewards.similarity import LabelSimilarity

logger = logging.getLogger(__name__)

_WORD = re.compile(r"[a-z0-9]+")

# Words that do not make a box label "about" the question for the attempt bonus.
# fmt: off
ANCHOR_STOP_WORDS = frozenset({
    "a", "an", "the", "of", "in", "on", "at", "to", "from", "by", "with", "and", "or", "is", "are", "be",
    "it", "its", "this", "that", "these", "those", "which", "what", "where", "who", "how", "for", "as",
    "than", "then", "there", "here", "image", "picture", "photo",
})
# fmt: on


@dataclass(frozen=True)
class SpatialCoreConfig:
    """Constants of the SpatialCORE reward (paper Table 4 and the public code).

    Args:
        iou_weight (`float`, defaults to `0.8`): ``w_iou`` of Eq. 3.
        label_weight (`float`, defaults to `0.2`): ``w_label`` of Eq. 3.
        iou_margin (`float`, defaults to `0.25`): ``tau_iou`` of Eq. 3.
        confidence_floor (`float`, defaults to `0.1`): ``beta`` of Eq. 6.
        f_alpha (`float`, defaults to `2.0`): ``alpha`` of the F-measure in Eq. 8.
        answer_gate (`float`, defaults to `0.3`): ``gamma = g(0)`` of Eq. 10.
        format_weight (`float`, defaults to `0.2`): ``lambda_fmt`` of Eq. 10.
        spatial_weight (`float`, defaults to `1.0`): ``lambda_s`` of Eq. 10.
        over_prediction_penalty (`float`, defaults to `0.3`): per valid box left unmatched.
        missing_box_penalty (`float`, defaults to `0.3`): times the validity sum, when no box was produced.
        attempt_bonus (`float`, defaults to `0.05`): added to the format term (A.4).
        use_confidence (`bool`, defaults to `True`): ablation switch for Eq. 5-6 (``omega = 1`` when off).
        use_validity (`bool`, defaults to `True`): ablation switch for ``v_k`` (all 1 when off).
        use_answer_gate (`bool`, defaults to `True`): ablation switch for ``g`` (``g = 1`` when off).
        duplicate_label_penalty (`float`, defaults to `0.25`): per extra repeat of a label, fraction of ``R_fmt``.
        max_duplicate_label_penalty (`float`, defaults to `0.75`): cap of the above.
        duplicate_box_penalty (`float`, defaults to `0.5`): per repeated identical box, fraction of ``R_fmt``.
        invalid_box_penalty (`float`, defaults to `0.25`): per malformed/invalid box entry in the reasoning.
        max_invalid_box_penalty (`float`, defaults to `0.75`): cap of the above.
        post_think_box_penalty (`float`, defaults to `1.0`): when any ``bbox_2d`` follows ``</think>``.
        spatial_floor (`float`, defaults to `-1.0`): lower bound of the spatial reward.
        score_truncated_grounding (`bool`, defaults to `True`):
            Score the boxes of an unfinished reasoning segment (no ``</think>``). Such a completion has
            no answer and no format reward either way; when off its spatial reward is 0 (the public
            code's neutral choice, which lets a rollout that truncates dodge the missing-box penalty).
        label_similarity ([`LabelSimilarity`]): the ``Sim`` of Eq. 13.
    """

    iou_weight: float = 0.8
    label_weight: float = 0.2
    iou_margin: float = 0.25
    confidence_floor: float = 0.1
    f_alpha: float = 2.0
    answer_gate: float = 0.3
    format_weight: float = 0.2
    spatial_weight: float = 1.0
    over_prediction_penalty: float = 0.3
    missing_box_penalty: float = 0.3
    attempt_bonus: float = 0.05
    use_confidence: bool = True
    use_validity: bool = True
    use_answer_gate: bool = True
    duplicate_label_penalty: float = 0.25
    max_duplicate_label_penalty: float = 0.75
    duplicate_box_penalty: float = 0.5
    invalid_box_penalty: float = 0.25
    max_invalid_box_penalty: float = 0.75
    post_think_box_penalty: float = 1.0
    spatial_floor: float = -1.0
    score_truncated_grounding: bool = True
    label_similarity: LabelSimilarity = field(default_factory=LabelSimilarity)

    def __post_init__(self) -> None:
        for name in (
            "iou_weight",
            "label_weight",
            "iou_margin",
            "format_weight",
            "spatial_weight",
            "over_prediction_penalty",
            "missing_box_penalty",
            "attempt_bonus",
            "duplicate_label_penalty",
            "max_duplicate_label_penalty",
            "duplicate_box_penalty",
            "invalid_box_penalty",
            "max_invalid_box_penalty",
            "post_think_box_penalty",
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"SpatialCoreConfig.{name} must be finite and >= 0, got {value!r}")
        for name in ("confidence_floor", "answer_gate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"SpatialCoreConfig.{name} must be in [0, 1], got {value!r}")
        if not (math.isfinite(self.f_alpha) and self.f_alpha > 0):
            raise ValueError(f"SpatialCoreConfig.f_alpha must be > 0, got {self.f_alpha!r}")
        if not (math.isfinite(self.spatial_floor) and self.spatial_floor <= 0):
            raise ValueError(f"SpatialCoreConfig.spatial_floor must be <= 0, got {self.spatial_floor!r}")

    @property
    def max_pair_score(self) -> float:
        """Largest possible ``R_BBox`` (IoU 1, identical labels, validity 1)."""
        return self.iou_weight * max(0.0, 1.0 - self.iou_margin) + self.label_weight

    @property
    def total_range(self) -> tuple[float, float]:
        """Bounds of ``SpatialCoreScore.total`` under this configuration."""
        low = self.spatial_weight * self.spatial_floor
        high = 1.0 + self.format_weight + self.attempt_bonus + self.spatial_weight * self.max_pair_score
        return low, high


@dataclass(frozen=True)
class SpatialCoreScore:
    """Every term of the SpatialCORE reward for one completion.

    Attributes:
        total: ``r_i`` of Eq. 10 (what the trainer receives).
        answer: ``R_ans`` (Eq. 9), 0 or 1.
        format: ``R_fmt`` in ``[0, 1]`` (before ``lambda_fmt``).
        attempt_bonus: the A.4 bonus actually given (0 or the configured value).
        spatial: ``R_spatial`` after over-prediction / missing-box penalties, before the gate.
        gated_spatial: ``lambda_s * g(R_ans) * spatial`` (gate on positive values only).
        precision: Eq. 7 (confidence weighted, before penalties).
        recall: Eq. 8 (before penalties).
        f_alpha: ``F_alpha(precision, recall)``.
        n_pred: valid predicted boxes in the reasoning segment (scored boxes).
        n_pseudo_gt: pseudo-GT boxes used (valid, positive validity).
        n_matched: pairs in the one-to-one assignment, ``min(n_pred, n_pseudo_gt)``.
        n_unmatched_pred: valid predicted boxes left without a pseudo-GT partner.
        mean_matched_iou: mean IoU over the assignment's pairs; ``None`` without pairs.
        mean_box_uncertainty: mean ``H`` of the scored boxes when uncertainties were given, else ``None``.
        truncated: no ``</think>`` in the completion.
        has_answer: an option letter could be read after the single ``</think>``.
        predicted_letter: that letter (``None`` when absent or beyond the options).
        problems: reasons the completion is malformed.
    """

    total: float
    answer: float
    format: float
    attempt_bonus: float
    spatial: float
    gated_spatial: float
    precision: float
    recall: float
    f_alpha: float
    n_pred: int
    n_pseudo_gt: int
    n_matched: int
    n_unmatched_pred: int
    mean_matched_iou: float | None
    mean_box_uncertainty: float | None
    truncated: bool
    has_answer: bool
    predicted_letter: str | None
    problems: tuple[str, ...]


@dataclass(frozen=True)
class PseudoGroundTruth:
    """Usable pseudo-GT boxes of one question: ``(G, 4)`` grid boxes, labels and validities."""

    boxes: np.ndarray
    labels: tuple[str, ...]
    validities: np.ndarray

    def __len__(self) -> int:
        return len(self.labels)


def read_pseudo_gt(pseudo_gt: Any, *, use_validity: bool = True) -> PseudoGroundTruth:
    """Read the ``pseudo_gt`` cell: a list of ``{"bbox_2d", "label", "validity"}`` (or its JSON string).

    Items without a finite 4-number box of positive area, or with a non-finite validity, are skipped;
    validities are clipped to ``[0, 1]`` (missing means 1) and items of validity 0 are skipped (they
    carry no weight in Eq. 3). With ``use_validity=False`` every validity is 1.

    >>> gt = read_pseudo_gt([{"bbox_2d": [0, 0, 10, 10], "label": "cup", "validity": 0.7}, {"bbox_2d": [1, 2]}])
    >>> len(gt), gt.validities.tolist()
    (1, [0.7])
    """
    if isinstance(pseudo_gt, str):
        pseudo_gt, error = load_json(pseudo_gt)
        if error is not None:
            logger.warning("pseudo_gt is not valid JSON (%s); treating it as empty", error)
            pseudo_gt = None
    boxes: list[list[float]] = []
    labels: list[str] = []
    validities: list[float] = []
    items = (
        pseudo_gt
        if isinstance(pseudo_gt, (list, tuple))
        else list(pseudo_gt)
        if pseudo_gt is not None
        else []
    )
    for item in items:
        if not isinstance(item, dict):
            logger.debug("skipping pseudo-GT item that is not a mapping: %r", item)
            continue
        try:
            box = np.asarray(item.get("bbox_2d"), dtype=np.float64).reshape(-1)
            validity = float(item.get("validity", 1.0)) if item.get("validity") is not None else 1.0
        except (TypeError, ValueError):
            logger.debug("skipping pseudo-GT item with unreadable numbers: %r", item)
            continue
        if box.shape != (4,) or not np.all(np.isfinite(box)) or box[2] <= box[0] or box[3] <= box[1]:
            logger.debug("skipping pseudo-GT item with an invalid box: %r", item)
            continue
        if not math.isfinite(validity):
            continue
        validity = min(max(validity, 0.0), 1.0) if use_validity else 1.0
        if validity <= 0.0:
            continue
        label = item.get("label")
        boxes.append(box.tolist())
        labels.append(label if isinstance(label, str) else "")
        validities.append(validity)
    return PseudoGroundTruth(
        boxes=np.asarray(boxes, dtype=np.float64).reshape(-1, 4),
        labels=tuple(labels),
        validities=np.asarray(validities, dtype=np.float64),
    )


def f_alpha_score(precision: float, recall: float, alpha: float) -> float:
    """``F_alpha = (1 + a^2) P R / (a^2 P + R)``; 0 when the denominator is 0 (Eq. 8).

    >>> round(f_alpha_score(0.5, 0.8, 2.0), 4)
    0.7143
    """
    alpha_sq = alpha * alpha
    denominator = alpha_sq * precision + recall
    if denominator <= 0.0:
        return 0.0
    return (1.0 + alpha_sq) * precision * recall / denominator


@dataclass(frozen=True)
class SpatialTerms:
    """Output of :func:`spatial_reward_terms`."""

    spatial: float
    precision: float
    recall: float
    f_alpha: float
    n_matched: int
    mean_matched_iou: float | None


def spatial_reward_terms(
    pred_boxes: np.ndarray,
    pred_labels: Sequence[str],
    reference: PseudoGroundTruth,
    omega: np.ndarray,
    config: SpatialCoreConfig,
) -> SpatialTerms:
    """Eq. 3-8 plus the A.3/A.4 penalties for ``P`` predicted boxes against the pseudo-GT.

    Args:
        pred_boxes (`np.ndarray` of shape `(P, 4)`): predicted grid boxes (valid ones).
        pred_labels (`Sequence[str]`): their labels.
        reference ([`PseudoGroundTruth`]): usable pseudo-GT.
        omega (`np.ndarray` of shape `(P,)`): confidence weights (Eq. 6).
        config ([`SpatialCoreConfig`]): constants.

    Returns:
        [`SpatialTerms`]

    >>> gt = read_pseudo_gt([{"bbox_2d": [0, 0, 100, 100], "label": "cup", "validity": 1.0}])
    >>> terms = spatial_reward_terms(np.array([[0.0, 0, 100, 100]]), ["cup"], gt, np.ones(1), SpatialCoreConfig())
    >>> round(terms.precision, 4), round(terms.recall, 4), terms.n_matched
    (0.8, 0.8, 1)
    """
    n_pred, n_gt = len(pred_labels), len(reference)
    validity_sum = float(reference.validities.sum()) if n_gt else 0.0
    if n_gt == 0:
        return SpatialTerms(0.0, 0.0, 0.0, 0.0, 0, None)
    if n_pred == 0:
        spatial = max(config.spatial_floor, -config.missing_box_penalty * validity_sum)
        return SpatialTerms(spatial, 0.0, 0.0, 0.0, 0, None)

    iou = pairwise_iou(pred_boxes, reference.boxes)
    similarity = config.label_similarity.matrix(pred_labels, reference.labels)
    pair_score = (
        config.iou_weight * np.maximum(0.0, iou - config.iou_margin) + config.label_weight * similarity
    ) * reference.validities[None, :]
    rows, cols = hungarian_max(pair_score)
    n_matched = len(rows)
    precision = float(np.sum(omega[rows] * pair_score[rows, cols]) / n_matched) if n_matched else 0.0
    recall = float(pair_score.max(axis=0).sum() / validity_sum) if validity_sum > 0 else 0.0
    f_score = f_alpha_score(precision, recall, config.f_alpha) if validity_sum > 0 else 0.0
    spatial = f_score - config.over_prediction_penalty * (n_pred - n_matched)
    spatial = max(config.spatial_floor, spatial)
    mean_iou = float(iou[rows, cols].mean()) if n_matched else None
    return SpatialTerms(spatial, precision, recall, f_score, n_matched, mean_iou)


def _normalized_label(label: str) -> str:
    return " ".join(_WORD.findall(label.lower()))


def _structure_ok(parse: SpatialCoreParse, n_options: int) -> bool:
    return parse.has_valid_structure and is_allowed_letter(parse.answer_letter, n_options)


def format_reward(parse: SpatialCoreParse, n_options: int, config: SpatialCoreConfig) -> float:
    """``R_fmt`` in ``[0, 1]`` for a parsed completion (rules in the module docstring).

    >>> format_reward(parse_spatialcore("reasoning</think>B"), 4, SpatialCoreConfig())
    1.0
    >>> format_reward(parse_spatialcore("reasoning</think>The answer is B"), 4, SpatialCoreConfig())
    0.0
    """
    if not _structure_ok(parse, n_options):
        return 0.0
    penalty = 0.0
    if parse.boxes_after_reasoning:
        penalty += config.post_think_box_penalty
    reasoning_boxes = parse.reasoning_boxes
    labels = [_normalized_label(box.label) for box in reasoning_boxes]
    repeats = sum(count - 1 for label, count in Counter(label for label in labels if label).items())
    penalty += min(config.duplicate_label_penalty * repeats, config.max_duplicate_label_penalty)
    coordinates = [box.coords for box in parse.grounding_boxes]
    penalty += config.duplicate_box_penalty * (len(coordinates) - len(set(coordinates)))
    invalid = parse.malformed_box_entries + sum(1 for box in reasoning_boxes if not box.is_valid)
    penalty += min(config.invalid_box_penalty * invalid, config.max_invalid_box_penalty)
    return max(0.0, 1.0 - penalty)


def _anchor_words(question: Any, options: Sequence[Any]) -> frozenset[str]:
    texts = [question] if isinstance(question, str) else list(question) if isinstance(question, list) else []
    texts.extend(options)
    words: set[str] = set()
    for text in texts:
        if isinstance(text, str):
            words |= label_words(text)
    return frozenset(words - ANCHOR_STOP_WORDS)


def _as_options(options: Any) -> list[Any]:
    if options is None:
        return []
    if isinstance(options, str):
        value, error = load_json(options)
        return list(value) if error is None and isinstance(value, list) else [options]
    return list(options)


def score_spatialcore(
    completion: Any,
    *,
    answer: str,
    options: Sequence[str] | None,
    question: str | None,
    pseudo_gt: Any,
    box_uncertainty: Sequence[float] | None = None,
    config: SpatialCoreConfig | None = None,
) -> SpatialCoreScore:
    """Score one SpatialCORE completion (Eq. 3-10 and the A.4 shaping).

    Args:
        completion (`str` or `list[dict]`): the completion text or chat message list.
        answer (`str`): gold option letter (from the integer answer index upstream).
        options (`list[str]` or `None`): option texts; empty when the options are drawn in the image (A-D).
        question (`str` or `None`): question text (for the attempt bonus).
        pseudo_gt (`list[dict]` or JSON `str`): ``{"bbox_2d" (0..1000), "label", "validity"}`` items.
        box_uncertainty (`list[float]`, *optional*):
            ``H`` for each valid reasoning-segment box, in order (:func:`box_uncertainties`);
            ``None`` disables confidence weighting.
        config ([`SpatialCoreConfig`], *optional*): constants; the paper's defaults when omitted.

    Returns:
        [`SpatialCoreScore`]

    Raises:
        `ValueError`: when the gold ``answer`` is not an option letter.
        [`BoxAlignmentError`]: when ``box_uncertainty`` does not have one entry per scored box.

    >>> score = score_spatialcore("no boxes</think>B", answer="B", options=["x", "y"], question="q",
    ...                           pseudo_gt=[{"bbox_2d": [0, 0, 10, 10], "label": "cup", "validity": 0.5}])
    >>> score.answer, round(score.spatial, 4), round(score.total, 4)
    (1.0, -0.15, 1.05)
    """
    config = config or SpatialCoreConfig()
    option_list = _as_options(options)
    n_options = len(option_list)
    gold = gold_option_letter(answer, n_options)
    reference = read_pseudo_gt(pseudo_gt, use_validity=config.use_validity)
    parse = parse_spatialcore(completion)

    predicted = parse.answer_letter if is_allowed_letter(parse.answer_letter, n_options) else None
    answer_reward = 1.0 if predicted is not None and predicted == gold else 0.0
    format_value = format_reward(parse, n_options, config)

    boxes = parse.grounding_boxes
    if box_uncertainty is not None and len(box_uncertainty) != len(boxes):
        raise BoxAlignmentError(
            f"{len(box_uncertainty)} box uncertainties for {len(boxes)} valid reasoning-segment boxes"
        )
    scored_reference = reference
    if parse.truncated and not config.score_truncated_grounding:
        boxes, box_uncertainty = (), None
        scored_reference = read_pseudo_gt(None)
    if box_uncertainty is not None and config.use_confidence:
        omega = confidence_weights(box_uncertainty, config.confidence_floor)
    else:
        omega = np.ones(len(boxes), dtype=np.float64)
    pred_boxes = np.asarray([box.coords for box in boxes], dtype=np.float64).reshape(-1, 4)
    terms = spatial_reward_terms(pred_boxes, [box.label for box in boxes], scored_reference, omega, config)

    bonus = 0.0
    if config.attempt_bonus > 0 and _structure_ok(parse, n_options) and len(reference) and boxes:
        anchor = _anchor_words(question, option_list)
        if not anchor or any((label_words(box.label) - ANCHOR_STOP_WORDS) & anchor for box in boxes):
            bonus = config.attempt_bonus

    gate = 1.0 if answer_reward == 1.0 or not config.use_answer_gate else config.answer_gate
    spatial_term = gate * terms.spatial if terms.spatial > 0 else terms.spatial
    gated_spatial = config.spatial_weight * spatial_term
    total = answer_reward + config.format_weight * format_value + bonus + gated_spatial

    mean_uncertainty = None
    if box_uncertainty is not None and len(box_uncertainty):
        mean_uncertainty = float(
            np.mean(np.clip(np.nan_to_num(np.asarray(box_uncertainty, float), nan=1.0), 0, 1))
        )
    return SpatialCoreScore(
        total=float(total),
        answer=answer_reward,
        format=float(format_value),
        attempt_bonus=bonus,
        spatial=float(terms.spatial),
        gated_spatial=float(gated_spatial),
        precision=terms.precision,
        recall=terms.recall,
        f_alpha=terms.f_alpha,
        n_pred=len(boxes),
        n_pseudo_gt=len(reference),
        n_matched=terms.n_matched,
        n_unmatched_pred=len(boxes) - terms.n_matched,
        mean_matched_iou=terms.mean_matched_iou,
        mean_box_uncertainty=mean_uncertainty,
        truncated=parse.truncated,
        has_answer=predicted is not None,
        predicted_letter=predicted,
        problems=parse.problems,
    )
