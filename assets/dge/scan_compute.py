"""One scan's geometry, built in the asset's process or as a Ray task (the ``scene_geometry`` compute setting).

:func:`run_scan_geometry` builds one scan: with ``compute: local`` it is
:func:`~assets.dge.geometry.build_scan_geometry` itself; with ``compute: ray`` the same function runs as a
Ray task (the scan's frame rows are sent, the :class:`~assets.dge.geometry.ScanGeometry` and the
quarantined records come back), retried by Ray when its worker dies. Both return the same geometry and
the same quarantine rows in the same order. :func:`scan_geometry_builder` is what ``scene_geometry``
uses for the scans of one run: in ``ray`` mode every scan of the run is submitted at once, so a range
run (a backfill of many scans) keeps the whole cluster busy; in ``local`` mode the scans are built
one after another in the asset's process.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import open3d as o3d
import polars as pl

from assets.compute import ComputeSettings, compute_settings, ray_cluster, remote_error_cause
from assets.dge.geometry import ScanGeometry, SceneGeometrySettings, build_scan_geometry
from data_contracts.quarantine import QuarantineLog

logger = logging.getLogger(__name__)

SCAN_GEOMETRY_TASK = "scan_geometry_task"
"""Name of the Ray task (its worker process is titled ``ray::scan_geometry_task`` while it runs)."""


def scan_geometry_task(
    frames: pl.DataFrame,
    scene: dict[str, Any],
    settings: SceneGeometrySettings,
    source_asset: str,
    open3d_threads: int,
) -> tuple[ScanGeometry, list[dict[str, Any]]]:
    """The body of the Ray task: build the geometry into a fresh log and return it with the log's rows.

    open3d runs on as many threads as the task reserved CPUs (Ray's OMP_NUM_THREADS does not reach
    open3d's own thread pool), so tasks do not oversubscribe a node.
    """
    o3d.utility.set_max_threads(open3d_threads)
    log = QuarantineLog(source_asset)
    geometry = build_scan_geometry(frames, scene, settings, log)
    return geometry, log.rows


def geometry_settings(settings: SceneGeometrySettings) -> SceneGeometrySettings:
    """The :class:`SceneGeometrySettings` fields of ``settings`` on their own (what is sent to the task)."""
    return SceneGeometrySettings.model_validate(
        settings.model_dump(include=set(SceneGeometrySettings.model_fields))
    )


def submit_scan_geometry(
    ray: Any,
    frames: pl.DataFrame,
    scene: Mapping[str, Any],
    settings: SceneGeometrySettings,
    compute: ComputeSettings,
    source_asset: str = "scene_geometry",
):
    """Submit one scan's geometry as a Ray task on a connected cluster; returns its object ref.

    Only the scan's own frame rows are sent (:func:`build_scan_geometry` reads no others). Ray reruns the
    task on another worker when its worker dies (``compute.max_retries`` times); an exception the build
    raises is not retried.
    """
    scene_id = str(scene["scene_id"])
    task = ray.remote(scan_geometry_task).options(
        name=SCAN_GEOMETRY_TASK,
        num_cpus=compute.num_cpus_per_actor,
        num_gpus=compute.num_gpus_per_actor,
        max_retries=compute.max_retries,
        retry_exceptions=False,
    )
    return task.remote(
        frames.filter(pl.col("scene_id") == scene_id),
        dict(scene),
        geometry_settings(settings),
        source_asset,
        max(1, int(compute.num_cpus_per_actor)),
    )


def run_scan_geometry(
    frames: pl.DataFrame,
    scene: Mapping[str, Any],
    settings: SceneGeometrySettings,
    compute: ComputeSettings | None = None,
    quarantine: QuarantineLog | None = None,
) -> ScanGeometry:
    """Build one scan's geometry where ``compute`` says; bad frames and objects go to ``quarantine``.

    Args:
        frames (`pl.DataFrame`): ``rgbd_frames`` rows (other scenes' rows are ignored).
        scene (`Mapping`): the scan's ``rgbd_scenes`` row.
        settings (`SceneGeometrySettings`): the geometry settings (the asset's run config, which also
            extends :class:`ComputeSettings` and is used as ``compute`` when that is omitted).
        compute (`ComputeSettings`, *optional*): ``local`` or ``ray``.
        quarantine (`QuarantineLog`, *optional*): receives the rejected records, in the order local mode
            adds them.

    Returns:
        [`ScanGeometry`]: the same as :func:`build_scan_geometry` returns locally.

    Raises:
        SceneBuildError: the scan has no usable frame (raised by the remote build too, as the same class).
    """
    if compute is None:
        compute = compute_settings(settings) if isinstance(settings, ComputeSettings) else ComputeSettings()
    log = quarantine if quarantine is not None else QuarantineLog("scene_geometry")
    if compute.compute == "local":
        return build_scan_geometry(frames, scene, settings, log)
    with ray_cluster(compute) as ray:
        reference = submit_scan_geometry(ray, frames, scene, settings, compute, log.source_asset)
        try:
            geometry, rows = ray.get(reference)
        except ray.exceptions.RayTaskError as error:
            raise remote_error_cause(error) from None
    log.rows.extend(rows)
    logger.info("scene %s: geometry built by a Ray task", geometry.scene_id)
    return geometry


ScanGeometryBuilder = Callable[[Mapping[str, Any], QuarantineLog], ScanGeometry]
"""Builds one scan of a run: its ``rgbd_scenes`` row and the log for its rejected records in, its geometry out."""


@contextmanager
def scan_geometry_builder(
    frames: pl.DataFrame,
    scenes: Sequence[Mapping[str, Any]],
    settings: SceneGeometrySettings,
    compute: ComputeSettings | None = None,
) -> Iterator[ScanGeometryBuilder]:
    """The geometry of the run's ``scenes``, built where ``compute`` says, for the duration of the block.

    With ``compute: ray`` every scan is submitted as a Ray task when the block starts (they run in parallel
    on the cluster) and the builder waits for the one asked; with ``local`` the builder is
    :func:`run_scan_geometry`. Either way the builder returns what :func:`build_scan_geometry` returns
    locally and adds the same quarantine rows.
    """
    if compute is None:
        compute = compute_settings(settings) if isinstance(settings, ComputeSettings) else ComputeSettings()
    if compute.compute == "local" or not scenes:
        yield lambda scene, log: run_scan_geometry(frames, scene, settings, compute, log)
        return
    with ray_cluster(compute) as ray:
        references = {
            str(scene["scene_id"]): submit_scan_geometry(ray, frames, scene, settings, compute)
            for scene in scenes
        }
        logger.info("submitted %d scans as Ray tasks", len(references))

        def build(scene: Mapping[str, Any], log: QuarantineLog) -> ScanGeometry:
            reference = references.pop(str(scene["scene_id"]), None)
            if reference is None:
                reference = submit_scan_geometry(ray, frames, scene, settings, compute)
            try:
                geometry, rows = ray.get(reference)
            except ray.exceptions.RayTaskError as error:
                raise remote_error_cause(error) from None
            log.rows.extend(rows)
            return geometry

        try:
            yield build
        finally:
            for reference in references.values():  # scans never asked for (the run failed first)
                ray.cancel(reference)
