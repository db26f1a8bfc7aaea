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
from pathlib import Path
from types import SimpleNamespace

import polars as pl
import pyarrow.parquet as pq
import pytest

from data_contracts.storage import read_table, table_files, write_table
from publishing.cli import main as publish_main
from publishing.hub import publish
from tests.fakes.hub_server import FakeHub

REPO_ROOT = Path(__file__).resolve().parents[2]
WRITE_TOKEN = "hf_alicewrite7c1f9e2d4b6a8"
READ_TOKEN = "hf_aliceread3e5a7c9b1d2f4"
OTHER_TOKEN = "hf_mallorywrite9a8b7c6d5e4"
TRAINING_TABLES = ["stvqa", "spatialcore_train", "sft_cold_start", "dge_tasks", "eval_items"]


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
    command = [sys.executable, "-m", "publishing.cli", "--tables", ",".join(TRAINING_TABLES)]
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
    for table in TRAINING_TABLES:
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
    assert {config["config_name"] for config in data["configs"]} == set(TRAINING_TABLES)
    for heading in ("## LLM cost of the build", "## Sources and terms", "## Citations", "### Provenance"):
        assert heading in card.text
    assert "**Synthetic data.**" in card.text

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
        + [",".join(TRAINING_TABLES)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO_ROOT,
    )
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    report = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert {key.split("/")[0] for key in report} == set(TRAINING_TABLES)
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
