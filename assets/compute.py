"""Where a heavy asset's work runs: in the asset's own process (``local``) or on a Ray cluster (``ray``).

:class:`ComputeSettings` is mixed into the run configuration of the heavy assets (``pseudo_gt_boxes``
with the Grounding DINO backend, ``scene_geometry``), so each asset picks its engine in its run config:

.. code-block:: yaml

    ops:
      pseudo_gt_boxes_asset:
        config: {backend: grounding_dino, compute: ray, ray_address: auto, ray_actors: 8, num_gpus_per_actor: 1}

``local`` is the default and runs exactly the code it always ran. ``ray`` runs the same functions on
Ray workers (Grounding DINO as Ray Data ``map_batches`` over an actor pool, scan geometry as a Ray
task) and returns the same rows in the same order. Ray is an optional extra
(``pip install -e '.[ray]'``) and is imported only on the ``ray`` path.

>>> ComputeSettings().compute
'local'
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Literal, Self

from pydantic import BaseModel, Field, model_validator

logger = logging.getLogger(__name__)

RAY_EXTRA_HINT = "pip install -e '.[ray]' (the 'ray' extra: ray[data]==2.60.0)"


class ComputeSettings(BaseModel):
    """Where a heavy asset runs (mixed into its run configuration).

    >>> ComputeSettings(compute="ray", ray_address="auto", ray_actors=2).ray_actors
    2
    """

    compute: Literal["local", "ray"] = Field(
        default="local",
        description="'local': in the asset's own process (the default, no Ray needed). 'ray': on a Ray cluster "
        "(needs the 'ray' extra); the rows are the same as local mode's, in the same order.",
    )
    ray_address: str | None = Field(
        default=None,
        description="Ray cluster to connect to: 'auto' (the cluster `ray start` runs on this machine), "
        "'HOST:6379' (a cluster's head node), 'ray://HOST:10001' (Ray Client). Null: RAY_ADDRESS when set, "
        "else a local cluster started for this run and stopped after it. Ignored when Ray is already "
        "initialised in the process.",
    )
    ray_actors: int = Field(
        default=1,
        description="Actor pool size: how many Grounding DINO models run at once (one model per actor). "
        "Scan geometry runs one Ray task per scan and ignores it.",
    )
    num_cpus_per_actor: float = Field(
        default=1.0,
        description="CPUs Ray reserves for each actor (Grounding DINO) or task (scan geometry); Ray also sets "
        "the worker's OMP_NUM_THREADS to it.",
    )
    num_gpus_per_actor: float = Field(
        default=0.0,
        description="GPUs Ray reserves for each actor or task: 1 on a GPU cluster (the detector's device 'auto' "
        "then finds the GPU Ray assigned), 0 on CPUs. Fractions share a GPU between actors.",
    )
    max_retries: int = Field(
        default=3,
        description="Scan geometry: how often Ray reruns a task whose worker died (killed, out of memory, node "
        "lost). Grounding DINO's actor pool keeps Ray Data's own fault tolerance (a dead actor is restarted and "
        "its unfinished passes rerun, without limit). A Python exception raised by the work is never retried.",
    )

    @model_validator(mode="after")
    def _check_compute_values(self) -> Self:
        if self.ray_actors < 1:
            raise ValueError(f"ray_actors must be at least 1, got {self.ray_actors}")
        if self.num_cpus_per_actor < 0 or self.num_gpus_per_actor < 0:
            raise ValueError("num_cpus_per_actor and num_gpus_per_actor must not be negative")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must not be negative, got {self.max_retries}")
        return self


def compute_settings(settings: ComputeSettings) -> ComputeSettings:
    """The compute fields of ``settings`` (a run config that extends :class:`ComputeSettings`) on their own.

    Only these cross to Ray workers, not the asset's whole config class.

    >>> compute_settings(ComputeSettings(compute="ray")).compute
    'ray'
    """
    return ComputeSettings.model_validate(settings.model_dump(include=set(ComputeSettings.model_fields)))


def import_ray() -> ModuleType:
    """The ``ray`` module, or an ImportError that says which extra to install."""
    try:
        import ray
    except ImportError as error:
        raise ImportError(f"compute 'ray' needs Ray, which is not installed: {RAY_EXTRA_HINT}") from error
    return ray


@contextmanager
def ray_cluster(settings: ComputeSettings) -> Iterator[ModuleType]:
    """Connect to the configured Ray cluster for the duration of the block; yields the ``ray`` module.

    A Ray already initialised in this process (a test's cluster, a notebook's) is used as it is and left
    running. Otherwise ``ray.init(address=settings.ray_address)`` connects (or, with no address and no
    RAY_ADDRESS, starts a local cluster), and the connection is shut down when the block ends.
    """
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    ray.init(address=settings.ray_address, include_dashboard=False, logging_level=logging.WARNING)
    logger.info("Ray: connected to %s", settings.ray_address or "a local cluster")
    try:
        yield ray
    finally:
        ray.shutdown()


def remote_error_cause(error: BaseException) -> BaseException:
    """The exception raised inside a Ray task or actor (a ``RayTaskError``'s cause), else ``error`` itself.

    So a remote :class:`~assets.dge.geometry.SceneBuildError` reaches the asset as the same class and message
    as in local mode.
    """
    cause = getattr(error, "cause", None)
    return cause if isinstance(cause, Exception) else error
