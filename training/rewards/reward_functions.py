"""Trainer-facing reward functions with TRL's signature ``(completions, **kwargs) -> list[float | None]``.

TRL's ``GRPOTrainer`` calls each reward with ``prompts``, ``completions``, ``completion_ids``, every
dataset column (one value per completion), ``trainer_state``, ``log_extra`` and ``log_metric``. The
rewards here read the training-table columns (``data_contracts``) by name:

| reward | columns |
|---|---|
| ``spatialcore_reward`` | ``answer``, ``options``, ``question``, ``pseudo_gt`` (+ ``box_entropies`` from the trainer) |
| ``spatialthinker_reward`` | ``answer_option_text``, ``gt_scene``, ``image_width``, ``image_height`` |
| ``dge_reward`` | ``answer``, ``options``, ``numeric_answer``, ``unit``, ``task_type`` |

``box_entropies`` (optional, passed by the project's trainer) holds, per completion, ``{"tokens":
list[str], "entropies": list[float]}``: the decoded completion tokens and each token's
full-vocabulary entropy in nats; :func:`training.rewards.confidence.box_uncertainties` turns it into
one ``H`` per scored box. Without it there is no confidence weighting.

A row whose gold values cannot be read gets ``None`` (NaN in TRL: that reward is dropped for the row)
and a warning naming the row; a malformed completion simply scores low. A missing column is a
configuration error and raises. Per-component batch means go to ``log_metric`` as
``<prefix>/<component>``.

Configured variants come from the factories (``get_spatialcore_reward(config, name=...)``); they
return callable objects that pickle and keep a stable ``__name__`` (TRL logs rewards by it).
"""

from __future__ import annotations

import logging
import math
from abc import ABC, abstractmethod
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from training.rewards.confidence import BoxAlignmentError, box_uncertainties
from training.rewards.dge import DgeConfig, score_dge
from training.rewards.parsing import completion_text
from training.rewards.spatialcore import SpatialCoreConfig, score_spatialcore
from training.rewards.spatialthinker import SpatialThinkerConfig, score_spatialthinker

logger = logging.getLogger(__name__)

# Keyword arguments the trainer adds besides the dataset columns.
TRAINER_KWARGS = frozenset(
    {"prompts", "completion_ids", "trainer_state", "log_extra", "log_metric", "environments", "box_entropies"}
)


def _columns(
    reward_name: str, kwargs: dict[str, Any], names: Sequence[str], n_rows: int, optional: Sequence[str] = ()
) -> dict[str, list[Any]]:
    columns: dict[str, list[Any]] = {}
    for name in (*names, *optional):
        values = kwargs.get(name)
        if values is None:
            if name in optional:
                columns[name] = [None] * n_rows
                continue
            available = sorted(key for key in kwargs if key not in TRAINER_KWARGS)
            raise ValueError(f"{reward_name} needs the dataset column {name!r}; the batch has {available}")
        values = list(values)
        if len(values) != n_rows:
            raise ValueError(
                f"{reward_name}: column {name!r} has {len(values)} values for {n_rows} completions"
            )
        columns[name] = values
    return columns


def _log_means(
    log_metric: Callable[[str, float], None] | None, prefix: str, values: dict[str, list[float]]
) -> None:
    if log_metric is None:
        return
    for name, items in values.items():
        finite = [item for item in items if item is not None and math.isfinite(item)]
        if finite:
            log_metric(f"{prefix}/{name}", float(sum(finite) / len(finite)))


def _finite_or_none(value: float, reward_name: str, row: int) -> float | None:
    if math.isfinite(value):
        return value
    logger.error("%s produced a non-finite reward %r for row %d; returning None", reward_name, value, row)
    return None


def _entropy_uncertainties(entry: Any, reward_name: str, row: int) -> list[float] | None:
    if entry is None:
        return None
    tokens = entry.get("tokens") if isinstance(entry, dict) else None
    entropies = entry.get("entropies") if isinstance(entry, dict) else None
    if tokens is None or entropies is None:
        logger.warning(
            "%s: box_entropies of row %d lacks tokens/entropies; no confidence weighting", reward_name, row
        )
        return None
    try:
        return box_uncertainties(tokens, entropies)
    except (TypeError, ValueError) as error:
        logger.warning(
            "%s: box_entropies of row %d unusable (%s); no confidence weighting", reward_name, row, error
        )
        return None


class _ConfiguredReward(ABC):
    """Shared machinery of the trainer-facing rewards: name, config, column checks, metrics.

    A subclass names its dataset columns, scores one row and says what to log; this class runs the
    batch, turns unusable gold data into ``None`` (TRL drops it) and logs the metric means.
    """

    config_type: type
    default_name: str
    required_columns: tuple[str, ...] = ()
    optional_columns: tuple[str, ...] = ()

    def __init__(self, config: Any = None, *, name: str | None = None, metric_prefix: str | None = None):
        self.config = config or self.config_type()
        self.__name__ = name or self.default_name
        self.metric_prefix = metric_prefix or self.__name__.removesuffix("_reward")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.__name__!r}, config={self.config!r})"

    @abstractmethod
    def score_row(self, text: str, values: dict[str, Any], row: int, kwargs: dict[str, Any]) -> Any:
        """Score one completion; raise ``ValueError`` for unusable gold data."""

    @abstractmethod
    def record(self, metrics: dict[str, list[float]], score: Any, values: dict[str, Any]) -> None:
        """Append the row's logged components to ``metrics``."""

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        n_rows = len(completions)
        columns = _columns(
            self.__name__, kwargs, self.required_columns, n_rows, optional=self.optional_columns
        )
        rewards: list[float | None] = []
        metrics: dict[str, list[float]] = defaultdict(list)
        for row, completion in enumerate(completions):
            values = {name: column[row] for name, column in columns.items()}
            try:
                score = self.score_row(completion_text(completion), values, row, kwargs)
            except ValueError as error:
                logger.warning(
                    "%s: row %d has unusable gold data (%s); reward None", self.__name__, row, error
                )
                rewards.append(None)
                continue
            rewards.append(_finite_or_none(score.total, self.__name__, row))
            self.record(metrics, score, values)
        _log_means(kwargs.get("log_metric"), self.metric_prefix, metrics)
        return rewards


class SpatialCoreReward(_ConfiguredReward):
    """SpatialCORE reward for TRL (Eq. 10 per completion); build with :func:`get_spatialcore_reward`.

    Reads the columns ``answer`` and ``pseudo_gt`` (``options`` and ``question`` when present) and the
    trainer's ``box_entropies``.

    Args:
        config ([`SpatialCoreConfig`], *optional*): constants; the paper's when omitted.
        name (`str`, *optional*, defaults to `"spatialcore_reward"`): ``__name__`` (TRL's log key).
        metric_prefix (`str`, *optional*): prefix of the ``log_metric`` names; ``name`` without
            ``_reward`` when omitted.
    """

    config_type = SpatialCoreConfig
    default_name = "spatialcore_reward"
    required_columns = ("answer", "pseudo_gt")
    optional_columns = ("options", "question")

    def score_row(self, text: str, values: dict[str, Any], row: int, kwargs: dict[str, Any]) -> Any:
        entropies = kwargs.get("box_entropies")
        entry = entropies[row] if entropies is not None and row < len(entropies) else None
        uncertainty = _entropy_uncertainties(entry, self.__name__, row)
        try:
            return score_spatialcore(text, box_uncertainty=uncertainty, config=self.config, **values)
        except BoxAlignmentError as error:
            logger.warning(
                "%s: row %d: %s (token text differs from the completion); scoring without confidence weighting",
                self.__name__,
                row,
                error,
            )
            return score_spatialcore(text, box_uncertainty=None, config=self.config, **values)

    def record(self, metrics: dict[str, list[float]], score: Any, values: dict[str, Any]) -> None:
        metrics["answer"].append(score.answer)
        metrics["format"].append(score.format)
        metrics["attempt_bonus"].append(score.attempt_bonus)
        metrics["spatial"].append(score.spatial)
        metrics["gated_spatial"].append(score.gated_spatial)
        metrics["boxes_per_completion"].append(float(score.n_pred))
        metrics["share_with_boxes"].append(1.0 if score.n_pred else 0.0)
        metrics["truncated"].append(1.0 if score.truncated else 0.0)
        metrics["has_answer"].append(1.0 if score.has_answer else 0.0)
        if score.n_pseudo_gt:
            metrics["precision"].append(score.precision)
            metrics["recall"].append(score.recall)
        if score.mean_matched_iou is not None:
            metrics["mean_matched_iou"].append(score.mean_matched_iou)
        if score.mean_box_uncertainty is not None:
            metrics["mean_box_entropy"].append(score.mean_box_uncertainty)


class SpatialThinkerReward(_ConfiguredReward):
    """SpatialThinker reward for TRL; build with :func:`get_spatialthinker_reward`.

    Reads ``answer_option_text``, ``gt_scene``, ``image_width`` and ``image_height``.

    Args:
        config ([`SpatialThinkerConfig`], *optional*): weights; the paper's when omitted.
        name (`str`, *optional*, defaults to `"spatialthinker_reward"`): ``__name__``.
        metric_prefix (`str`, *optional*): prefix of the ``log_metric`` names.
    """

    config_type = SpatialThinkerConfig
    default_name = "spatialthinker_reward"
    required_columns = ("answer_option_text", "gt_scene", "image_width", "image_height")

    def score_row(self, text: str, values: dict[str, Any], row: int, kwargs: dict[str, Any]) -> Any:
        return score_spatialthinker(
            text,
            answer_option_text=values["answer_option_text"],
            gt_scene=values["gt_scene"],
            image_size=(values["image_width"], values["image_height"]),
            config=self.config,
        )

    def record(self, metrics: dict[str, list[float]], score: Any, values: dict[str, Any]) -> None:
        metrics["format"].append(score.format)
        metrics["count"].append(score.count)
        metrics["accuracy"].append(score.accuracy)
        metrics["answer_correct"].append(1.0 if score.answer_correct else 0.0)
        metrics["spatial"].append(score.spatial)
        metrics["objects_per_completion"].append(float(score.n_pred_objects))
        if score.mean_matched_ciou is not None:
            metrics["mean_matched_ciou"].append(score.mean_matched_ciou)


class DgeReward(_ConfiguredReward):
    """DGE answer reward for TRL; build with :func:`get_dge_reward`.

    Reads ``answer`` (and ``options``, ``numeric_answer``, ``unit``, ``task_type`` when present).

    Args:
        config ([`DgeConfig`], *optional*): weights.
        name (`str`, *optional*, defaults to `"dge_reward"`): ``__name__``.
        metric_prefix (`str`, *optional*): prefix of the ``log_metric`` names; accuracy is also logged
            per task type as ``<prefix>/accuracy/<task_type>``.
    """

    config_type = DgeConfig
    default_name = "dge_reward"
    required_columns = ("answer",)
    optional_columns = ("options", "numeric_answer", "unit", "task_type")

    def score_row(self, text: str, values: dict[str, Any], row: int, kwargs: dict[str, Any]) -> Any:
        return score_dge(text, config=self.config, **values)

    def record(self, metrics: dict[str, list[float]], score: Any, values: dict[str, Any]) -> None:
        metrics["accuracy"].append(score.accuracy)
        metrics["format"].append(score.format)
        metrics["has_answer"].append(1.0 if score.has_answer else 0.0)
        metrics[f"accuracy/{score.kind}"].append(score.accuracy)
        task_type = values["task_type"]
        if isinstance(task_type, str) and task_type:
            metrics[f"accuracy/{task_type}"].append(score.accuracy)


def get_spatialcore_reward(
    config: SpatialCoreConfig | None = None,
    *,
    name: str = "spatialcore_reward",
    metric_prefix: str | None = None,
) -> SpatialCoreReward:
    """Build a configured SpatialCORE reward (picklable, ``__name__ == name``).

    >>> reward = get_spatialcore_reward(SpatialCoreConfig(use_confidence=False), name="spatialcore_no_confidence_reward")
    >>> reward.__name__
    'spatialcore_no_confidence_reward'
    """
    return SpatialCoreReward(config, name=name, metric_prefix=metric_prefix)


def get_spatialthinker_reward(
    config: SpatialThinkerConfig | None = None,
    *,
    name: str = "spatialthinker_reward",
    metric_prefix: str | None = None,
) -> SpatialThinkerReward:
    """Build a configured SpatialThinker reward (picklable, ``__name__ == name``).

    >>> get_spatialthinker_reward(SpatialThinkerConfig(normalize_boxes=True), name="st_norm_reward").__name__
    'st_norm_reward'
    """
    return SpatialThinkerReward(config, name=name, metric_prefix=metric_prefix)


def get_dge_reward(
    config: DgeConfig | None = None, *, name: str = "dge_reward", metric_prefix: str | None = None
) -> DgeReward:
    """Build a configured DGE reward (picklable, ``__name__ == name``).

    >>> get_dge_reward(DgeConfig(format_weight=0.0), name="dge_answer_only_reward").__name__
    'dge_answer_only_reward'
    """
    return DgeReward(config, name=name, metric_prefix=metric_prefix)


_DEFAULT_SPATIALCORE = SpatialCoreReward()
_DEFAULT_SPATIALTHINKER = SpatialThinkerReward()
_DEFAULT_DGE = DgeReward()


def spatialcore_reward(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
    """SpatialCORE reward with the paper's constants (Eq. 10 per completion).

    Args:
        completions (`list[str]` or `list[list[dict]]`): completions, plain or conversational.
        **kwargs: dataset columns ``answer``, ``options``, ``question``, ``pseudo_gt``; optionally
            ``box_entropies`` and ``log_metric``.

    Returns:
        `list[float | None]`: one reward per completion (``None`` for a row with unusable gold data).

    >>> spatialcore_reward(
    ...     [[{"role": "assistant", "content": '{"bbox_2d": [0, 0, 500, 500], "label": "dog"}\\nleft</think>A'}]],
    ...     answer=["A"], options=[["left", "right"]], question=["Where is the dog?"],
    ...     pseudo_gt=[[{"bbox_2d": [0, 0, 500, 500], "label": "dog", "validity": 1.0}]])
    [2.05]
    """
    return _DEFAULT_SPATIALCORE(completions, **kwargs)


def spatialthinker_reward(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
    """SpatialThinker reward with the paper's weights (0.1 format, 0.2 count, 0.5 accuracy, 0.2 spatial).

    Args:
        completions (`list[str]` or `list[list[dict]]`): completions.
        **kwargs: dataset columns ``answer_option_text``, ``gt_scene``, ``image_width``, ``image_height``.

    Returns:
        `list[float | None]`: one reward per completion in ``[0, 1]``.

    >>> spatialthinker_reward(["<answer>(A) yes</answer>"], answer_option_text=["(A) yes"],
    ...                       gt_scene=[{"objects": [], "relationships": []}], image_width=[640], image_height=[480])
    [0.0]
    """
    return _DEFAULT_SPATIALTHINKER(completions, **kwargs)


def dge_reward(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
    """DGE answer reward: exact letter match or VSI-Bench mean relative accuracy, plus 0.1 x format.

    Args:
        completions (`list[str]` or `list[list[dict]]`): completions.
        **kwargs: dataset columns ``answer``, ``options``, ``numeric_answer``, ``unit``, ``task_type``.

    Returns:
        `list[float | None]`: one reward per completion in ``[0, 1.1]``.

    >>> dge_reward(["<think>close</think><answer>1.02 m</answer>"], answer=["1.0"], options=[[]],
    ...            numeric_answer=[1.0], unit=["m"], task_type=["absolute_distance"])
    [1.1]
    """
    return _DEFAULT_DGE(completions, **kwargs)
