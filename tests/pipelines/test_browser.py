"""The Dagster UI, read in a real headless browser after a build: runs named by job, assets documented.

``dagster dev`` serves the instance that ``spatial-build`` wrote (as ``./dev.sh dagster`` does after
``./dev.sh build``); Chromium, driven by Playwright, opens the runs page and an asset's page. Debian's
``chromium`` is installed by ``./dev.sh``; Playwright's own browser download is not used.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [pytest.mark.slow, pytest.mark.server, pytest.mark.browser]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def dagster_ui(dev_build):
    """``dagster dev`` over the instance of the session's build; yields its base URL."""
    port = _free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(dev_build.dagster_home),
        "SPATIAL_DATA_ROOT": str(dev_build.storage),
    }
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster"), "dev", "-h", "127.0.0.1", "-p", str(port)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/server_info", timeout=5):
                    break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(1)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def test_runs_are_named_and_assets_documented_in_the_ui(dagster_ui, tmp_path):
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "Debian's chromium is missing: ./dev.sh install installs it"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{dagster_ui}/runs", wait_until="domcontentloaded")
            page.get_by_text("datasets_job").first.wait_for(timeout=90_000)  # spatial-build's runs, by job
            page.get_by_text("dge_job").first.wait_for(timeout=30_000)
            page.screenshot(path=str(tmp_path / "runs.png"))

            page.goto(f"{dagster_ui}/assets/mcq_questions", wait_until="domcontentloaded")
            page.get_by_text("question_id").first.wait_for(timeout=90_000)  # the column schema is shown
            page.screenshot(path=str(tmp_path / "mcq_questions.png"), full_page=True)
            text = page.inner_text("body")
            assert "mcq_questions" in text
            assert "Unexpected GraphQL error" not in text and "PythonError" not in text
        finally:
            browser.close()
