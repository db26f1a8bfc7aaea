"""Files under the storage root are whole, sets of tables are published together, empty tables load."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import datasets
import polars as pl
import pyarrow.parquet as pq
import pytest
from PIL import Image

from data_contracts import storage
from data_contracts.images import encode_image
from data_contracts.storage import (
    STAGING_FOLDER,
    StagedTables,
    atomic_write,
    recover_storage,
    table_path,
    write_table,
)

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        cwd=REPOSITORY_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )


SCHEMA = {"tag": pl.String, "value": pl.Int64, "box": pl.List(pl.Int64)}


def _frame(rows: int, tag: str = "a") -> pl.DataFrame:
    return pl.DataFrame(
        {"tag": [tag] * rows, "value": list(range(rows)), "box": [[1, 2, 3, 4]] * rows}, schema=SCHEMA
    )


class TestEmptyTables:
    def test_written_without_a_row_group_and_read_by_polars_and_arrow(self, tmp_path):
        path = tmp_path / "empty.parquet"
        write_table(_frame(0), path)
        assert pq.ParquetFile(path).metadata.num_row_groups == 0
        assert pl.read_parquet(path).schema == _frame(0).schema
        assert pl.scan_parquet(path).collect().height == 0
        assert pq.read_table(path).num_rows == 0

    def test_partition_folder_with_empty_files_loads_with_datasets(self, tmp_path):
        folder = tmp_path / "table"
        write_table(_frame(0, "x"), folder / "p0.parquet")
        write_table(_frame(3, "b"), folder / "p1.parquet")
        write_table(_frame(0, "x"), folder / "p2.parquet")
        write_table(_frame(2, "c"), folder / "p3.parquet")
        loaded = datasets.load_dataset(
            "parquet", data_files=str(folder / "*.parquet"), split="train", cache_dir=str(tmp_path / "hf")
        )
        assert loaded.num_rows == 5
        assert sorted(loaded["tag"]) == ["b", "b", "b", "c", "c"]
        assert set(loaded.features) == {"tag", "value", "box"}
        assert pl.read_parquet(folder / "*.parquet").height == 5

    def test_an_empty_first_file_still_gives_the_features(self, tmp_path):
        folder = tmp_path / "table"
        write_table(_frame(0), folder / "a.parquet")
        write_table(_frame(1), folder / "b.parquet")
        loaded = datasets.load_dataset(
            "parquet",
            data_files=[str(folder / "a.parquet"), str(folder / "b.parquet")],
            split="train",
            cache_dir=str(tmp_path / "hf"),
        )
        assert loaded.num_rows == 1 and loaded[0]["box"] == [1, 2, 3, 4]

    def test_a_wholly_empty_table_streams_with_datasets(self, tmp_path):
        path = tmp_path / "empty.parquet"
        write_table(_frame(0), path)
        streamed = datasets.load_dataset("parquet", data_files=str(path), split="train", streaming=True)
        assert list(streamed) == []
        assert set(streamed.features) == {"tag", "value", "box"}


class TestAtomicWrites:
    def test_a_failed_write_keeps_the_old_file_and_leaves_nothing(self, tmp_path):
        path = tmp_path / "t.parquet"
        write_table(_frame(2), path)
        before = path.read_bytes()
        with pytest.raises(RuntimeError), atomic_write(path) as handle:
            handle.write(b"half")
            raise RuntimeError("stop")
        assert path.read_bytes() == before
        assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]

    def test_temporaries_of_dead_writers_are_removed_and_live_ones_kept(self, tmp_path):
        dead = tmp_path / ".t.parquet.dead0000.tmp"
        dead.write_bytes(b"half a file")
        holder = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import fcntl, sys, time; handle = open(sys.argv[1], 'a'); fcntl.flock(handle, fcntl.LOCK_EX); "
                "print('locked', flush=True); time.sleep(30)",
                str(tmp_path / ".u.parquet.live0000.tmp"),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert holder.stdout.readline().strip() == "locked"
            write_table(_frame(1), tmp_path / "t.parquet")
            assert sorted(p.name for p in tmp_path.iterdir()) == [".u.parquet.live0000.tmp", "t.parquet"]
        finally:
            holder.kill()
            holder.wait()
        write_table(_frame(1), tmp_path / "t.parquet")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]


_KILLED_COMMIT = """
import os, signal, sys
from pathlib import Path
import polars as pl
from data_contracts import storage
root, moves_before_kill = Path(sys.argv[1]), int(sys.argv[2])
tables = storage.StagedTables(root, "run.step")
tables.add("t", pl.DataFrame({"tag": ["new"]}), storage.table_path(root, "t"))
tables.add("t_quarantine", pl.DataFrame({"tag": ["new"]}), storage.table_path(root, "t_quarantine", "p"))
if moves_before_kill < 0:
    os.kill(os.getpid(), signal.SIGKILL)  # staged, never committed
replace, done = os.replace, []
def replace_then_die(source, target):
    if str(source).endswith(".staged"):  # a table moving into place (not the journal being written)
        if len(done) == moves_before_kill:
            os.kill(os.getpid(), signal.SIGKILL)
        done.append(target)
    replace(source, target)
os.replace = replace_then_die
tables.commit()
"""


class TestStagedTables:
    def _old(self, root: Path) -> None:
        write_table(pl.DataFrame({"tag": ["old"]}), table_path(root, "t"))
        write_table(pl.DataFrame({"tag": ["old"]}), table_path(root, "t_quarantine", "p"))

    def _tags(self, root: Path) -> list[str]:
        return [
            pl.read_parquet(table_path(root, "t"))["tag"][0],
            pl.read_parquet(table_path(root, "t_quarantine", "p"))["tag"][0],
        ]

    @pytest.mark.parametrize("moves_before_kill", [0, 1])
    def test_a_commit_killed_half_way_is_rolled_forward(self, tmp_path, moves_before_kill):
        self._old(tmp_path)
        result = _run(_KILLED_COMMIT, str(tmp_path), str(moves_before_kill))
        assert result.returncode == -9, result.stderr
        assert self._tags(tmp_path) == (["new", "old"] if moves_before_kill == 1 else ["old", "old"])
        assert list((tmp_path / STAGING_FOLDER).glob("*/*/journal.json"))  # the commit was journaled
        recover_storage(tmp_path)
        assert self._tags(tmp_path) == ["new", "new"]
        assert sorted(p.name for p in (tmp_path / STAGING_FOLDER).iterdir()) == ["commit.lock"]

    def test_a_set_staged_by_a_killed_writer_is_never_published(self, tmp_path):
        self._old(tmp_path)
        result = _run(_KILLED_COMMIT, str(tmp_path), "-1")
        assert result.returncode == -9, result.stderr
        assert len(list((tmp_path / STAGING_FOLDER).rglob("*.staged"))) == 2
        recover_storage(tmp_path)
        assert self._tags(tmp_path) == ["old", "old"]
        assert sorted(p.name for p in (tmp_path / STAGING_FOLDER).iterdir()) == ["commit.lock"]

    def test_nothing_is_visible_before_the_commit(self, tmp_path):
        tables = StagedTables(tmp_path, "run.step")
        tables.add("t", _frame(1), table_path(tmp_path, "t"))
        tables.add("none", None, None)
        assert tables.names() == {"t", "none"}
        assert not table_path(tmp_path, "t").exists()
        tables.commit()
        assert pl.read_parquet(table_path(tmp_path, "t")).height == 1
        assert not tables.folder.exists()

    def test_a_process_removes_its_staging_when_it_exits(self, tmp_path):
        script = (
            "import sys; import polars as pl; from data_contracts import storage; "
            "t = storage.StagedTables(sys.argv[1], 'failed.step'); "
            "t.add('x', pl.DataFrame({'a': [1]}), storage.table_path(sys.argv[1], 'x'))"
        )
        assert _run(script, str(tmp_path)).returncode == 0
        assert sorted(p.name for p in (tmp_path / STAGING_FOLDER).iterdir()) == ["commit.lock"]
        assert not table_path(tmp_path, "x").exists()


def test_folder_listing_ignores_the_staging_folder(tmp_path):
    (tmp_path / STAGING_FOLDER).mkdir()
    with pytest.raises(storage.MissingTableError, match=r"tables in .*: \(none\)"):
        storage.table_files(tmp_path, "t")


class TestKeyValueMetadata:
    METADATA = {"contract_version": "1.1.0", "code_version": "3", "source_fingerprint": "0123456789abcdef"}

    @pytest.mark.parametrize("rows", [2, 0])
    def test_written_beside_the_datasets_features(self, tmp_path, rows):
        image = encode_image(Image.new("RGB", (4, 3)), path="a.png")
        frame = pl.DataFrame({"a": [1, 2], "image": [image, image]}).head(rows)
        path = table_path(tmp_path, "t", "p1")
        write_table(frame, path, self.METADATA)
        raw = pq.read_schema(path).metadata  # read with pyarrow, not through the module's reader
        assert {
            key.decode(): value.decode() for key, value in raw.items() if key.decode() in self.METADATA
        } == (self.METADATA)
        assert b"huggingface" in raw
        assert storage.read_table_metadata(tmp_path, "t", "p1") == self.METADATA
        assert pl.read_parquet(path).equals(frame)
        if rows:
            loaded = datasets.load_dataset("parquet", data_files=str(path), split="train")
            assert loaded.num_rows == rows and loaded[0]["image"].size == (4, 3)

    def test_staged_tables_carry_it(self, tmp_path):
        tables = StagedTables(tmp_path, "run.step")
        tables.add("t", pl.DataFrame({"a": [1]}), table_path(tmp_path, "t"), self.METADATA)
        tables.add("t_quarantine", pl.DataFrame({"r": ["x"]}).head(0), table_path(tmp_path, "t_quarantine"))
        tables.commit()
        assert storage.read_table_metadata(tmp_path, "t") == self.METADATA
        assert storage.read_table_metadata(tmp_path, "t_quarantine") == {}

    def test_features_cannot_be_replaced(self, tmp_path):
        with pytest.raises(ValueError, match="huggingface"):
            write_table(pl.DataFrame({"a": [1]}), tmp_path / "t.parquet", {"huggingface": "{}"})

    def test_missing_file(self, tmp_path):
        with pytest.raises(storage.MissingTableError):
            storage.read_table_metadata(tmp_path, "absent")
