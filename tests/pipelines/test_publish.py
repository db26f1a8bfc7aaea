"""``spatial-publish``, training and evaluation from a Hub id, against a loopback Hub, with the shared dev build.

The Hub is :class:`tests.fakes.hub_server.FakeHub` (its HTTP API, git-lfs included); the clients are the real
``huggingface_hub`` and ``datasets``. ``spatial-publish`` runs as a process where the test needs its whole
behaviour (the endpoint from ``HF_ENDPOINT``, its output, a kill), else :func:`publishing.hub.publish` runs in
this process with ``huggingface_hub`` pointed at the loopback Hub. The tables are the dev build's, read only;
a test that needs other data writes its own storage root.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pyarrow.parquet as pq
import pytest

from data_contracts.image_store import embed_images
from data_contracts.parquet_files import ParquetTableWriter
from data_contracts.storage import read_table, table_files, table_path, write_table
from model_clients.cache import CachedResponse, ResponseCache
from model_clients.records import TokenUsage
from publishing.card import new_manifest, render_card, table_entry
from publishing.cli import main as publish_main
from publishing.facts import llm_uses, table_facts
from publishing.hub import publish
from publishing.tables import PublishError, inspect_table, write_shards
from publishing.terms import check_terms, sources_of
from tests.fakes.hub_server import FakeHub

REPO_ROOT = Path(__file__).resolve().parents[2]
WRITE_TOKEN = "hf_alicewrite7c1f9e2d4b6a8"
READ_TOKEN = "hf_aliceread3e5a7c9b1d2f4"
OTHER_TOKEN = "hf_mallorywrite9a8b7c6d5e4"
TRAINING_TABLES = ["stvqa", "spatialcore_train", "sft_cold_start", "dge_tasks", "eval_items"]
ROUND_TRIP_TABLES = [*TRAINING_TABLES, "mcq_questions"]  # mcq_questions: images embedded from mcq_images
STVQA_7K_COLUMNS = {
    "image_id", "images", "problem", "question_only", "question_with_options", "options", "answer",
    "answer_only", "answer_text", "answer_option_text", "category", "level", "rating",
}  # fmt: skip


@pytest.fixture(scope="module")
def hub():
    with FakeHub(
        {WRITE_TOKEN: ("alice", "write"), READ_TOKEN: ("alice", "read"), OTHER_TOKEN: ("mallory", "write")}
    ) as server:
        yield server


@pytest.fixture
def hub_here(hub, tmp_path, monkeypatch):
    """``huggingface_hub`` in this process talking to the loopback Hub: online, no Xet, a fresh cache."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    monkeypatch.setattr(
        constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.url + "/{repo_id}/resolve/{revision}/{filename}"
    )
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub_cache"))
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no_cached_token"))
    monkeypatch.setenv("HF_TOKEN", WRITE_TOKEN)
    return hub


def hub_env(hub: FakeHub, home: Path, token: str | None = WRITE_TOKEN) -> dict[str, str]:
    """The environment of a process that uses the loopback Hub (and only it)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("HF_", "HUGGING_FACE")) and key != "PYTEST_CURRENT_TEST"
    }
    env.update(
        HF_ENDPOINT=hub.url,
        HF_HOME=str(home),
        HF_HUB_DISABLE_XET="1",
        HF_UPDATE_DOWNLOAD_COUNTS="0",
        HF_HUB_OFFLINE="0",
        HF_DATASETS_OFFLINE="0",
        PYTHONPATH=str(REPO_ROOT),
    )
    if token:
        env["HF_TOKEN"] = token
    return env


def changed_stvqa_root(source: Path, target: Path, version: str) -> Path:
    """A storage root whose ``stvqa`` is the build's without its last row, with data version ``version``."""
    frame = read_table(source, "stvqa")
    metadata = pq.ParquetFile(table_files(source, "stvqa")[0]).schema_arrow.metadata
    kept = {k.decode(): v.decode() for k, v in metadata.items() if k not in (b"ARROW:schema", b"huggingface")}
    write_table(frame.head(frame.height - 1), target / "stvqa.parquet", {**kept, "data_version": version})
    return target


def test_private_round_trip_reads_like_the_local_tables_and_never_shows_the_token(dev_build, hub, tmp_path):
    home = tmp_path / "hf_home"
    env = hub_env(hub, home)
    command = [sys.executable, "-m", "publishing.cli", "--tables", ",".join(ROUND_TRIP_TABLES)]
    command += ["--repo", "alice/world", "--private", "--storage-root", str(dev_build.storage)]
    command += ["--max-shard-mb", "0.02", "--verbose"]  # shards of about 20 KB: the scans' row groups split
    published = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT)
    assert published.returncode == 0, published.stderr

    repo = hub.repos["alice/world"]
    assert repo.private
    files = sorted(hub.history("alice/world")[0].files)
    assert "README.md" in files and "provenance.json" in files
    shards = [path for path in files if path.endswith(".parquet")]
    assert all(re.fullmatch(r"\w+/(train|val|test)-\d{5}-of-\d{5}\.parquet", path) for path in shards)
    dge = [path for path in shards if path.startswith("dge_tasks/")]
    assert len(dge) >= 2, dge
    assert {path.split("/")[1].split("-")[0] for path in shards if path.startswith("stvqa/")} == {
        "train",
        "val",
    }
    message = hub.history("alice/world")[0].title
    manifest = json.loads(hub.read("alice/world", "provenance.json"))
    for table in ROUND_TRIP_TABLES:
        assert f"{table} (data {manifest['tables'][table]['data_version']})" in message
    assert f"repo: {hub.url}/datasets/alice/world" in published.stdout
    assert f"commit: {hub.url}/datasets/alice/world/commit/{repo.refs['main']}" in published.stdout

    from huggingface_hub import DatasetCard

    card = DatasetCard(hub.read("alice/world", "README.md").decode())
    data = card.data.to_dict()
    for key in (
        "configs",
        "dataset_info",
        "license",
        "task_categories",
        "language",
        "size_categories",
        "tags",
    ):
        assert data.get(key), key
    assert data["pretty_name"] == "world" and "synthetic" in data["tags"]
    assert {config["config_name"] for config in data["configs"]} == set(ROUND_TRIP_TABLES)
    for heading in ("## LLM cost of the build", "## Sources and terms", "## Citations", "### Provenance"):
        assert heading in card.text
    assert "**Synthetic data.**" in card.text
    stvqa = next(info for info in data["dataset_info"] if info["config_name"] == "stvqa")
    features = {feature["name"]: feature for feature in stvqa["features"]}
    assert STVQA_7K_COLUMNS <= features.keys() and features["images"] == {"name": "images", "list": "image"}
    assert [split["name"] for split in stvqa["splits"]] == ["train", "val"]  # STVQA-7K's split names

    # anyone but alice sees no repo
    anonymous = subprocess.run(
        [sys.executable, "-c", "from huggingface_hub import HfApi; HfApi().dataset_info('alice/world')"],
        env=hub_env(hub, home, token=None),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert anonymous.returncode != 0 and "RepositoryNotFoundError" in anonymous.stderr

    loaded = subprocess.run(
        [sys.executable, "-m", "tests.pipelines.publish_roundtrip", "alice/world", str(dev_build.storage)]
        + [",".join(ROUND_TRIP_TABLES)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO_ROOT,
    )
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    report = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert {key.split("/")[0] for key in report} == set(ROUND_TRIP_TABLES)
    for split, result in report.items():
        assert result["rows"] == result["local_rows"] > 0, (split, result)
        assert result["columns_equal"] and not result["mismatches"], (split, result)
        assert result["images_decoded"] >= result["rows"], (split, result)

    outputs = published.stdout + published.stderr + loaded.stdout + loaded.stderr + anonymous.stderr
    assert WRITE_TOKEN not in outputs
    written = [path for path in home.rglob("*") if path.is_file()] + list(hub.blob_files())
    written += [path for path in (dev_build.storage / "published").rglob("*") if path.is_file()]
    assert written
    assert not [str(path) for path in written if WRITE_TOKEN.encode() in path.read_bytes()]


def test_unchanged_data_makes_no_commit_and_changed_data_one(dev_build, hub_here, tmp_path):
    first = publish(["stvqa"], "alice/idempotent", storage_root=dev_build.storage)
    assert first.committed and len(hub_here.history("alice/idempotent")) == 2  # the repo's first commit, ours
    again = publish(["stvqa"], "alice/idempotent", storage_root=dev_build.storage)
    assert not again.committed and "nothing to commit" in again.message
    assert len(hub_here.history("alice/idempotent")) == 2

    root = changed_stvqa_root(dev_build.storage, tmp_path / "changed", "0123456789abcdef")
    changed = publish(["stvqa"], "alice/idempotent", storage_root=root)
    history = hub_here.history("alice/idempotent")
    assert changed.committed and len(history) == 3
    assert history[0].title == "Publish stvqa (data 0123456789abcdef)"
    manifest = json.loads(hub_here.read("alice/idempotent", "provenance.json"))
    assert manifest["tables"]["stvqa"]["rows"] == read_table(dev_build.storage, "stvqa").height - 1


def test_create_pr_leaves_main_unchanged(dev_build, hub_here, tmp_path):
    publish(["stvqa"], "alice/reviewed", storage_root=dev_build.storage)
    main_before = hub_here.head("alice/reviewed")
    root = changed_stvqa_root(dev_build.storage, tmp_path / "changed", "fedcba9876543210")
    result = publish(["stvqa"], "alice/reviewed", storage_root=root, create_pr=True)
    assert result.committed and result.pull_request_url.endswith("/discussions/1")
    assert hub_here.head("alice/reviewed") == main_before
    proposed = json.loads(hub_here.read("alice/reviewed", "provenance.json", revision="refs/pr/1"))
    assert proposed["tables"]["stvqa"]["data_version"] == "fedcba9876543210"


def test_a_killed_upload_leaves_the_previous_commit(dev_build, hub_here, tmp_path):
    publish(["stvqa"], "alice/killed", storage_root=dev_build.storage)
    before, card = hub_here.head("alice/killed"), hub_here.read("alice/killed", "README.md")
    root = changed_stvqa_root(dev_build.storage, tmp_path / "changed", "00000000deadbeef")
    hub_here.hold_uploads()
    process = subprocess.Popen(
        [sys.executable, "-m", "publishing.cli", "--tables", "stvqa", "--repo", "alice/killed"]
        + ["--storage-root", str(root)],
        env=hub_env(hub_here, tmp_path / "hf_home"),
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert hub_here.upload_started.wait(timeout=240), "the upload never started"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        hub_here.release_uploads()
    assert hub_here.head("alice/killed") == before
    assert hub_here.read("alice/killed", "README.md") == card
    assert publish(
        ["stvqa"], "alice/killed", storage_root=root
    ).committed  # the next publication goes through


def _refusal(capsys, arguments: list[str]) -> str:
    assert publish_main(arguments) == 2
    captured = capsys.readouterr()
    assert not captured.out and "Traceback" not in captured.err
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spatial-publish: ") and lines[0].endswith("."), lines
    return lines[0]


def test_refusals_are_one_sentence(dev_build, hub_here, tmp_path, capsys, monkeypatch):
    storage = ["--storage-root", str(dev_build.storage)]
    monkeypatch.delenv("HF_TOKEN")
    assert "no Hugging Face token" in _refusal(capsys, ["--tables", "stvqa", "--repo", "alice/r", *storage])
    monkeypatch.setenv("HF_TOKEN", READ_TOKEN)
    assert "read access only" in _refusal(capsys, ["--tables", "stvqa", "--repo", "alice/r", *storage])

    monkeypatch.setenv("HF_TOKEN", WRITE_TOKEN)
    publish(["stvqa"], "alice/theirs", storage_root=dev_build.storage)
    capsys.readouterr()
    monkeypatch.setenv("HF_TOKEN", OTHER_TOKEN)
    refusal = _refusal(capsys, ["--tables", "spatialcore_train", "--repo", "alice/theirs", *storage])
    assert "no write access to alice/theirs" in refusal
    monkeypatch.setenv("HF_TOKEN", WRITE_TOKEN)

    empty_root = tmp_path / "empty"
    assert "is not built" in _refusal(
        capsys, ["--tables", "stvqa", "--repo", "alice/r", "--storage-root", str(empty_root)]
    )
    frame = read_table(dev_build.storage, "stvqa")
    write_table(frame.head(0), tmp_path / "no_rows" / "stvqa.parquet")
    refusal = _refusal(
        capsys, ["--tables", "stvqa", "--repo", "alice/r", "--storage-root", str(tmp_path / "no_rows")]
    )
    assert "has no row" in refusal
    write_table(frame.with_columns(answer=pl.lit("Z")), tmp_path / "broken" / "stvqa.parquet")
    refusal = _refusal(
        capsys, ["--tables", "stvqa", "--repo", "alice/r", "--storage-root", str(tmp_path / "broken")]
    )
    assert "fails its contract checks" in refusal and "answer" in refusal
    assert "cannot be published" in _refusal(
        capsys, ["--tables", "scene_graphs", "--repo", "alice/r", *storage]
    )
    assert "alice/r" not in hub_here.repos  # nothing refused left a repo behind


def test_an_incompatible_published_contract_is_refused_unless_forced(dev_build, hub_here, tmp_path, capsys):
    from huggingface_hub import CommitOperationAdd, HfApi

    publish(["stvqa"], "alice/contracts", storage_root=dev_build.storage)
    manifest = json.loads(hub_here.read("alice/contracts", "provenance.json"))
    manifest["tables"]["stvqa"]["contract_version"] = "9.0.0"
    HfApi(endpoint=hub_here.url, token=WRITE_TOKEN).create_commit(
        "alice/contracts",
        [CommitOperationAdd("provenance.json", json.dumps(manifest).encode())],
        commit_message="a future contract",
        repo_type="dataset",
    )
    root = changed_stvqa_root(dev_build.storage, tmp_path / "changed", "1111111111111111")
    arguments = ["--tables", "stvqa", "--repo", "alice/contracts", "--storage-root", str(root)]
    assert "contract version 9.0.0, incompatible with the local 1.1.0" in _refusal(capsys, arguments)
    assert publish_main([*arguments, "--force"]) == 0
    assert (
        json.loads(hub_here.read("alice/contracts", "provenance.json"))["tables"]["stvqa"]["contract_version"]
        == "1.1.0"
    )


def test_scannet_rows_need_their_terms_accepted(dev_build, hub_here, tmp_path, capsys):
    root = tmp_path / "scanned"
    for path in table_files(dev_build.storage, "dge_tasks"):
        metadata = pq.ParquetFile(path).schema_arrow.metadata
        kept = {
            k.decode(): v.decode() for k, v in metadata.items() if k not in (b"ARROW:schema", b"huggingface")
        }
        frame = pl.read_parquet(path).with_columns(origin=pl.lit("real"))
        write_table(frame, root / "dge_tasks" / path.name, kept)
    arguments = ["--tables", "dge_tasks", "--repo", "alice/scans", "--storage-root", str(root)]
    refusal = _refusal(capsys, arguments)
    assert "embeds data from ScanNet" in refusal and "--accept-source-terms scannet" in refusal
    assert publish_main([*arguments, "--accept-source-terms", "scannet"]) == 0
    card = hub_here.read("alice/scans", "README.md").decode()
    assert "**Restricted source accepted.**" in card and "ScanNet Terms of Use" in card


def test_dry_run_writes_the_repo_folder_and_pushes_nothing(dev_build, hub_here, tmp_path, capsys):
    requests = len(hub_here.requests)
    folder = tmp_path / "repo"
    arguments = [
        "--tables",
        "stvqa,dge_tasks",
        "--repo",
        "alice/dry",
        "--dry-run",
        "--dry-run-folder",
        str(folder),
    ]
    assert publish_main([*arguments, "--storage-root", str(dev_build.storage)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("dry run: Publish stvqa (data ") and f"repo folder: {folder}" in out
    assert "  stvqa/train-00000-of-00001.parquet" in out and "  README.md" in out
    assert len(table_files(dev_build.storage, "dge_tasks")) > 1  # one file per scan ...
    assert "  dge_tasks/train-00000-of-00001.parquet" in out  # ... concatenated into one shard of the bound
    assert (folder / "README.md").is_file() and (folder / "provenance.json").is_file()
    assert len(hub_here.requests) == requests


def test_a_dry_run_without_a_folder_writes_the_repo_folder_under_the_storage_root(dev_build, tmp_path):
    root = tmp_path / "root"
    write_in_row_groups(
        read_table(dev_build.storage, "stvqa"), root / "stvqa.parquet", 2, {"data_version": "v1"}
    )

    result = publish(["stvqa"], "alice/dry", storage_root=root, dry_run=True)

    assert result.folder == root / "published" / "alice__dry" and not result.committed
    assert (result.folder / "README.md").is_file() and (result.folder / "provenance.json").is_file()


def test_training_and_evaluation_read_a_hub_id_offline_once_fetched(dev_build, hub_here, monkeypatch):
    from huggingface_hub import constants

    from training.cli import fetch_hub_data_root
    from training.data import load_training_data
    from training.eval.benchmarks import BenchmarkSources, load_benchmarks

    publish(["stvqa", "dge_tasks"], "alice/trainable", storage_root=dev_build.storage)
    location = "hf://datasets/alice/trainable"
    fetched = load_training_data(location, "stvqa", "spatialthinker", "qwen2_5_vl", split="train")
    local = load_training_data(dev_build.storage, "stvqa", "spatialthinker", "qwen2_5_vl", split="train")
    assert fetched.dataset["question_only"] == local.dataset["question_only"]
    assert fetched.dataset["prompt"] == local.dataset["prompt"] and fetched.origins == local.origins

    arguments = SimpleNamespace(data_root=location, dataset_table="dge_tasks")
    fetch_hub_data_root(arguments)  # what spatial-train does with --data_root hf://...
    assert Path(arguments.data_root, "dge_tasks").is_dir()

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    requests = len(hub_here.requests)
    offline = load_training_data(location, "stvqa", "spatialthinker", "qwen2_5_vl", split="train")
    assert offline.dataset["question_only"] == local.dataset["question_only"]
    again = load_training_data(location, "dge_tasks", "dge", "qwen2_5_vl", split="train")
    assert len(again.dataset) == len(
        load_training_data(dev_build.storage, "dge_tasks", "dge", "qwen2_5_vl").dataset
    )
    items, _ = load_benchmarks(["stvqa_val"], BenchmarkSources(storage_root=location))
    assert items.height == read_table(dev_build.storage, "stvqa").filter(pl.col("split") == "val").height
    assert set(items["origin"]) == {"sample_world"}
    assert len(hub_here.requests) == requests  # all read from the Hub cache


def test_training_refuses_an_incompatible_published_contract(dev_build, hub_here, tmp_path):
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi

    from training.data import load_training_data
    from training.hub_data import IncompatibleContractError

    publish(["stvqa"], "alice/future", storage_root=dev_build.storage)
    shard = tmp_path / "train.parquet"
    original = [
        path for path in hub_here.history("alice/future")[0].files if path.startswith("stvqa/train-")
    ][0]
    (tmp_path / "original.parquet").write_bytes(hub_here.read("alice/future", original))
    arrow = pq.read_table(tmp_path / "original.parquet")
    metadata = {**arrow.schema.metadata, b"contract_version": b"2.0.0"}
    pq.write_table(arrow.replace_schema_metadata(metadata), shard)
    HfApi(endpoint=hub_here.url, token=WRITE_TOKEN).create_commit(
        "alice/future",
        [CommitOperationDelete(original), CommitOperationAdd(original, str(shard))],
        commit_message="a shard of a future contract",
        repo_type="dataset",
    )
    with pytest.raises(IncompatibleContractError, match=r"published under contract 2\.0\.0, which this code"):
        load_training_data("hf://datasets/alice/future", "stvqa", "spatialthinker", "qwen2_5_vl")


def test_the_publishing_asset_shows_the_repo_the_commit_and_the_card(dev_build, hub_here):
    import dagster as dg

    from assets.publish import hub_dataset
    from assets.resources import StorageResource
    from pipelines.definitions import ALL_ASSETS, defs

    def run(config: dict) -> dg.ExecuteInProcessResult:
        return dg.materialize(
            [hub_dataset],
            resources={"storage": StorageResource(root=str(dev_build.storage))},
            run_config={"ops": {"hub_dataset_asset": {"config": config}}},
            raise_on_error=False,
        )

    result = run({"repo_id": "alice/from_dagster", "tables": ["stvqa", "dge_tasks"], "private": True})
    assert result.success
    metadata = result.asset_materializations_for_node("hub_dataset_asset")[0].metadata
    assert metadata["repo_url"].value == f"{hub_here.url}/datasets/alice/from_dagster"
    assert metadata["commit_url"].value.endswith(f"/commit/{hub_here.head('alice/from_dagster')}")
    assert metadata["card"].value == hub_here.read("alice/from_dagster", "README.md").decode()
    assert set(metadata["data_versions"].value) == {"stvqa", "dge_tasks"}
    assert hub_here.repos["alice/from_dagster"].private and WRITE_TOKEN not in str(metadata)

    refused = run({"repo_id": "alice/from_dagster", "tables": ["scene_graphs"]})
    failure = next(event for event in refused.all_events if event.is_step_failure)
    assert "cannot be published" in failure.step_failure_data.user_failure_data.description

    assert set(hub_dataset.asset_deps[dg.AssetKey("hub_dataset")]) >= {
        dg.AssetKey("stvqa"),
        dg.AssetKey("dge_tasks"),
    }
    assert hub_dataset not in ALL_ASSETS  # not in spatial-build's graph, nor in any default job:
    for job in ("datasets_job", "stvqa_job", "spatialcore_job"):
        assert dg.AssetKey("hub_dataset") not in defs.resolve_job_def(job).asset_layer.selected_asset_keys
    assert defs.resolve_job_def("publish_job").asset_layer.selected_asset_keys == {dg.AssetKey("hub_dataset")}


def write_in_row_groups(
    frame: pl.DataFrame, path: Path, rows_per_group: int, metadata: dict[str, str]
) -> None:
    """``frame`` as a table file of row groups of ``rows_per_group`` rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        writer = ParquetTableWriter(handle, frame.schema, metadata)
        for start in range(0, frame.height, rows_per_group):
            writer.write(frame.slice(start, rows_per_group))
        writer.close()


def test_shards_are_bounded_and_hold_every_row_in_order(dev_build, tmp_path):
    frame = read_table(dev_build.storage, "stvqa")
    write_in_row_groups(frame, tmp_path / "root" / "stvqa.parquet", 2, {"data_version": "v1"})
    bound = 40_000
    shards = write_shards(inspect_table(tmp_path / "root", "stvqa"), tmp_path / "repo", max_shard_bytes=bound)

    assert len([shard for shard in shards if shard.split == "train"]) > 1
    for split in ("train", "val"):
        ours = [shard for shard in shards if shard.split == split]
        assert [shard.path_in_repo for shard in ours] == [
            f"stvqa/{split}-{index:05d}-of-{len(ours):05d}.parquet" for index in range(len(ours))
        ]
        for shard in ours:  # a shard closes once past the bound: before its last row group it was under it
            metadata = pq.ParquetFile(shard.local_path).metadata
            last = metadata.row_group(metadata.num_row_groups - 1)
            last_bytes = sum(last.column(i).total_compressed_size for i in range(last.num_columns))
            assert shard.size - metadata.serialized_size - last_bytes < bound
        read = pl.concat([pl.read_parquet(shard.local_path) for shard in ours])
        assert read.equals(frame.filter(pl.col("split") == split))
    metadata = pq.ParquetFile(shards[0].local_path).schema_arrow.metadata
    assert b'"_type": "Image"' in metadata[b"huggingface"] and metadata[b"data_version"] == b"v1"
    assert b"large_string" not in metadata[b"huggingface"]  # the Hub's usual string and list types


def test_mcq_questions_are_published_with_their_images_put_back_a_few_at_a_time(
    dev_build, tmp_path, monkeypatch
):
    import publishing.tables

    questions = read_table(dev_build.storage, "mcq_questions")
    assert "image" not in questions.columns  # the build stores each image once, in mcq_images
    root = tmp_path / "root"
    write_in_row_groups(questions, root / "mcq_questions.parquet", 5, {"data_version": "q1"})
    with pytest.raises(PublishError, match="mcq_images is not built"):
        inspect_table(root, "mcq_questions")

    (root / "mcq_images.parquet").write_bytes(table_path(dev_build.storage, "mcq_images").read_bytes())
    embedded_rows = []
    embed = publishing.tables.embed_images
    monkeypatch.setattr(publishing.tables, "EMBED_ROWS", 2)
    monkeypatch.setattr(
        publishing.tables,
        "embed_images",
        lambda rows, store: embedded_rows.append(rows.height) or embed(rows, store),
    )
    local = inspect_table(root, "mcq_questions")
    assert local.data_version == "q1" and local.image_store == root / "mcq_images.parquet"
    shards = write_shards(local, tmp_path / "repo")

    assert embedded_rows and max(embedded_rows) <= 2 and sum(embedded_rows) == questions.height
    expected = embed_images(questions, root / "mcq_images.parquet")
    for split in expected["split"].unique().to_list():
        read = pl.concat([pl.read_parquet(s.local_path) for s in shards if s.split == split])
        assert read.equals(expected.filter(pl.col("split") == split))
    metadata = pq.ParquetFile(shards[0].local_path).schema_arrow.metadata
    assert b'"image": {"_type": "Image"}' in metadata[b"huggingface"]


def test_a_row_group_that_breaks_the_contract_stops_the_table(dev_build, tmp_path):
    frame = read_table(dev_build.storage, "stvqa")
    broken = frame.with_columns(
        answer=pl.when(pl.int_range(pl.len()) == frame.height - 1).then(pl.lit("Z")).otherwise("answer")
    )
    write_in_row_groups(broken, tmp_path / "root" / "stvqa.parquet", 4, {"data_version": "v1"})
    with pytest.raises(PublishError, match=r"fails its contract checks \(Stvqa: .*answer"):
        write_shards(inspect_table(tmp_path / "root", "stvqa"), tmp_path / "repo")


def test_the_card_of_real_sources_states_their_terms_and_the_build_cost(dev_build, tmp_path):
    from huggingface_hub import DatasetCard

    root = tmp_path / "root"
    real = {"data_version": "r1"}
    write_in_row_groups(
        read_table(dev_build.storage, "stvqa").with_columns(origin=pl.lit("real")),
        root / "stvqa.parquet",
        8,
        real,
    )
    dge = read_table(dev_build.storage, "dge_tasks").with_columns(origin=pl.lit("real"))
    write_in_row_groups(dge, root / "dge_tasks" / "scene0000_00.parquet", 50, real)
    with ResponseCache(root / "llm_cache" / "responses.sqlite") as cache:
        for index, cost in enumerate((0.25, 0.5)):
            cache.put(
                CachedResponse(
                    f"key{index}", "anthropic", "claude-sonnet-4-20250514", "stvqa_generation", "3", "ok",
                    "{}", {}, None, TokenUsage(100, 20), cost, 1, time.time(),
                )
            )  # fmt: skip
    entries = {}
    for name in ("stvqa", "dge_tasks"):
        local = inspect_table(root, name)
        facts = table_facts(root, local)
        sources = sources_of(name, {key: set(counts) for key, counts in facts.values.items()})
        accepted = check_terms(name, sources, ["scannet"])
        entries[name] = table_entry(facts, write_shards(local, tmp_path / "repo"), accepted, sorted(sources))
    card = DatasetCard(render_card("alice/real", new_manifest(None, entries, llm_uses(root))))

    assert card.data.license == "other" and "synthetic" not in card.data.tags
    assert "**Synthetic data.**" not in card.text and "**Restricted source accepted.**" in card.text
    assert "| anthropic | claude-sonnet-4-20250514 | `stvqa_generation@3` | 2 | 0.7500 |" in card.text
    for citation in (
        "Visual Genome: Connecting Language and Vision",
        "ScanNet: Richly-annotated",
        "arXiv:2511.07403",
    ):
        assert citation in card.text


def test_the_example_card_has_the_sections_and_metadata_of_a_card_made_now(dev_build, tmp_path):
    from huggingface_hub import DatasetCard

    made = publish(TRAINING_TABLES, "your-name/spatial-grounding-sample", storage_root=dev_build.storage,
                   dry_run=True, dry_run_folder=tmp_path / "repo").card  # fmt: skip
    example = (REPO_ROOT / "publishing" / "EXAMPLE_CARD.md").read_text(encoding="utf-8")

    def headings(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("#")]

    assert headings(example) == headings(made)
    assert DatasetCard(example).data.to_dict().keys() == DatasetCard(made).data.to_dict().keys()
