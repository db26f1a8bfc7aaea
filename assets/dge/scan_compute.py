"""One scan's geometry, built in the asset's process or as a Ray task (the ``scene_geometry`` compute setting).

:func:`run_scan_geometry` is what ``scene_geometry`` calls: with ``compute: local`` it is
:func:`~assets.dge.geometry.build_scan_geometry` itself; with ``compute: ray`` the same function runs as a
Ray task (the scan's frame rows are sent, the :class:`~assets.dge.geometry.ScanGeometry` and the
quarantined records come back), retried by Ray when its worker dies. Both return the same geometry and
the same quarantine rows in the same order.

One caveat holds in both modes: open3d's RANSAC floor fit (:func:`assets.dge.floor.fit_floor_plane`)
is seeded but gives run-to-run different planes when open3d runs on more than one thread. A Ray task
runs open3d on as many threads as CPUs it reserved (``num_cpus_per_actor``, 1 by default), so it is
reproducible there; local mode uses every core.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
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
