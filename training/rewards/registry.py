"""Reward registry: names used in recipes (``reward_funcs: [spatialcore_reward, ...]``) -> callables.

Each key equals the callable's ``__name__``, so the name in a recipe is the name TRL logs. The
paper's ablations of SpatialCORE (Table 3) are registered as configured variants. A name that is
not registered but contains a dot is imported as ``package.module.attribute`` (TRL's convention).

>>> [reward.__name__ for reward in get_reward_funcs(["spatialcore_reward", "dge_reward"])]
['spatialcore_reward', 'dge_reward']
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

from training.rewards.reward_functions import (
    dge_reward,
    get_spatialcore_reward,
    spatialcore_reward,
    spatialthinker_reward,
)
from training.rewards.spatialcore import SpatialCoreConfig

REWARD_REGISTRY: dict[str, Callable] = {
    "spatialcore_reward": spatialcore_reward,
    "spatialcore_no_confidence_reward": get_spatialcore_reward(
        SpatialCoreConfig(use_confidence=False), name="spatialcore_no_confidence_reward"
    ),
    "spatialcore_no_validity_reward": get_spatialcore_reward(
        SpatialCoreConfig(use_validity=False), name="spatialcore_no_validity_reward"
    ),
    "spatialcore_no_answer_gate_reward": get_spatialcore_reward(
        SpatialCoreConfig(use_answer_gate=False), name="spatialcore_no_answer_gate_reward"
    ),
    "spatialthinker_reward": spatialthinker_reward,
    "dge_reward": dge_reward,
}


def get_reward_func(name: str) -> Callable:
    """Resolve one reward name (registry key, else a dotted import path).

    Raises:
        `ValueError`: for an unknown name; the message lists the registered names.

    >>> get_reward_func("spatialthinker_reward").__name__
    'spatialthinker_reward'
    """
    if name in REWARD_REGISTRY:
        return REWARD_REGISTRY[name]
    valid = ", ".join(sorted(REWARD_REGISTRY))
    if "." in name:
        module_path, _, attribute = name.rpartition(".")
        try:
            module = importlib.import_module(module_path)
            reward = getattr(module, attribute)
        except (ImportError, AttributeError) as error:
            raise ValueError(
                f"cannot import reward {name!r} ({error}); registered rewards: {valid}"
            ) from error
        if not callable(reward):
            raise ValueError(f"{name!r} is not callable; registered rewards: {valid}")
        return reward
    raise ValueError(f"unknown reward {name!r}; registered rewards: {valid}, or a dotted import path")


def get_reward_funcs(names: Sequence[str]) -> list[Callable]:
    """Resolve reward names in order (see :func:`get_reward_func`).

    >>> get_reward_funcs(["spatialcore_rewrd"])
    Traceback (most recent call last):
    ...
    ValueError: unknown reward 'spatialcore_rewrd'; registered rewards: dge_reward, spatialcore_no_answer_gate_reward, spatialcore_no_confidence_reward, spatialcore_no_validity_reward, spatialcore_reward, spatialthinker_reward, or a dotted import path
    """
    if isinstance(names, str):
        names = [names]
    return [get_reward_func(name) for name in names]
