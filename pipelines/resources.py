"""Dagster resources: where raw inputs live, and which backend each model-calling step uses.

Every field left empty falls back to the built-in sample world, so the whole graph runs on a fresh
machine with no keys, no weights and no downloads.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from pydantic import Field

from pipelines.storage import default_storage_root


class StorageResource(dg.ConfigurableResource):
    """The storage root shared by the Parquet caches, response caches, previews and the sample world."""

    root: str | None = Field(
        default=None,
        description="Storage root; default $SPATIAL_DATA_ROOT, $DAGSTER_HOME/spatial_data or ./data.",
    )

    @property
    def path(self) -> Path:
        """The resolved storage root."""
        return Path(self.root or default_storage_root())


class SourcesResource(dg.ConfigurableResource):
    """Paths of the raw data sets. Empty fields read the sample world under the storage root."""

    sample_world_root: str | None = Field(
        default=None, description="Sample world folder; default <storage root>/sample_world."
    )
    omnispatial_root: str | None = Field(
        default=None, description="OmniSpatial folder holding data.json and <task_type>/ images."
    )
    omnispatial_split: str = Field(
        default="hash", description="'train', 'test', or 'hash' (stable 80/20 split by image id)."
    )
    omnispatial_test_fraction: float = Field(
        default=0.2, description="Test share when omnispatial_split is 'hash'."
    )
    spatialab_path: str | None = Field(
        default=None, description="SpatiaLab table (.json, .jsonl, .csv or .parquet)."
    )
    spatialab_images_dir: str | None = Field(
        default=None, description="SpatiaLab images folder; default images/ beside the table."
    )
    visual_genome_root: str | None = Field(
        default=None,
        description="Visual Genome folder (raw v1.4 JSON or the VG150 h5 layout) or a prompt-style Parquet file.",
    )
    visual_genome_layout: str = Field(default="auto", description="'auto', 'raw', 'vg150' or 'parquet'.")
    vg150_box_scale: int = Field(
        default=1024, description="Longer-side scale of the VG150 h5 boxes (1024 or 512)."
    )
    scannet_root: str | None = Field(
        default=None, description="ScanNet 'scans' folder with one folder per scene."
    )
    coco_instances_path: str | None = Field(
        default=None, description="COCO instances JSON with human boxes for the OmniSpatial images."
    )

    def sample_world(self, storage: StorageResource) -> Path:
        """The sample world folder."""
        return Path(self.sample_world_root) if self.sample_world_root else storage.path / "sample_world"

    def omnispatial(self, storage: StorageResource) -> Path:
        """OmniSpatial folder (the sample world's when unset)."""
        return (
            Path(self.omnispatial_root)
            if self.omnispatial_root
            else self.sample_world(storage) / "omnispatial"
        )

    def spatialab(self, storage: StorageResource) -> Path | None:
        """SpatiaLab table (the sample world's when unset and present)."""
        if self.spatialab_path:
            return Path(self.spatialab_path)
        default = self.sample_world(storage) / "spatialab" / "spatialab.json"
        return default if default.exists() or not self.omnispatial_root else None

    def visual_genome(self, storage: StorageResource) -> Path:
        """Visual Genome folder or file (the sample world's when unset)."""
        return (
            Path(self.visual_genome_root)
            if self.visual_genome_root
            else self.sample_world(storage) / "visual_genome"
        )

    def scannet(self, storage: StorageResource) -> Path:
        """ScanNet scans folder (the sample world's when unset)."""
        return (
            Path(self.scannet_root) if self.scannet_root else self.sample_world(storage) / "scannet" / "scans"
        )

    def coco_instances(self, storage: StorageResource) -> Path:
        """COCO instances file (the sample world's when unset)."""
        return (
            Path(self.coco_instances_path)
            if self.coco_instances_path
            else self.sample_world(storage) / "coco" / "instances.json"
        )

    def uses_sample_world(self) -> bool:
        """True when at least one source falls back to the sample world."""
        return not (self.omnispatial_root and self.visual_genome_root and self.scannet_root)
