"""The ``sample_world`` asset: the built-in synthetic world every source reads by default.

It renders synthetic indoor scenes with open3d ray casting and writes them in the real on-disk
formats (OmniSpatial-like, SpatiaLab-like, Visual-Genome-like, ScanNet-, ARKitScenes- and ScanNet++-like
scans, COCO instances), so the
whole graph runs on a fresh machine with no keys, weights or downloads. A rebuild with the same
configuration is skipped: the generator is deterministic, and its output folder records the
configuration it was built from and a manifest of every file (size and SHA-256), so a damaged or
half-written world is rebuilt.
"""

import hashlib
import json
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from assets.resources import SourcesResource, StorageResource
from assets.sample_world import SampleWorldConfig, ensure_sample_world
from assets.sample_world.config import GENERATOR_VERSION, setting_default, setting_help
from assets.sample_world.generator import stamp_config


def _setting(name: str) -> Any:
    """A config field with the default and the description of :class:`SampleWorldConfig`'s field ``name``."""
    return Field(default=setting_default(name), description=setting_help(name))


class SampleWorldAssetConfig(dg.Config):
    """Run configuration of the `sample_world` asset (the generator's main knobs, described in its config)."""

    seed: int = _setting("seed")
    num_scenes: int = _setting("num_scenes")
    views_per_scene: int = _setting("views_per_scene")
    width: int = _setting("width")
    height: int = _setting("height")
    camera_path: str = _setting("camera_path")
    arkitscenes_videos: int = _setting("arkitscenes_videos")
    scannetpp_scenes: int = _setting("scannetpp_scenes")
    scan_realism: str = _setting("scan_realism")
    force: bool = Field(
        default=False, description="Rebuild even when the folder already holds this configuration."
    )


def build_sample_world(root: Path, config: SampleWorldAssetConfig) -> tuple[dict, bool, str]:
    """Generate the sample world into ``root`` unless it already holds the same configuration, complete.

    A world is reused only when its stamp names this configuration and every file matches the stamp's
    manifest (see :func:`assets.sample_world.ensure_sample_world`). Returns ``(summary, rebuilt,
    version)``; the version is a hash of the configuration.
    """
    world_config = SampleWorldConfig(
        root=root,
        seed=config.seed,
        num_scenes=config.num_scenes,
        views_per_scene=config.views_per_scene,
        width=config.width,
        height=config.height,
        camera_path=config.camera_path,
        arkitscenes_videos=config.arkitscenes_videos,
        scannetpp_scenes=config.scannetpp_scenes,
        scan_realism=config.scan_realism,
        show_progress=False,
    )
    version = hashlib.sha256(json.dumps(stamp_config(world_config), sort_keys=True).encode()).hexdigest()[:16]
    summary, rebuilt = ensure_sample_world(world_config, force=config.force)
    return json.loads(json.dumps(summary.as_dict(), default=str)), rebuilt, version


@dg.multi_asset(
    name="sample_world_asset",
    outs={
        "sample_world": dg.AssetOut(
            description="Synthetic indoor scenes (exact depth, instance masks, poses) written in the real source "
            "formats.",
            code_version=GENERATOR_VERSION,
        )
    },
    group_name="sources",
)
def sample_world(
    context: dg.AssetExecutionContext,
    config: SampleWorldAssetConfig,
    sources: SourcesResource,
    storage: StorageResource,
) -> dg.MaterializeResult:
    """Synthetic indoor scenes (exact depth, instance masks, poses) written in the real source formats."""
    root = sources.sample_world(storage)
    summary, rebuilt, version = build_sample_world(root, config)
    context.log.info("sample world at %s (%s)", root, "built" if rebuilt else "unchanged, skipped")
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(root)),
            "rebuilt": rebuilt,
            "summary": dg.MetadataValue.json(summary),
        },
        data_version=dg.DataVersion(version),
    )
