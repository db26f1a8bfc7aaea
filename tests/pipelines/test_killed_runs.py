"""A step that calls paid APIs stops when the process that started it is killed.

Two real processes: a "run worker" that starts a "step" child; the step builds its LLM client the
way the assets do (``LLMResource.get_client``) and would then wait for answers. The worker is
killed with SIGKILL; the step must be gone within seconds instead of paying on unobserved.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

STEP = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from assets.resources import LLMResource

    folder = Path(sys.argv[1])
    resource = LLMResource(provider="openai", model="gpt-4o-mini", api_key="test",
                           base_url="http://127.0.0.1:9/v1", cache_path=str(folder / "cache.sqlite"))
    with resource.get_client():
        (folder / "step.pid").write_text(str(__import__("os").getpid()))
        time.sleep(120)  # standing in for a long batch of paid requests
    """
)
WORKER = textwrap.dedent(
    """
    import subprocess, sys, time
    subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
    time.sleep(120)
    """
)


def _alive(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    if not status.exists():
        return False
    return "State:\tZ" not in status.read_text()  # a zombie has stopped running


IGNORING_SIGTERM = "import signal; signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
"""What a step inherits when its build was started with SIGINT ignored (`nohup ... &`): Dagster's interrupt
set-up gives SIGTERM SIGINT's handler."""


@pytest.mark.parametrize("preamble", ["", IGNORING_SIGTERM], ids=["default", "sigterm_ignored"])
def test_a_killed_worker_takes_its_paying_step_with_it(tmp_path, preamble):
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, preamble + STEP, str(tmp_path)], start_new_session=True
    )
    pid_file = tmp_path / "step.pid"
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        step = int(pid_file.read_text())
        assert _alive(step)
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(step) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(step), "the step outlived its run worker"
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
        if pid_file.exists() and _alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
