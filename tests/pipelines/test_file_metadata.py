"""Every Parquet file a build writes says, in its own key-value metadata, what wrote it and from what.

Truth comes from elsewhere than the IO manager: contract versions from the contract modules, code
versions and upstream assets from the definitions, the raw files' versions from the observations in
the instance, and the upstream tables' versions from those files' own footers, read with pyarrow.
"""

from __future__ import annotations

import hashlib
import importlib
import json

import dagster as dg
import datasets
import pyarrow.parquet as pq

from data_contracts.parquet_files import FILE_METADATA_KEYS, read_file_metadata
from data_contracts.storage import read_table_metadata, table_path
from pipelines.definitions import defs


def expected_contract_version(table: str) -> str:
    """The contract version of ``table``, read from its contract module."""
    if table.endswith("_quarantine"):
        return importlib.import_module("data_contracts.quarantine").CONTRACT_VERSION
    special = {
        "stvqa_pass_at_2_attempts": ("stvqa_validated", "ATTEMPTS_CONTRACT_VERSION"),
        "pseudo_gt_audit_precision": ("pseudo_gt_audit", "CONTRACT_VERSION"),
        "dge_image_tasks": ("dge_tasks", "CONTRACT_VERSION"),
        "spatialcore_train_corrupted": ("spatialcore_train", "CONTRACT_VERSION"),
        "mcq_images": ("mcq_questions", "IMAGES_CONTRACT_VERSION"),
    }
    module, attribute = special.get(table, (table, "CONTRACT_VERSION"))
    return getattr(importlib.import_module(f"data_contracts.{module}"), attribute)


def table_files(storage) -> dict[tuple[str, str | None], object]:
    """``{(table, partition): path}`` of every table file under the storage root."""
    files = {}
    for path in storage.glob("*.parquet"):
        files[(path.stem, None)] = path
    for folder in storage.iterdir():
        if (
            folder.is_dir()
            and not folder.name.startswith(".")
            and folder.name not in {"sample_world", "previews"}
        ):
            for path in folder.glob("*.parquet"):
                files[(folder.name, path.stem)] = path
    return files


def _sha16(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def _footer(path) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in (pq.read_metadata(path).metadata or {}).items()}


def expected_input_version(instance, files, table: str, partition: str | None, upstream: str):
    """What a file of ``table`` built from ``upstream`` must record: the raw source's observation (of the
    same scan), the upstream file's own version (the same partition's, or the one file), or a hash over
    every partition file's version."""
    key = dg.AssetKey(upstream)
    if upstream.startswith("raw_"):
        scoped = dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition else None)
        (record,) = instance.fetch_observations(scoped, limit=1).records
        return record.asset_observation.data_version
    if (upstream, partition) in files and partition is not None:
        return _footer(files[(upstream, partition)])["data_version"]
    if (upstream, None) in files:
        return _footer(files[(upstream, None)])["data_version"]
    partitions = {part: path for (name, part), path in files.items() if name == upstream}
    if partitions:
        return _sha16({part: _footer(path)["data_version"] for part, path in partitions.items()})
    (record,) = instance.fetch_materializations(key, limit=1).records
    return record.asset_materialization.tags["dagster/data_version"]


def test_every_file_says_its_contract_code_version_and_inputs(dev_build):
    files = table_files(dev_build.storage)
    graph = defs.resolve_asset_graph()
    code_versions = {}
    for assets_def in graph.assets_defs:
        code_versions.update(
            {key.to_user_string(): version for key, version in assets_def.code_versions_by_key.items()}
        )
    tables = {table for table, _ in files}
    assert {"mcq_questions", "mcq_questions_quarantine", "dge_tasks", "pseudo_gt_boxes", "stvqa"} <= tables
    empty = 0
    for (table, partition), path in sorted(files.items(), key=lambda item: (item[0][0], item[0][1] or "")):
        metadata = read_file_metadata(path)
        assert set(FILE_METADATA_KEYS) <= set(metadata), (path, metadata)
        assert metadata["contract_version"] == expected_contract_version(table), path
        assert metadata["code_version"] == code_versions[table], path
        versions = json.loads(metadata["input_data_versions"])
        parents = {key.to_user_string() for key in graph.get(dg.AssetKey(table)).parent_keys}
        assert set(versions) == parents, path
        for upstream, version in versions.items():
            expected = expected_input_version(dev_build.instance, files, table, partition, upstream)
            assert version == expected, (path, upstream)
        assert metadata["source_fingerprint"] == _sha16(versions), path
        assert metadata["data_version"] == _sha16(
            {
                "code_version": code_versions[table],
                "contract_version": metadata["contract_version"],
                "inputs": versions,
            }
        )
        # nothing in it depends on where the data lies
        assert str(dev_build.workdir) not in json.dumps(metadata), path
        schema = pq.read_schema(path)
        if {"image", "images"} & set(schema.names):  # the datasets features are still there
            assert b"huggingface" in schema.metadata, path
        empty += pq.ParquetFile(path).metadata.num_rows == 0
    assert empty > 0  # empty tables carry the metadata too
    sources = read_table_metadata(dev_build.storage, "mcq_questions")
    assert set(json.loads(sources["input_data_versions"])) == {"raw_mcq_files", "sample_world"}
    shard = read_table_metadata(dev_build.storage, "pseudo_gt_boxes", "shard-00")
    assert {"mcq_questions", "object_phrases"} <= set(json.loads(shard["input_data_versions"]))
    scans = sorted(part for name, part in files if name == "rgbd_frames")
    scan_versions = {
        scan: json.loads(read_table_metadata(dev_build.storage, "rgbd_frames", scan)["input_data_versions"])
        for scan in scans
    }
    assert scan_versions["scene0000_00"]["raw_scan_files"] != scan_versions["scene0001_00"]["raw_scan_files"]


def test_files_with_metadata_still_load_with_datasets(dev_build):
    for table in ("mcq_images", "spatialcore_train"):
        path = table_path(dev_build.storage, table)
        loaded = datasets.load_dataset("parquet", data_files=str(path), split="train")
        assert loaded.num_rows > 0 and loaded.features["image"] == datasets.Image(), table
