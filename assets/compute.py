"""Where the per-partition work of a range run runs: worker processes on this machine, or a Ray cluster.

A step hands each partition's work to :func:`partition_results` as a plain function of picklable
values. ``local`` (the default) runs it in a bounded process pool owned by the step (the ``workers``
resource sets its size); ``ray`` runs each partition as a Ray task (the ``ray`` extra), retried by Ray
when its worker dies. Both return what the function returns in the step's process, so the tables do
not depend on the path. :class:`ComputeSettings` is mixed into the run configuration of the assets
that offer Ray (``scene_geometry``; ``pseudo_gt_boxes`` with Grounding DINO), for instance
``{backend: grounding_dino, compute: ray, ray_address: auto, num_gpus_per_task: 1}``.

>>> ComputeSettings().compute
'local'
>>> with partition_results(divmod, {"a": (7, 2), "b": (9, 4)}, workers=1) as result:
...     result("b")
(2, 1)
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, Literal, Self

from pydantic import BaseModel, Field, model_validator

logger = logging.getLogger(__name__)

MAX_WORKERS = 8
"""Most worker processes a step starts by default (each holds open3d, polars and the task's modules)."""

WORKER_MODULES = (
    "open3d",
    "pandas",
    "datasets",
    "matplotlib.backends.backend_agg",
    "matplotlib.figure",
    "assets.dge.assets",
    "assets.sources.assets",
    "assets.stvqa.work",
)
"""Imported once by multiprocessing's fork server, so that every worker starts with them loaded: the task
modules and what the workers' first calls would otherwise import lazily, each worker again (pyarrow's
conversions import pandas, the table writer ``datasets``' features, the top-down plot matplotlib's Agg)."""


class ComputeSettings(BaseModel):
    """Where a heavy asset runs (mixed into its run configuration).

    >>> ComputeSettings(compute="ray", ray_address="auto", num_gpus_per_task=1).num_gpus_per_task
    1.0
    """

    compute: Literal["local", "ray"] = Field(
        default="local",
        description="'local': worker processes on this machine (the default, no Ray needed). 'ray': on a Ray "
        "cluster (needs the 'ray' extra); the rows are the same as local mode's, in the same order.",
    )
    ray_address: str | None = Field(
        default=None,
        description="Ray cluster to connect to: 'auto' (the cluster `ray start` runs on this machine), "
        "'HOST:6379' (a cluster's head node), 'ray://HOST:10001' (Ray Client). Null: RAY_ADDRESS when set, "
        "else a local cluster started for this run and stopped after it. Ignored when Ray is already "
        "initialised in the process.",
    )
    num_cpus_per_task: float = Field(
        default=1.0,
        description="CPUs Ray reserves for each partition's task; the work runs on that many threads.",
    )
    num_gpus_per_task: float = Field(
        default=0.0,
        description="GPUs Ray reserves for each partition's task: 1 for a Grounding DINO shard on a GPU cluster (the "
        "detector's device 'auto' then finds the GPU Ray assigned), 0 on CPUs. Fractions share a GPU.",
    )
    max_retries: int = Field(
        default=3,
        description="How often Ray reruns a task whose worker died (killed, out of memory, node lost). A Python "
        "exception raised by the work is never retried.",
    )

    @model_validator(mode="after")
    def _check_compute_values(self) -> Self:
        if self.num_cpus_per_task < 0 or self.num_gpus_per_task < 0:
            raise ValueError("num_cpus_per_task and num_gpus_per_task must not be negative")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must not be negative, got {self.max_retries}")
        return self


def compute_settings(settings: BaseModel) -> ComputeSettings:
    """The compute fields of ``settings`` (a run config that extends :class:`ComputeSettings`) on their own."""
    return ComputeSettings.model_validate(settings.model_dump(include=set(ComputeSettings.model_fields)))


def default_workers() -> int:
    """Worker processes of a step when none are configured: one per usable core, at most :data:`MAX_WORKERS`."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(cores, MAX_WORKERS)


def limit_threads(threads: int) -> None:
    """Run open3d's thread pool on ``threads`` threads (several workers on one machine must not each take
    every core; Ray's OMP_NUM_THREADS does not reach open3d's own pool)."""
    import open3d as o3d

    o3d.utility.set_max_threads(threads)


def _exit_when_ended(sentinel: int) -> None:
    multiprocessing.connection.wait([sentinel])
    os._exit(1)  # the process that started the pool is gone (a killed build): stop now


def _start_worker() -> None:
    """A local worker: one thread for open3d, and an exit as soon as the process that started the pool ends."""
    limit_threads(1)
    parent = multiprocessing.parent_process()
    if parent is None:
        raise RuntimeError("_start_worker initialises a pool's worker process, not the main process")
    sentinel = parent.sentinel
    threading.Thread(target=_exit_when_ended, args=(sentinel,), name="exit-with-parent", daemon=True).start()


def _call_with_threads(threads: int, function: Callable[..., Any], *arguments: Any) -> Any:
    limit_threads(threads)
    return function(*arguments)


@contextmanager
def partition_results(
    function: Callable[..., Any],
    arguments: Mapping[str, tuple],
    workers: int,
    compute: ComputeSettings | None = None,
) -> Iterator[Callable[[str], Any]]:
    """``function(*arguments[key])`` for every partition key of a step, for the duration of the block.

    Yields ``result(key)``, which waits for that key's value (an exception raised by the function is
    raised again here, as the same class). Every key is submitted when the block starts: to a pool of
    ``workers`` processes (``compute`` local, the default), or as Ray tasks named after ``function``
    (``compute: ray``). With one worker or one key, ``result`` calls the function in this process when
    asked. ``function`` must be a module-level function, its arguments and result picklable. When the
    block ends, keys not asked for are cancelled and the workers stop.
    """
    if compute is not None and compute.compute == "ray":
        with _ray_results(function, arguments, compute) as result:
            yield result
        return
    workers = min(workers, len(arguments))
    if workers < 2:
        yield lambda key: function(*arguments[key])
        return
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(WORKER_MODULES))
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_start_worker)
    try:
        futures = {key: pool.submit(function, *values) for key, values in arguments.items()}
        logger.info("%d partitions on %d worker processes", len(futures), workers)
        yield lambda key: futures[key].result()
        pool.shutdown(wait=True)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # a failed or interrupted step: stop what is queued


@contextmanager
def _ray_results(
    function: Callable[..., Any], arguments: Mapping[str, tuple], compute: ComputeSettings
) -> Iterator[Callable[[str], Any]]:
    """:func:`partition_results` on Ray: one task per key, all submitted at once.

    A Ray already initialised in this process (a test's cluster, a notebook's) is used as it is and left
    running. Otherwise ``ray.init(address=compute.ray_address)`` connects (or, with no address and no
    RAY_ADDRESS, starts a local cluster) for the block. An exception raised in a task arrives as the
    same class and message as in local mode.
    """
    try:
        import ray
    except ImportError as error:
        raise ImportError(
            "compute 'ray' needs Ray, which is not installed: pip install -e '.[ray]'"
        ) from error
    connected = not ray.is_initialized()
    if connected:
        ray.init(address=compute.ray_address, include_dashboard=False, logging_level=logging.WARNING)
    references: dict[str, Any] = {}
    try:
        task = ray.remote(_call_with_threads).options(
            name=function.__name__,
            num_cpus=compute.num_cpus_per_task,
            num_gpus=compute.num_gpus_per_task,
            max_retries=compute.max_retries,
            retry_exceptions=False,
        )
        threads = max(1, int(compute.num_cpus_per_task))
        references.update({key: task.remote(threads, function, *values) for key, values in arguments.items()})
        logger.info("submitted %d partitions as Ray tasks (%s)", len(references), function.__name__)

        def result(key: str) -> Any:
            try:
                return ray.get(references.pop(key))
            except ray.exceptions.RayTaskError as error:
                cause = getattr(error, "cause", None)
                raise (cause if isinstance(cause, Exception) else error) from None

        yield result
    finally:
        for reference in references.values():  # keys never asked for (the step failed first)
            ray.cancel(reference)
        if connected:
            ray.shutdown()
