"""Files under the storage root are whole, hidden folders are not tables, empty tables load."""

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
from data_contracts.storage import atomic_write, table_path, write_table

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


def test_folder_listing_ignores_hidden_folders(tmp_path):
    (tmp_path / ".staging").mkdir()
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

    def test_features_cannot_be_replaced(self, tmp_path):
        with pytest.raises(ValueError, match="huggingface"):
            write_table(pl.DataFrame({"a": [1]}), tmp_path / "t.parquet", {"huggingface": "{}"})

    def test_missing_file(self, tmp_path):
        with pytest.raises(storage.MissingTableError):
            storage.read_table_metadata(tmp_path, "absent")
