"""Partitioned assets that build many partitions in one run (``BackfillPolicy.single_run()``).

A partitioned asset body here is written for one partition (``body(partition_key)`` yields its
``Output`` objects and ``AssetCheckResult`` objects, exactly as a one-partition run does).
:func:`run_partitions` runs that body once per partition key of the run and, when the run covers
more than one key, folds the results into what Dagster expects of a range run:

- one ``Output`` per output whose value is ``{partition_key: table}`` (the IO manager writes each
  partition to its own file, and publishes the whole set together);
- each partition's own metadata attached to that partition's materialization
  (``context.add_asset_metadata(..., partition_key=...)``), so every partition shows its own row
  count, preview and figures, as in a one-partition run;
- metadata shared by every partition of the run: the entries every partition has with the same
  value (the contract version, the column schema, the backend), the totals across the run's
  partitions of every count (``total_<name>``), the number of partitions (``partitions_in_run``),
  and the figures of each partition side by side (``by_partition``);
- one result per asset check: passed when it passed for every partition, with the failing partitions
  named and each partition's check metadata.

A run of one partition (a one-partition launch, or the automation requesting a single key) yields
the body's events unchanged. A data version given by the body (``Output(data_version=...)``) is one
per output in Dagster's range runs: when the partitions of a range disagree, it is kept in each
partition's metadata as ``data_version_fingerprint`` instead.

Inputs: in a range run, the IO manager hands a partitioned upstream of the same partitioning to
the body as ``{partition_key: table}``; :func:`partition_input` picks one partition's table from
that (or returns a table unchanged).

Worker processes: the per-partition work of a range run can run in parallel, one partition per
worker process (:func:`partition_results`): the run submits every partition's pure function (plain,
picklable arguments in, plain values out) at once and the body emits each partition's outputs in
key order as its result arrives, so the outputs are those of the serial run, in the same order. The
pool is the process's own, shared by every run of the process (``spatial-build`` runs many in one
process, and starts the pool before the first one, so the workers import their modules while the
sources build); its workers come from a fork server, so they never inherit a running thread pool.
It has one worker per usable core, at most :data:`MAX_WORKERS` (:func:`configure_workers`, i.e.
``spatial-build --workers N``, changes that; 1 turns the pool off and every partition runs in the
run's own process, exactly as before). On 2 idle cores the pool cut the default build's graph time
from 91 s to 76 s (``benchmarks/bench_build.py``); on cores busy with other work it can cost more
than it saves, since a run's own bookkeeping (Dagster's events, the Parquet writes) stays in the
run's process. A run of one partition always runs it in its own process.

Prefetching: that bookkeeping leaves the workers idle unless they have work queued. A step that has
just received a partition's values can start the partition's next asset at once (:func:`prefetch`,
scoped to the run), and ``spatial-build`` queues work of a later run whenever a worker is free
(:func:`prefetch_in_background`). The step that needs the work takes the started call only when it
asks for the same function with arguments of equal value (:func:`same_arguments`), so prefetching
moves work earlier and never changes a result; what no step took is dropped (:func:`drop_prefetched`).
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib
import json
import logging
import multiprocessing
import os
import pickle
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from typing import Any

import dagster as dg
import polars as pl

logger = logging.getLogger(__name__)

PartitionBody = Callable[[str], Iterator[dg.Output | dg.AssetCheckResult]]
"""A one-partition asset body: the partition key in, the partition's outputs and check results out."""

PartitionedInput = Any
"""The annotation of a partitioned input of a range-aware asset: one table (``polars.DataFrame``), or
``{partition_key: table}`` in a range run. ``Any`` for Dagster, which cannot type-check a union."""

SINGLE_RUN = dg.BackfillPolicy.single_run()
"""The backfill policy of every partitioned asset: a backfill or a ``spatial-build`` wave is one run."""


def partition_input(value: pl.DataFrame | Mapping[str, pl.DataFrame], partition_key: str) -> pl.DataFrame:
    """One partition's table of an input: ``value[partition_key]`` for a range run's dict, else ``value``.

    >>> partition_input({"a": pl.DataFrame({"x": [1]}), "b": pl.DataFrame({"x": [2]})}, "b")["x"].to_list()
    [2]
    >>> partition_input(pl.DataFrame({"x": [3]}), "b")["x"].to_list()
    [3]
    """
    if isinstance(value, Mapping):
        if partition_key not in value:
            raise KeyError(f"the input holds no table for partition {partition_key!r}")
        return value[partition_key]
    return value


def _numeric(value: Any) -> float | int | None:
    raw = value.value if isinstance(value, dg.MetadataValue) else value
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        return None
    return raw


def figures_by_partition(
    metadata_by_partition: Mapping[str, Mapping[str, Any]],
) -> dict[str, dict[str, float]]:
    """The numeric metadata entries of each partition, ``{partition: {name: value}}``.

    >>> figures_by_partition({"a": {"rows": 2, "preview": "text", "ok": True}, "b": {"rows": 3}})
    {'a': {'rows': 2}, 'b': {'rows': 3}}
    """
    figures: dict[str, dict[str, float]] = {}
    for partition, metadata in metadata_by_partition.items():
        figures[partition] = {}
        for name, value in metadata.items():
            number = _numeric(value)
            if number is not None:
                figures[partition][name] = number
    return figures


def common_metadata(metadata_by_partition: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The entries that every partition has, with the same value in each.

    >>> common_metadata({"a": {"contract_version": "1", "rows": 2}, "b": {"contract_version": "1", "rows": 3}})
    {'contract_version': '1'}
    """
    first, *others = metadata_by_partition.values()
    return {
        name: value
        for name, value in first.items()
        if all(name in other and other[name] == value for other in others)
    }


def totals_metadata(metadata_by_partition: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Metadata shared by every partition of a range run: totals, partition count, figures side by side.

    A figure is summed when it is a count or a sum (an integer in every partition); a float such as
    a ratio or a mean is shown per partition only (its sum means nothing).

    >>> totals = totals_metadata({"a": {"dagster/row_count": 2, "share": 0.5}, "b": {"dagster/row_count": 3}})
    >>> totals["total_rows"], totals["partitions_in_run"]
    (5, 2)
    >>> "total_share" in totals
    False
    """
    figures = figures_by_partition(metadata_by_partition)
    names = sorted({name for values in figures.values() for name in values})
    totals: dict[str, Any] = {"partitions_in_run": len(metadata_by_partition)}
    for name in names:
        values = [values[name] for values in figures.values() if name in values]
        if all(isinstance(value, int) for value in values):
            label = "rows" if name == "dagster/row_count" else name
            totals[f"total_{label}"] = sum(values)
    totals["by_partition"] = dg.MetadataValue.json(figures)
    texts = [
        {name: value for name, value in metadata.items() if isinstance(value, str)}
        for metadata in metadata_by_partition.values()
    ]
    for name in sorted(set.intersection(*(set(text) for text in texts)) if texts else set()):
        if len({text[name] for text in texts}) == 1:  # the same in every partition (e.g. contract_version)
            totals.setdefault(name, texts[0][name])
    return totals


def _combined_check(results: Mapping[str, dg.AssetCheckResult]) -> dg.AssetCheckResult:
    """One check result for a range run: passed when every partition passed; the failures named."""
    first = next(iter(results.values()))
    failed = sorted(partition for partition, result in results.items() if not result.passed)
    severities = [result.severity for partition, result in results.items() if not result.passed]
    per_partition = {
        partition: {
            name: (value.value if isinstance(value, dg.MetadataValue) else value)
            for name, value in (result.metadata or {}).items()
        }
        for partition, result in results.items()
    }
    metadata: dict[str, Any] = {
        "partitions_checked": len(results),
        "partitions_failed": dg.MetadataValue.json(failed),
        "by_partition": dg.MetadataValue.json(json.loads(json.dumps(per_partition, default=str))),
    }
    return dg.AssetCheckResult(
        asset_key=first.asset_key,
        check_name=first.check_name,
        passed=not failed,
        severity=dg.AssetCheckSeverity.ERROR
        if dg.AssetCheckSeverity.ERROR in severities
        else (severities[0] if severities else first.severity),
        metadata=metadata,
    )


def run_partitions(
    context: dg.AssetExecutionContext, body: PartitionBody
) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """Run ``body`` for every partition key of the run and yield the run's outputs and checks.

    See the module docstring for what a range run yields. A partition whose body raises fails the
    whole run (``spatial-build`` then builds the wave's partitions one run each, so that one bad
    partition does not hold back the others).
    """
    keys = list(context.partition_keys)
    if len(keys) == 1:
        yield from body(keys[0])
        return
    outputs: dict[str, dict[str, dg.Output]] = {}
    checks: dict[tuple[dg.AssetKey, str], dict[str, dg.AssetCheckResult]] = {}
    order: list[tuple[str, Any]] = []  # the body's event order (outputs before their checks)
    for key in keys:
        for event in body(key):
            if isinstance(event, dg.Output):
                slot: tuple[str, Any] = ("output", event.output_name)
                outputs.setdefault(event.output_name, {})[key] = event
            elif isinstance(event, dg.AssetCheckResult):
                slot = ("check", (event.asset_key, event.check_name))
                checks.setdefault((event.asset_key, event.check_name), {})[key] = event
            else:
                raise TypeError(
                    f"a partition body yielded {type(event).__name__}, not Output or AssetCheckResult"
                )
            if slot not in order:
                order.append(slot)
    for kind, name in order:
        if kind == "check":
            yield _combined_check(checks[name])
            continue
        by_key = outputs[name]
        asset_key = context.asset_key_for_output(name)
        metadata_by_key = {key: output.metadata for key, output in by_key.items()}
        versions = {output.data_version for output in by_key.values()}
        shared_version = versions.pop() if len(versions) == 1 else None
        for key, output in by_key.items():
            metadata = dict(output.metadata)
            if output.data_version is not None and shared_version is None:
                metadata["data_version_fingerprint"] = output.data_version.value
            context.add_asset_metadata(metadata, asset_key=asset_key, partition_key=key)
        yield dg.Output(
            {key: output.value for key, output in by_key.items()},
            output_name=name,
            metadata={**common_metadata(metadata_by_key), **totals_metadata(metadata_by_key)},
            data_version=shared_version,
        )


WORKER_MODULES = ("assets.dge.assets", "assets.stvqa.work")
"""Modules the fork server imports once, so that every worker starts with them loaded."""

MAX_WORKERS = 8
"""Most worker processes a pool starts by default (each holds open3d, polars and the task's modules)."""

_workers: int | None = None
_pool: ProcessPoolExecutor | None = None
_pool_lock = threading.Lock()


def configure_workers(workers: int | None) -> None:
    """Set the size of the process's worker pool (None: one per usable core, at most :data:`MAX_WORKERS`;
    1: no pool, every partition runs in the run's own process). Call before the pool starts."""
    global _workers
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    _workers = workers


def worker_count() -> int:
    """How many worker processes the pool has (see :func:`configure_workers`)."""
    return _workers if _workers is not None else min(usable_cpus(), MAX_WORKERS)


def usable_cpus() -> int:
    """The cores this process may run on (its CPU affinity where the platform tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _import_modules(modules: Sequence[str]) -> None:
    for module in modules:
        importlib.import_module(module)


def worker_pool() -> ProcessPoolExecutor | None:
    """The process's pool of worker processes, started on first use; None when :func:`worker_count` is 1.

    The first call waits until the fork server has imported :data:`WORKER_MODULES` (seconds), unless
    :func:`start_workers` started it in the background before.
    """
    global _pool
    with _pool_lock:
        if _pool is None and worker_count() > 1:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(list(WORKER_MODULES))
            pool = ProcessPoolExecutor(max_workers=worker_count(), mp_context=context)
            for _ in range(worker_count()):  # start every worker now (the fork server imports the modules)
                pool.submit(_import_modules, WORKER_MODULES)
            atexit.register(pool.shutdown, wait=True, cancel_futures=True)
            logger.info("started a pool of %d worker processes", worker_count())
            _pool = pool
        return _pool


def start_workers() -> threading.Thread:
    """Start the worker pool in a background thread (it mostly waits for the fork server's imports, so the
    caller goes on working); :func:`worker_pool` waits for it when called before it is ready."""
    thread = threading.Thread(target=worker_pool, name="start-worker-pool", daemon=True)
    thread.start()
    return thread


def _discard_broken_pool() -> None:
    global _pool
    with _pool_lock:
        if _pool is not None:
            _pool.shutdown(wait=False, cancel_futures=True)
            _pool = None


def partition_events(body: Callable[..., Iterable[dg.Output | dg.AssetCheckResult]], *arguments: Any) -> list:
    """``body(*arguments)``'s events as :func:`portable_events`: what a worker sends back for one partition.

    ``body`` is a one-partition body of plain arguments (a module-level function, so that it pickles)."""
    return portable_events(body(*arguments))


BACKGROUND = "background"
"""The scope of work queued by :func:`prefetch_in_background` (any later run may take it)."""


@dataclasses.dataclass
class _Prefetch:
    """A call started (or queued) before the step that needs it: its scope (a run id or
    :data:`BACKGROUND`), the call, and its future (None while it waits for a free worker)."""

    scope: str
    function: Callable[..., Any]
    arguments: tuple
    future: Future | None = None


_prefetched: list[_Prefetch] = []
_prefetched_run: str | None = None
_state = threading.Condition(threading.RLock())  # guards the prefetches and the count of busy workers
_outstanding = 0  # calls submitted through _submit and not finished
_feeder: threading.Thread | None = None


def _finished(_: Future) -> None:
    global _outstanding
    with _state:
        _outstanding -= 1
        _state.notify_all()


def _submit(pool: ProcessPoolExecutor, function: Callable[..., Any], *arguments: Any) -> Future:
    """``pool.submit``, counted, so that background work goes in only when a worker is free."""
    global _outstanding
    with _state:
        _outstanding += 1
    try:
        future = pool.submit(function, *arguments)
    except BaseException:
        _finished(Future())
        raise
    future.add_done_callback(_finished)
    return future


def same_arguments(first: Any, second: Any) -> bool:
    """Whether two call arguments hold the same values: tables by value (schema and every value),
    tuples and dicts item by item (dict keys in the same order), anything else by its pickled bytes
    (same types and values).

    Two tables with the same values can differ in their memory layout (a table read back from Parquet
    is laid out differently from the one written, and pickles differently), hence the comparison by
    value.

    >>> same_arguments((1, {"a": pl.DataFrame({"x": [1.5]})}), (1, {"a": pl.DataFrame({"x": [1.5]})}))
    True
    >>> same_arguments((1, [2.0]), (1, [2]))  # 2.0 == 2, but a float is not an int
    False
    >>> same_arguments({"a": 1, "b": 2}, {"b": 2, "a": 1})
    False
    """
    if isinstance(first, pl.DataFrame) or isinstance(second, pl.DataFrame):
        return (
            isinstance(first, pl.DataFrame)
            and isinstance(second, pl.DataFrame)
            and first.schema == second.schema
            and first.equals(second)
        )
    if type(first) is not type(second):
        return False
    if isinstance(first, tuple):
        return len(first) == len(second) and all(map(same_arguments, first, second))
    if isinstance(first, dict):
        return list(first) == list(second) and all(same_arguments(first[k], second[k]) for k in first)
    return pickle.dumps(first, protocol=pickle.HIGHEST_PROTOCOL) == pickle.dumps(
        second, protocol=pickle.HIGHEST_PROTOCOL
    )


def prefetch(run_id: str, function: Callable[..., Any], arguments: tuple) -> Future | None:
    """Start ``function(*arguments)`` in the worker pool now, for a later step of run ``run_id``.

    A step that knows what a later step of its run will compute (the next asset of the same
    partition, from the values it has just produced) hands that work to the pool early, so the
    workers compute it while this process writes the step's outputs and records its events. The
    later step takes the result only when it asks for the same call: the same function, and
    arguments that hold the same values (:func:`same_arguments`; :func:`partition_results` with
    ``run_id``). Any difference (other settings, an input read back differently) and the step
    computes its own, so a prefetch changes no result. Prefetches of an earlier run are dropped
    (cancelled where not started) when a new run prefetches. Returns the future, or None without a pool.
    """
    global _prefetched_run
    pool = worker_pool()
    if pool is None:
        return None
    with _state:
        if _prefetched_run != run_id:
            for stale in [entry for entry in _prefetched if entry.scope != BACKGROUND]:
                _prefetched.remove(stale)
                if stale.future is not None:
                    stale.future.cancel()
            _prefetched_run = run_id
        entry = _Prefetch(run_id, function, arguments, _submit(pool, function, *arguments))
        _prefetched.append(entry)
        return entry.future


def prefetch_in_background(function: Callable[..., Any], arguments: tuple) -> bool:
    """Queue ``function(*arguments)`` for the worker pool, to start whenever a worker is free.

    For the work of a later run that does not depend on the runs before it (``spatial-build``
    queues the DGE scans while the Grounding DINO and STVQA shards are built, whose runs keep this
    process busy and leave the workers mostly idle). A call goes to the pool only while fewer calls
    than workers are running there, so the runs' own calls wait behind at most one background call
    per worker. Any later run takes the result (:func:`partition_results` with a ``run_id``) on the
    terms of :func:`prefetch`; a call still queued when a run asks for it is submitted by that run.
    :func:`drop_prefetched` drops what no run took. Returns False without a pool (nothing queued).
    """
    global _feeder
    if worker_count() < 2:
        return False
    with _state:
        _prefetched.append(_Prefetch(BACKGROUND, function, arguments))
        if _feeder is None or not _feeder.is_alive():
            _feeder = threading.Thread(target=_feed_background, name="prefetch-feeder", daemon=True)
            _feeder.start()
        _state.notify_all()
    return True


def _feed_background() -> None:
    """Submit queued background calls while fewer calls than workers are running (a daemon thread)."""
    while True:
        pool = worker_pool()  # waits for a pool still starting
        if pool is None:
            return
        with _state:
            while True:
                waiting = [entry for entry in _prefetched if entry.future is None]
                if not waiting:
                    return  # a later prefetch_in_background starts a new feeder
                if _outstanding < worker_count():
                    break
                _state.wait()
            entry = waiting[0]
            entry.future = _submit(pool, entry.function, *entry.arguments)


def drop_prefetched() -> int:
    """Drop every prefetched or queued call that no run took (cancelled where not started); how many."""
    with _state:
        dropped = len(_prefetched)
        for entry in _prefetched:
            if entry.future is not None:
                entry.future.cancel()
        _prefetched.clear()
        return dropped


def _take_prefetched(run_id: str, function: Callable[..., Any], arguments: tuple) -> Future | None:
    """The future of a call prefetched for this run (or in the background) with the same function and
    arguments, removed from the prefetches; None when there is none or it has not started yet (then
    the caller submits it)."""
    with _state:
        for entry in _prefetched:
            if (
                entry.scope in (run_id, BACKGROUND)
                and entry.function is function
                and same_arguments(entry.arguments, arguments)
            ):
                _prefetched.remove(entry)
                return entry.future
    return None


@contextmanager
def partition_results(
    function: Callable[..., Any],
    arguments: Mapping[str, tuple],
    parallel: bool = True,
    run_id: str | None = None,
) -> Iterator[Callable[[str], Any]]:
    """``function(*arguments[key])`` for every partition key of a run, for the duration of the block.

    Yields ``result(key)``. With a worker pool and more than one key, every key is submitted to the
    pool when the block starts, and ``result`` waits for the one asked (an exception raised by the
    function is raised again here, as the same class); without, ``result`` calls the function in this
    process when asked. ``function`` must be a module-level function and its arguments and result
    picklable. Keys not asked for before the block ends (the run failed first) are cancelled.
    ``parallel=False`` keeps every key in this process (work that holds a client of a paid service).
    With ``run_id``, a call that an earlier step of the run started with :func:`prefetch` (same
    function, same arguments) is taken instead of submitted again.
    """
    pool = worker_pool() if parallel and len(arguments) > 1 else None
    if pool is None:
        yield lambda key: function(*arguments[key])
        return
    futures: dict[str, Future] = {}
    prefetched = 0
    for key, values in arguments.items():
        taken = _take_prefetched(run_id, function, values) if run_id is not None else None
        prefetched += taken is not None
        futures[key] = taken if taken is not None else _submit(pool, function, *values)
    if run_id is not None:
        logger.info("%d of %d partitions started early (prefetched)", prefetched, len(arguments))

    def result(key: str) -> Any:
        future = futures.pop(key, None)
        try:
            return (future or _submit(pool, function, *arguments[key])).result()
        except BrokenProcessPool:
            _discard_broken_pool()  # a worker died (killed, out of memory): the next run starts a new pool
            raise

    try:
        yield result
    finally:
        for future in futures.values():
            future.cancel()


PortableEvent = tuple[str, dict[str, Any]]
"""An ``Output`` or ``AssetCheckResult`` as picklable values (a check result does not pickle)."""


def portable_events(events: Iterable[dg.Output | dg.AssetCheckResult]) -> list[PortableEvent]:
    """A partition body's events as picklable values, for :func:`restore_events` in another process.

    >>> events = [dg.Output(1, output_name="t"), dg.AssetCheckResult(asset_key="t", check_name="c", passed=True)]
    >>> [type(event).__name__ for event in restore_events(portable_events(events))]
    ['Output', 'AssetCheckResult']
    """
    portable: list[PortableEvent] = []
    for event in events:
        if isinstance(event, dg.Output):
            portable.append(
                (
                    "output",
                    {
                        "value": event.value,
                        "output_name": event.output_name,
                        "metadata": dict(event.metadata),
                        "data_version": event.data_version,
                    },
                )
            )
        elif isinstance(event, dg.AssetCheckResult):
            portable.append(("check", event._asdict()))
        else:
            raise TypeError(
                f"a partition body yielded {type(event).__name__}, not Output or AssetCheckResult"
            )
    return portable


def restore_events(portable: Iterable[PortableEvent]) -> Iterator[dg.Output | dg.AssetCheckResult]:
    """The events that :func:`portable_events` turned into values."""
    for kind, fields in portable:
        if kind == "output":
            yield dg.Output(**fields)
        else:
            yield dg.AssetCheckResult(**fields)
