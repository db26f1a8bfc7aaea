"""A stop signal stops ``spatial-build`` wherever it lands between two runs, and no process of the build outlives it.

The run loop (:class:`pipelines.cli.Build`) runs here with its launches recorded instead of executed, so every
point between two runs is reached deterministically: the test seam of :mod:`pipelines.stop_signals` sends the
signal at each checkpoint, and a launch that sends it while Dagster's own interrupt capture is in force stands
for a signal that lands in Dagster's set-up or close of a run (Dagster records it there, then forgets it).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import psutil
import pytest
from dagster._utils.interrupts import capture_interrupts  # what Dagster wraps a run in

from pipelines.automation import OBSERVE_RAW_FILES_JOB
from pipelines.cli import EXIT_INTERRUPTED, Build, build_waves, main
from pipelines.definitions import ALL_ASSETS
from pipelines.stop_signals import CHECKPOINTS, SIGNAL_AT_ENV, StopSignals, end_processes_started_since

SELECTION = "key:object_phrases or key:pseudo_gt_boxes"
"""Two waves: one unpartitioned run, then a range run over the 8 Grounding DINO shards."""
ARGS = argparse.Namespace(workers=None, scenes=None, views=None, seed=None, verbose=False)


@dataclass
class FakeResult:
    """What :meth:`Build.execute` reads of a run's result: ``failed`` maps failed steps to their errors."""

    run_id: str
    succeeded: list[str] = field(default_factory=list)
    failed: dict = field(default_factory=dict)
    all_events: list = field(default_factory=list)

    @property
    def success(self) -> bool:
        return not self.failed

    def get_step_failure_events(self) -> list:
        return [
            SimpleNamespace(step_key=step, step_failure_data=SimpleNamespace(error=error))
            for step, error in self.failed.items()
        ]

    def get_step_success_events(self) -> list:
        return [SimpleNamespace(step_key=step) for step in self.succeeded]


class RecordingBuild(Build):
    """The run loop with its launches recorded, not executed; ``during_run`` is called inside each launch, and
    ``result_for(job_name, run_id)`` (when given) makes its result."""

    def __init__(
        self, stop: StopSignals, during_run=None, result_for=None, storage_root: Path = Path()
    ) -> None:
        super().__init__(defs=None, instance=None, args=ARGS, tags={}, stop=stop, storage_root=storage_root)
        self.launched: list[str] = []
        self.during_run = during_run
        self.result_for = result_for or (lambda job_name, run_id: FakeResult(run_id))

    def launch(self, job_name: str, **kwargs) -> FakeResult:
        self.launched.append(job_name)
        if self.during_run is not None:
            self.during_run()
        return self.result_for(job_name, f"run-{len(self.launched)}")

    def observe_raw_files(self) -> None:
        self.ok = self.execute(OBSERVE_RAW_FILES_JOB, None, {}) and self.ok


def _waves():
    return build_waves(ALL_ASSETS, dg.AssetSelection.from_string(SELECTION))


# Runs launched before the stop, by where the signal lands: before the first wave, before its first run
# (observing the raw files), right after that run returns, after the first wave (observation and its run).
LAUNCHED_BEFORE_STOP = {"wave_started": 0, "run_starting": 0, "run_ended": 1, "wave_ended": 2}


def test_every_checkpoint_is_covered():
    assert set(LAUNCHED_BEFORE_STOP) == set(CHECKPOINTS)


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("checkpoint", CHECKPOINTS)
def test_a_signal_at_any_point_between_runs_stops_the_run_loop(checkpoint, stop_signal):
    before = signal.getsignal(signal.SIGTERM)  # what the test process had (another test may have set it)
    with StopSignals(signal_at=(checkpoint, stop_signal)) as stop:
        build = RecordingBuild(stop)
        with pytest.raises(KeyboardInterrupt):
            build.run_waves(_waves())
    assert stop.received == stop_signal
    assert len(build.launched) == LAUNCHED_BEFORE_STOP[checkpoint]
    assert signal.getsignal(signal.SIGTERM) is before  # the block gave back what it replaced


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_dagster_takes_during_a_run_stops_the_build_after_that_run(stop_signal):
    """Dagster's handlers replace the build's while a run is set up or closed; the signal is seen after it."""

    def signal_inside_dagsters_capture():
        if len(build.launched) == 2:  # the first wave's run, after the raw files were observed
            with capture_interrupts():
                os.kill(os.getpid(), stop_signal)
                while (
                    build.stop.poll() is None
                ):  # delivered here, to Dagster's handler, which only records it
                    time.sleep(0.005)

    with StopSignals() as stop:
        build = RecordingBuild(stop, during_run=signal_inside_dagsters_capture)
        with pytest.raises(KeyboardInterrupt):
            build.run_waves(_waves())
    assert build.launched == [OBSERVE_RAW_FILES_JOB, "datasets_job"]  # the shards' run never started
    assert stop.received == stop_signal


@pytest.mark.parametrize(
    ("checkpoint", "stop_signal"), [("run_ended", "SIGINT"), ("wave_started", "SIGTERM")]
)
def test_the_build_stopped_between_runs_prints_its_summary_and_exits_130(
    checkpoint, stop_signal, tmp_path, monkeypatch, capsys
):
    launched: list[str] = []

    def record(self, job_name, **kwargs):
        launched.append(job_name)
        return FakeResult(run_id=f"run-{len(launched)}")

    monkeypatch.setattr(Build, "launch", record)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))
    monkeypatch.setenv(SIGNAL_AT_ENV, f"{checkpoint}:{stop_signal}")
    status = main(["--storage-root", str(tmp_path / "data"), "--select", SELECTION])
    out = capsys.readouterr().out
    assert status == EXIT_INTERRUPTED
    assert "Parquet caches under" in out and out.strip().splitlines()[-1].startswith("Stopped after building")
    assert len(launched) == {"run_ended": 1, "wave_started": 0}[checkpoint]


def _running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


IGNORES_SIGTERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
POOL_WORKER = textwrap.dedent(
    """
    import multiprocessing, sys, time

    if __name__ == "__main__":
        worker = multiprocessing.get_context("forkserver").Process(target=time.sleep, args=(600,))
        worker.start()  # a worker forked by multiprocessing's fork server, as a step's pool has them
        sys.stdout.write("started\\n")
        sys.stdout.flush()
        time.sleep(600)
    """
)


def test_a_stopped_build_ends_every_process_it_started_and_only_those(tmp_path):
    """A process with a forkserver pool worker (the fork server and the worker below it), and a child that
    ignores SIGTERM (killed at once, as multiprocessing's resource tracker is) are ended; a process the caller had
    started before is left alone."""
    before_build = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    started: list[subprocess.Popen] = []
    try:
        before = {child.pid for child in psutil.Process().children(recursive=True)}
        script = tmp_path / "pool_worker.py"
        script.write_text(POOL_WORKER)
        started.append(subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True))
        assert started[0].stdout.readline() == "started\n"
        started.append(subprocess.Popen([sys.executable, "-c", IGNORES_SIGTERM]))
        time.sleep(0.5)  # the stubborn child has set its handler
        tree = {child.pid for child in psutil.Process().children(recursive=True)} - before
        assert len(tree) >= 4  # the pool's process, its fork server and worker, the stubborn child
        seconds = time.perf_counter()
        ended = end_processes_started_since(before, grace_s=60.0)
        seconds = time.perf_counter() - seconds
        assert set(ended) == tree and seconds < 30  # the child that ignores SIGTERM is killed without waiting
        assert not [pid for pid in tree if _running(pid)]
        assert before_build.poll() is None
    finally:
        for process in [before_build, *started]:
            process.kill()
            process.wait()


HOLDING_BUILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path

    import assets.grounding.assets as grounding
    from pipelines.cli import main

    def holding(*args, **kwargs):  # the object_phrases step, waiting while its log tails run
        Path(sys.argv[1]).write_text("holding")
        time.sleep(600)

    grounding.extract_object_phrases = holding
    raise SystemExit(main(sys.argv[2:]))
    """
)
"""``spatial-build`` (its ``main``) whose ``object_phrases`` step writes the file ``argv[1]`` and then waits."""
BUILD_TIMEOUT_S = 300


@pytest.mark.timeout(BUILD_TIMEOUT_S + 60)
def test_ctrl_c_in_a_step_stops_the_build_without_tracebacks_and_leaves_no_process(tmp_path):
    """Ctrl-C as a terminal sends it: SIGINT to the build's whole process group, while a step runs."""
    holding = tmp_path / "holding"
    command = [sys.executable, "-c", HOLDING_BUILD, str(holding), "--storage-root", str(tmp_path / "data")]
    build = subprocess.Popen(
        [*command, "--scenes", "1", "--views", "2", "--select", "+key:object_phrases"],
        env={**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home"), "HF_HUB_OFFLINE": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + BUILD_TIMEOUT_S
        while not holding.exists() and build.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert holding.exists(), build.communicate(timeout=10)[1][-3000:] if build.poll() is not None else ""
        processes = {child.pid for child in psutil.Process(build.pid).children(recursive=True)}
        signalled = time.monotonic()
        os.killpg(build.pid, signal.SIGINT)
        out, err = build.communicate(timeout=120)
        seconds = time.monotonic() - signalled
    finally:
        if build.poll() is None:
            os.killpg(build.pid, signal.SIGKILL)
    assert build.returncode == EXIT_INTERRUPTED, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert out.strip().splitlines()[-1].startswith("Stopped after building")
    assert processes  # Dagster's log tails and their watchers
    assert not [pid for pid in processes if _running(pid)]
    logging.getLogger(__name__).info(
        "Ctrl-C to exit: %.1f s; %d processes of the step", seconds, len(processes)
    )
