"""Reward library: SpatialCORE, SpatialThinker and DGE rewards as pure, fast, total functions.

Modules (equation map in ``README.md`` beside this file):

* :mod:`~training.rewards.parsing`: completion grammars -> structured parses (never raises).
* :mod:`~training.rewards.geometry`: IoU / GIoU / CIoU over all pairs (numpy).
* :mod:`~training.rewards.matching`: Hungarian assignment (scipy).
* :mod:`~training.rewards.confidence`: coordinate-token uncertainty ``H`` and weight ``omega`` (Eq. 5-6).
* :mod:`~training.rewards.similarity`: bag-of-words cosine label similarity (Eq. 13).
* :mod:`~training.rewards.spatialcore`, :mod:`~training.rewards.spatialthinker`, :mod:`~training.rewards.dge`:
  per-completion scores with every term.
* :mod:`~training.rewards.reward_functions`, :mod:`~training.rewards.registry`: TRL-facing functions,
  factories and the registry.

>>> from training.rewards import get_reward_funcs
>>> get_reward_funcs(["spatialcore_reward"])[0].__name__
'spatialcore_reward'
"""

from training.rewards.confidence import BoxAlignmentError, box_uncertainties, confidence_weights
from training.rewards.dge import DgeConfig, DgeScore, mean_relative_accuracy, score_dge
from training.rewards.registry import REWARD_REGISTRY, get_reward_func, get_reward_funcs
from training.rewards.reward_functions import (
    DgeReward,
    SpatialCoreReward,
    SpatialThinkerReward,
    dge_reward,
    get_dge_reward,
    get_spatialcore_reward,
    get_spatialthinker_reward,
    spatialcore_reward,
    spatialthinker_reward,
)
from training.rewards.similarity import LabelSimilarity
from training.rewards.spatialcore import SpatialCoreConfig, SpatialCoreScore, score_spatialcore
from training.rewards.spatialthinker import SpatialThinkerConfig, SpatialThinkerScore, score_spatialthinker

__all__ = [
    "REWARD_REGISTRY",
    "BoxAlignmentError",
    "DgeConfig",
    "DgeReward",
    "DgeScore",
    "LabelSimilarity",
    "SpatialCoreConfig",
    "SpatialCoreReward",
    "SpatialCoreScore",
    "SpatialThinkerConfig",
    "SpatialThinkerReward",
    "SpatialThinkerScore",
    "box_uncertainties",
    "confidence_weights",
    "dge_reward",
    "get_dge_reward",
    "get_reward_func",
    "get_reward_funcs",
    "get_spatialcore_reward",
    "get_spatialthinker_reward",
    "mean_relative_accuracy",
    "score_dge",
    "score_spatialcore",
    "score_spatialthinker",
    "spatialcore_reward",
    "spatialthinker_reward",
]
