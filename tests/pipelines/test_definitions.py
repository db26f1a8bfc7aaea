"""The Definitions load: every asset documented, every job named, the automation wired."""

import re

import dagster as dg

from pipelines.definitions import ALL_ASSETS, defs
from pipelines.jobs import DATASETS_JOB, DGE_JOB, GROUNDING_SHARDS_JOB, SOURCES_JOB, STVQA_SHARDS_JOB


def test_definitions_load():
    dg.Definitions.validate_loadable(defs)
    job_names = {job.name for job in defs.jobs}
    assert {SOURCES_JOB, DATASETS_JOB, DGE_JOB, GROUNDING_SHARDS_JOB, STVQA_SHARDS_JOB} <= job_names
    assert defs.resolve_job_def(DATASETS_JOB) is not None


def test_every_asset_is_documented():
    for assets_def in ALL_ASSETS:
        for key in assets_def.keys:
            assert assets_def.descriptions_by_key.get(key), f"{key.to_user_string()} has no description"


def test_every_source_table_depends_on_its_raw_files():
    graph = defs.resolve_asset_graph()
    for table, raw in [
        ("mcq_questions", "raw_mcq_files"),
        ("scene_graphs", "raw_scene_graph_files"),
        ("rgbd_frames", "raw_scan_files"),
        ("rgbd_scenes", "raw_scan_files"),
    ]:
        assert dg.AssetKey(raw) in graph.get(dg.AssetKey(table)).parent_keys, table


RST_MARKUP = re.compile(r":(class|func|mod|meth|data|attr):`|``")


def test_descriptions_shown_in_the_ui_are_plain_markdown():
    shown = {f"resource {name}": type(resource).__doc__ or "" for name, resource in defs.resources.items()}
    shown.update(
        {
            f"asset {spec.key.to_user_string()}": spec.description or ""
            for spec in defs.resolve_all_asset_specs()
        }
    )
    assert not [where for where, text in shown.items() if RST_MARKUP.search(text)]


def test_every_asset_op_name_ends_in_asset():
    """Run config names ops: every op that materialises assets is ``<name>_asset`` (``sample_world_asset``,
    ``mcq_questions_asset``, ``eval_report_asset``), never the bare asset key, so a user can tell the op
    name from the asset without looking it up."""
    ops = {
        assets_def.node_def.name: sorted(key.to_user_string() for key in assets_def.keys)
        for assets_def in defs.resolve_asset_graph().assets_defs
        if assets_def.is_executable and assets_def.is_materializable and assets_def.keys  # not check-only ops
    }
    assert len(ops) >= 20
    assert {name: keys for name, keys in ops.items() if not name.endswith("_asset")} == {}
    for name, keys in ops.items():
        stem = name.removesuffix("_asset")
        assert any(key.startswith(stem) for key in keys), (name, keys)
