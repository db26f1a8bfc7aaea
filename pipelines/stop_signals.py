"""A stop signal (Ctrl-C, SIGTERM) stops ``spatial-build`` wherever it lands, and leaves no process of the build.

Inside a run Dagster replaces the SIGINT and SIGTERM handlers with its own: a signal that arrives while a
step computes ends the step, but one that arrives while Dagster sets up or closes a run outside a step is
recorded and then forgotten when the run ends, so the build would go on and report success. A
:class:`StopSignals` block therefore also points the signal module's *wakeup fd* at a pipe: the C-level
signal handler writes every signal's number there, whichever Python handler (ours or Dagster's) then runs.
:meth:`StopSignals.check`, called by the build's run loop at each of its :data:`CHECKPOINTS` (before and
after every run), raises :class:`KeyboardInterrupt` once a stop signal has arrived. Outside a run the
block's own handler raises it at once. A Ctrl-C in a terminal goes to every process of its process group;
the block keeps SIGINT blocked, which the processes it starts inherit (Dagster's log-tail watchers would each
print a traceback), and a relay thread takes it for the main thread.

:func:`end_processes_started_since` ends what a stopped build started (worker pools, multiprocessing's fork
server and resource tracker, Dagster's log tails), so that no process of the build outlives it.

Test seam: with :data:`SIGNAL_AT_ENV` set to ``CHECKPOINT`` or ``CHECKPOINT:SIGNAL`` (``run_ended:SIGINT``;
SIGTERM when no signal is named), the build sends itself that signal when it reaches that checkpoint the
first time, so a test stops it at every point between two runs deterministically.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, TypeAlias

import psutil

logger = logging.getLogger("spatial_build.stop")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop a build."""

CHECKPOINTS = ("wave_started", "run_starting", "run_ended", "wave_ended")
"""Where the run loop checks for a stop: a wave starts; a run is about to be launched; a run has returned
(a signal Dagster recorded during it is seen here); a wave is done."""

SIGNAL_AT_ENV = "SPATIAL_BUILD_SIGNAL_AT"
"""Test seam (see the module docstring): the checkpoint (and signal) at which a build signals itself."""

WAKE_SIGNAL = signal.SIGUSR2
"""Sent by the relay thread to the main thread, whose handler for it does nothing: it ends a wait in a system
call there, so that the handler of a SIGINT that another thread took runs at once."""
RELAY_POLL_S = 0.2
"""How often the SIGINT relay thread looks whether its block has ended."""
RELAY_WAIT_S = 5.0
"""How long the test seam waits for its signal to arrive."""
END_GRACE_S = 5.0
"""How long the processes a stopped build started get to end after SIGTERM before they are killed."""

_SignalHandler: TypeAlias = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None
"""What `signal.signal` takes and returns: a function, SIG_DFL/SIG_IGN, or None for a handler not set from Python."""

_ACTIVE_WAKEUP_FD: list[int] = []  # the pipe of the block in force, reset in a forked child


def _forget_wakeup_fd_in_child() -> None:
    # A forked child (a worker) must not write its own signals into the build's pipe.
    if _ACTIVE_WAKEUP_FD:
        signal.set_wakeup_fd(-1)
        _ACTIVE_WAKEUP_FD.clear()


os.register_at_fork(after_in_child=_forget_wakeup_fd_in_child)


def parse_signal_at(value: str | None) -> tuple[str, signal.Signals] | None:
    """The checkpoint and signal that :data:`SIGNAL_AT_ENV`'s ``value`` names, None when unset.

    >>> parse_signal_at("run_ended:SIGINT")
    ('run_ended', <Signals.SIGINT: 2>)
    >>> parse_signal_at("wave_started")
    ('wave_started', <Signals.SIGTERM: 15>)
    """
    if not value:
        return None
    point, _, name = value.partition(":")
    if point not in CHECKPOINTS:
        raise ValueError(
            f"{SIGNAL_AT_ENV} names no checkpoint of the build: {point!r} (one of {CHECKPOINTS})"
        )
    return point, signal.Signals[name or "SIGTERM"]


def _raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _note_only(signum: int, frame: FrameType | None) -> None:
    """A Python-level handler that does nothing: the C-level handler has written the signal to the wakeup fd."""


class StopSignals:
    """For the duration of a ``with`` block: SIGINT and SIGTERM raise :class:`KeyboardInterrupt`, and every stop
    signal is remembered even when Dagster's handlers take it (see the module docstring).

    SIGINT stays blocked in the main thread, whose mask the processes started from it inherit, so that a Ctrl-C
    in the terminal does not reach them; a relay thread takes it instead (the C-level handler then schedules the
    main thread's Python handler) and wakes the main thread from a system call with :data:`WAKE_SIGNAL`.
    """

    def __init__(self, signal_at: tuple[str, signal.Signals] | None = None) -> None:
        self.signal_at = signal_at
        self.received: signal.Signals | None = None
        self._pipe: tuple[int, int] | None = None
        self._previous_handlers: dict[int, _SignalHandler] = {}
        self._previous_wakeup_fd = -1
        self._previous_mask: set[int] | None = None
        self._relay: threading.Thread | None = None
        self._relay_done = threading.Event()
        self._reading = threading.Lock()

    def __enter__(self) -> StopSignals:
        read_end, write_end = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._pipe = (read_end, write_end)
        self._previous_wakeup_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
        _ACTIVE_WAKEUP_FD[:] = [write_end]
        for signum in STOP_SIGNALS:
            self._previous_handlers[signum] = signal.signal(signum, _raise_keyboard_interrupt)
        self._previous_handlers[WAKE_SIGNAL] = signal.signal(WAKE_SIGNAL, _note_only)
        self._previous_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        self._relay_done.clear()
        self._relay = threading.Thread(
            target=self._relay_sigint, args=(read_end,), name="spatial-build-sigint", daemon=True
        )
        self._relay.start()
        return self

    def _relay_sigint(self, read_end: int) -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # a thread that takes it
        main_thread = threading.main_thread().ident
        assert main_thread is not None  # the main thread is running: it entered the block
        while not self._relay_done.is_set():
            readable, _, _ = select.select([read_end], [], [], RELAY_POLL_S)
            if readable and signal.SIGINT in self._read():
                signal.pthread_kill(main_thread, WAKE_SIGNAL)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._relay is not None:
            self._relay_done.set()
            self._relay.join()
            self._relay = None
        if self._previous_mask is not None:
            while signal.sigtimedwait({signal.SIGINT}, 0) is not None:  # one that came after the relay ended
                self.received = self.received or signal.SIGINT
            signal.pthread_sigmask(signal.SIG_SETMASK, self._previous_mask)
            self._previous_mask = None
        for signum, handler in self._previous_handlers.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(self._previous_wakeup_fd)
        _ACTIVE_WAKEUP_FD.clear()
        if self._pipe is not None:
            self._read()
            for descriptor in self._pipe:
                os.close(descriptor)
            self._pipe = None

    def defer(self) -> None:
        """From now on in the block, a stop signal is only noted (:meth:`poll` sees it), not raised: the build
        ends what it does (its summary) whole."""
        for signum in STOP_SIGNALS:
            signal.signal(signum, _note_only)

    def _read(self) -> set[int]:
        """Read the signal numbers the wakeup fd has received; note the first stop signal among them."""
        numbers: set[int] = set()
        with self._reading:
            while self._pipe is not None:
                try:
                    read = os.read(self._pipe[0], 512)
                except BlockingIOError:
                    break
                if not read:
                    break
                numbers.update(read)
                stops = [signal.Signals(n) for n in read if n in STOP_SIGNALS]
                if stops and self.received is None:
                    self.received = stops[0]
        return numbers

    def poll(self) -> signal.Signals | None:
        """The first stop signal received since the block started, or None."""
        self._read()
        return self.received

    def check(self, checkpoint: str) -> None:
        """Raise :class:`KeyboardInterrupt` when a stop signal has arrived (the run loop calls this at each of
        :data:`CHECKPOINTS`); first send the test seam's signal when ``checkpoint`` is its."""
        if self.signal_at is not None and self.signal_at[0] == checkpoint:
            sent = self.signal_at[1]
            self.signal_at = None  # once
            logger.info("test seam: sending %s at %s", sent.name, checkpoint)
            os.kill(os.getpid(), sent)  # its handler raises here, in the main thread, once it has arrived
            deadline = time.monotonic() + RELAY_WAIT_S
            while self.poll() is None and time.monotonic() < deadline:
                time.sleep(0.001)
        if (received := self.poll()) is not None:
            raise KeyboardInterrupt(received.name)


def descendants() -> set[int]:
    """Pids of this process's descendants, now."""
    return {child.pid for child in psutil.Process().children(recursive=True)}


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_ended(processes: list[psutil.Process], seconds: float) -> list[psutil.Process]:
    """The processes still running after up to ``seconds``. Ended children are not reaped: their owners (a
    ``Popen``, multiprocessing's fork server record) reap them, and so learn that they ended."""
    deadline = time.monotonic() + seconds
    running = [process for process in processes if _running(process)]
    while running and time.monotonic() < deadline:
        time.sleep(0.05)
        running = [process for process in running if _running(process)]
    return running


def ignores_sigterm(pid: int) -> bool:
    """Whether process ``pid`` ignores SIGTERM (multiprocessing's resource tracker does), as ``/proc`` says.

    >>> ignores_sigterm(os.getpid()) == (signal.getsignal(signal.SIGTERM) is signal.SIG_IGN)
    True
    """
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:  # gone, or no /proc
        return False
    ignored = next((line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")), "0")
    return bool(int(ignored, 16) & (1 << (signal.SIGTERM - 1)))


def end_processes(pids: Iterable[int], grace_s: float = END_GRACE_S) -> list[int]:
    """Send SIGTERM to the processes ``pids``, then SIGKILL to those still running after ``grace_s`` and at once
    to those that ignore SIGTERM; returns the pids that had to be killed. Processes already gone are skipped."""
    processes: list[psutil.Process] = []
    ignoring: list[psutil.Process] = []
    for pid in pids:
        try:
            process = psutil.Process(pid)
            process.terminate()
            (ignoring if ignores_sigterm(pid) else processes).append(process)
        except psutil.NoSuchProcess:
            continue
    stubborn = ignoring + _wait_ended(processes, grace_s)
    for process in stubborn:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            continue
    _wait_ended(stubborn, grace_s)
    return [process.pid for process in stubborn]


def end_processes_started_since(before: set[int], grace_s: float = END_GRACE_S) -> list[int]:
    """End the descendants of this process that were not among ``before`` (see :func:`end_processes`); the
    pids that were ended."""
    started = descendants() - before
    if not started:
        return []
    names = {pid: _name(pid) for pid in started}
    killed = end_processes(started, grace_s)
    logger.info(
        "ended %d processes the build had started (%s)%s",
        len(started),
        ", ".join(sorted(names.values())),
        f"; killed, as they ignored SIGTERM or outlived {grace_s:.0f} s: {', '.join(names[pid] for pid in killed)}"
        if killed
        else "",
    )
    return sorted(started)


def _name(pid: int) -> str:
    try:
        return " ".join(psutil.Process(pid).cmdline()[:3])[-80:]
    except psutil.Error:
        return str(pid)
