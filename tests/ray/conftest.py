"""Fixtures of the Ray tests: one real local Ray cluster (2 CPUs) for the session, and shared helpers.

The cluster is started by the test session (``ray.init``) in a short temporary folder and shut down at
the end; the modules that start it skip, with the reason, when the ``ray`` extra is not installed.
"""

from __future__ import annotations

import io
import shutil
import tempfile
from collections.abc import Iterator

import polars as pl
import pytest

from tests.grounding.conftest import single_torch_thread  # noqa: F401  (the driver's torch on one thread)

RAY_CPUS = 2


@pytest.fixture(scope="session")
def ray_local_cluster() -> Iterator[object]:
    """``ray`` connected to a local cluster of 2 CPUs started for this session (no dashboard)."""
    ray = pytest.importorskip("ray", reason="the 'ray' extra is not installed: pip install -e '.[ray]'")
    folder = tempfile.mkdtemp(prefix="ray")  # short: Ray's socket paths must fit in 107 characters
    ray.init(num_cpus=RAY_CPUS, include_dashboard=False, _temp_dir=folder, logging_level="WARNING")
    try:
        yield ray
    finally:
        ray.shutdown()
        shutil.rmtree(folder, ignore_errors=True)


def parquet_bytes(frame: pl.DataFrame) -> bytes:
    """The frame written as Parquet (what the IO manager stores): equal bytes mean equal tables."""
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    return buffer.getvalue()
