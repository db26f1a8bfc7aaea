"""``spatial-build``: materialise the whole asset graph in one command, then summarise the caches.

It observes the raw folders (new scan folders become ``scenes`` partitions), then runs the named jobs
in waves (:func:`build_waves`: a run cannot mix partitions definitions): each partitioned family is one
run over the range of its partitions, as a single-run backfill launches it (:func:`partition_range_tags`),
and a failed range is built again one run per partition so the failures are named. Ctrl-C or SIGTERM,
wherever it lands, ends the run in progress, starts no other, ends every process the build started and
prints the summary (exit status 130; :mod:`pipelines.stop_signals`). A failed step is one sentence on the
console, its stack trace in the build's log file (:mod:`pipelines.build_log`). Runs go to the
instance of ``$DAGSTER_HOME`` (its ``dagster.yaml`` decides the storage), else a temporary one, tagged
``spatial/launched_by``, ``spatial/selection``, ``spatial/build`` and the build's process. See
``pipelines/README.md``, "How ``spatial-build`` runs the graph".

Before it runs anything, a build gives back what killed builds left (:mod:`pipelines.dead_builds`); builds
that start together on a new ``$DAGSTER_HOME`` create its instance one at a time (:func:`open_instance`). When
``$DAGSTER_HOME`` is full or not writable, or the disk of the storage root is full, it stops with one
sentence and the summary, exit status 74, without building partitions one run each
(:mod:`pipelines.dagster_home`).

Usage::

    spatial-build                       # the built-in sample world, offline backends
    spatial-build --storage-root /data/spatial --scenes 100
"""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import sqlite3
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import polars as pl
import sqlalchemy.exc

from assets.tables import EMPTY_REASON_KEY
from pipelines.build_log import dagster_logger, default_log_file, failure_sentences, open_log_file
from pipelines.dagster_home import (
    DagsterHomeUnwritable,
    StorageRootFull,
    check_dagster_home,
    check_storage_root,
)
from pipelines.dead_builds import (
    BUILD_TAG,
    LAUNCHED_BY,
    LAUNCHED_BY_TAG,
    build_process_tags,
    reclaim_dead_builds,
)
from pipelines.run_tags import PARTITION_RANGE_END_TAG, PARTITION_RANGE_START_TAG
from pipelines.stop_signals import (
    SIGNAL_AT_ENV,
    StopSignals,
    descendants,
    end_processes_started_since,
    parse_signal_at,
)
from pipelines.unrun_checks import failure_reason, report_standing_checks

logger = logging.getLogger("spatial_build")

EXIT_INTERRUPTED = 130
"""Exit status of a build stopped by Ctrl-C or SIGTERM (128 + SIGINT, as a shell reports it)."""
EXIT_DAGSTER_HOME_UNWRITABLE = 74
"""Exit status of a build stopped because ``$DAGSTER_HOME`` is full or not writable (EX_IOERR of sysexits.h)."""
EXIT_STORAGE_ROOT_FULL = EXIT_DAGSTER_HOME_UNWRITABLE
"""Exit status of a build stopped because the disk of the storage root is full (EX_IOERR too)."""
RUN_LOGGER = "console"
"""Name of the build's logger in its runs (:func:`pipelines.build_log.dagster_logger`), in place of Dagster's."""
INSTANCE_LOCK_FILE = ".spatial-build-instance.lock"
"""File in ``$DAGSTER_HOME`` that builds lock while they create (or open) its instance."""


def make_parser() -> argparse.ArgumentParser:
    """Command-line flags of ``spatial-build``."""
    parser = argparse.ArgumentParser(
        prog="spatial-build",
        description=__doc__.split("\n\n")[0],
        epilog="Exit status: 0 built, 1 a run failed, 130 stopped by Ctrl-C or SIGTERM, 74 DAGSTER_HOME is "
        "full or not writable or the storage root's disk is full.",
    )
    parser.add_argument(
        "--storage-root",
        default=None,
        help="Where the Parquet caches go (default: $SPATIAL_DATA_ROOT, $DAGSTER_HOME/spatial_data or ./data).",
    )
    parser.add_argument(
        "--scenes",
        type=int,
        default=None,
        help="Sample world: number of ScanNet-layout scenes (default 12; one ARKitScenes video and one ScanNet++ "
        "scene are written besides).",
    )
    parser.add_argument("--views", type=int, default=None, help="Sample world: views per scene (default 6).")
    parser.add_argument("--seed", type=int, default=None, help="Sample world: seed (default 0).")
    parser.add_argument(
        "--select",
        default="*",
        help="Dagster asset selection string limiting what is built (default: everything).",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="Worker processes per step for the partitions of a range run (default: one per core, at most 8; "
        "1: every partition in the run's own process).",
    )
    parser.add_argument(
        "--estimate-cost",
        action="store_true",
        help="Print the estimated tokens and dollars of every paid stage (its uncached requests, from the "
        "materialised inputs read one shard at a time: the first round, what later rounds ask at most, and the "
        "upper bound a budget is checked against) and exit without calling a model.",
    )
    parser.add_argument("--quiet", action="store_true", help="Only warnings, errors and the final summary.")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="Also print Dagster's event log of every run, the stack traces of failed steps included.",
    )
    parser.add_argument(
        "--log-file",
        default=None,
        help="The build's log file: its lines and every run's event log with stack traces (default: "
        "$DAGSTER_HOME/spatial-build-logs/spatial-build-<build>.log, else in the temporary folder).",
    )
    return parser


def partition_range_tags(first: str, last: str) -> dict[str, str]:
    """The run tags that make a run cover the partitions ``first`` to ``last`` (``execute_in_process`` takes no
    range): those of a single-run backfill and ``dagster asset materialize --partition-range``; pinned by
    ``tests/pipelines/test_range_runs.py``."""
    return {PARTITION_RANGE_START_TAG: first, PARTITION_RANGE_END_TAG: last}


def open_instance() -> dg.DagsterInstance:
    """The instance of ``$DAGSTER_HOME`` (made if missing), else a temporary one.

    Creating an instance creates and stamps its storage's tables, which two processes cannot do at once (a
    SQLite ``alembic_version`` row inserted twice): builds started together hold an exclusive lock on
    :data:`INSTANCE_LOCK_FILE` while they open it and touch its storages, so the others wait for the first.
    """
    if not os.environ.get("DAGSTER_HOME"):
        return dg.DagsterInstance.ephemeral()
    home = Path(os.environ["DAGSTER_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    with (home / INSTANCE_LOCK_FILE).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        instance = dg.DagsterInstance.get()
        for storage in ("run_storage", "event_log_storage", "schedule_storage"):
            getattr(instance, storage)  # created lazily: create them under the lock
        return instance


def _run_config(args: argparse.Namespace, with_sample_world: bool) -> dict:
    config: dict = {}
    if args.workers is not None:
        config["resources"] = {"workers": {"config": {"max_workers": args.workers}}}
    sample = {
        k: v
        for k, v in {"num_scenes": args.scenes, "views_per_scene": args.views, "seed": args.seed}.items()
        if v is not None
    }
    if sample and with_sample_world:
        config["ops"] = {"sample_world_asset": {"config": sample}}
    return config


def _upstream_nodes(node: dg.AssetsDefinition, owner: dict) -> set[int]:
    upstream = {dep for deps in node.asset_deps.values() for dep in deps}
    return {id(owner[key]) for key in upstream if key in owner and owner[key] is not node}


def build_waves(
    all_assets: Sequence[dg.AssetsDefinition],
    selection: dg.AssetSelection,
    alone: frozenset[str] = frozenset({"sample_world"}),
) -> list[list[dg.AssetsDefinition]]:
    """Order the selected asset definitions into waves (see the module docstring), as few as the graph allows.

    Each wave is either a list of unpartitioned definitions, built in one run, or a list of
    partitioned definitions sharing one partitions definition, built as one range run. Partitioned
    waves go first whenever one is ready, so that the unpartitioned assets that wait for them are built
    together afterwards; an unpartitioned wave takes every unpartitioned definition whose inputs are
    built before it or inside it. A definition holding a key of ``alone`` (the sample world, which the
    raw files are observed after) is a wave of its own.
    """
    selected_keys = selection.resolve(all_assets)
    owner = {key: node for node in all_assets for key in node.keys}
    remaining = [node for node in all_assets if set(node.keys) & selected_keys]
    waves: list[list[dg.AssetsDefinition]] = []

    def is_alone(node: dg.AssetsDefinition) -> bool:
        return any(key.to_user_string() in alone for key in node.keys)

    while remaining:
        remaining_ids = {id(node) for node in remaining}
        ready = [n for n in remaining if not (_upstream_nodes(n, owner) & remaining_ids)]
        if not ready:
            raise RuntimeError(
                "the asset graph has a cycle among: " + ", ".join(str(n.key) for n in remaining)
            )
        partitioned = [n for n in ready if n.partitions_def is not None]
        if any(is_alone(n) for n in ready):
            wave = [next(n for n in ready if is_alone(n))]
        else:
            partitions_def = partitioned[0].partitions_def if partitioned else None
            wave = [n for n in ready if n.partitions_def == partitions_def and not is_alone(n)]
            grown = True
            while grown:  # add what depends only on the wave and the waves before it
                wave_ids = {id(n) for n in wave}
                extra = [
                    n
                    for n in remaining
                    if id(n) not in wave_ids
                    and not is_alone(n)
                    and n.partitions_def == partitions_def
                    and _upstream_nodes(n, owner) & remaining_ids <= wave_ids
                ]
                wave.extend(extra)
                grown = bool(extra)
        waves.append(wave)
        remaining = [n for n in remaining if all(n is not w for w in wave)]
    return waves


def _interrupted(result: dg.ExecuteInProcessResult) -> bool:
    """Whether Dagster ended the run because of Ctrl-C or SIGTERM (it handles the signal inside a run)."""
    return any(
        event.step_failure_data.error is not None
        and event.step_failure_data.error.cls_name == "DagsterExecutionInterruptedError"
        for event in result.get_step_failure_events()
    )


@dataclass
class Build:
    """One ``spatial-build``: what it launches runs with, and what it has built so far."""

    defs: dg.Definitions
    instance: dg.DagsterInstance
    args: argparse.Namespace
    tags: dict[str, str]
    storage_root: Path = field(default_factory=Path)
    stop: StopSignals = field(default_factory=StopSignals)
    log_file: Path | None = None
    run_logger: dg.LoggerDefinition | None = None
    ok: bool = True
    unpartitioned_built: int = 0
    unpartitioned_failed: list[str] = field(default_factory=list)
    partitions_ok: int = 0
    sample_world_seconds: float = 0.0
    failed_partitions: list[str] = field(default_factory=list)
    succeeded_steps: set[str | None] = field(default_factory=set)
    """The steps that succeeded in the latest run (Dagster types an event's step key as optional)."""

    def launch(self, job_name: str, **kwargs) -> dg.ExecuteInProcessResult:
        """Execute ``job_name`` in this process (keyword arguments: those of ``execute_in_process``), its events
        logged by :attr:`run_logger`."""
        job = self.defs.resolve_job_def(job_name)
        if self.run_logger is not None:
            job = job.with_logger_defs({RUN_LOGGER: self.run_logger})
            kwargs["run_config"] = {**kwargs.get("run_config", {}), "loggers": {RUN_LOGGER: {}}}
        return job.execute_in_process(instance=self.instance, raise_on_error=False, **kwargs)

    def execute(
        self,
        job_name: str,
        keys: Sequence[dg.AssetKey] | None,
        run_config: dict,
        partition_key: str | None = None,
        partition_range: tuple[str, str] | None = None,
        log_failure: bool = True,
    ) -> bool:
        """Run ``job_name`` (restricted to ``keys`` when given) for one partition, a range or none.

        Says each failed step in one sentence (unless ``log_failure`` is False); True on success. Raises
        KeyboardInterrupt when a stop signal arrived before or during the run (:mod:`pipelines.stop_signals`),
        :class:`DagsterHomeUnwritable` when a step failed because ``$DAGSTER_HOME`` is full or not writable and
        :class:`StorageRootFull` when it failed because the storage root's disk is full.
        """
        tags = dict(self.tags)
        if partition_range is not None:
            tags.update(partition_range_tags(*partition_range))
        self.stop.check("run_starting")
        result = self.launch(
            job_name,
            run_config=run_config,
            partition_key=partition_key,
            asset_selection=list(keys) if keys is not None else None,
            tags=tags,
        )
        self.stop.check("run_ended")  # also a signal that Dagster took during the run and forgot
        self.succeeded_steps = {event.step_key for event in result.get_step_success_events()}
        if _interrupted(result):
            raise KeyboardInterrupt
        failures = [
            (event.step_key, event.step_failure_data.error) for event in result.get_step_failure_events()
        ]
        if not failures and not result.success:  # the run failed outside its steps
            failures = [
                ("(run)", event.job_failure_data.error if event.event_specific_data else None)
                for event in result.all_events
                if event.event_type == dg.DagsterEventType.RUN_FAILURE
            ]
        for _, error in failures:
            if full := check_storage_root(error, self.storage_root):
                raise full
            if unwritable := check_dagster_home(error):
                raise unwritable
        if not result.success:
            failed_steps = sorted({step for step, _ in failures if step and step != "(run)"})
            report_standing_checks(self.instance, result.run_id, failure_reason(failed_steps))
        if not result.success and log_failure:
            for sentence in failure_sentences(
                result.run_id, job_name, failures, partition_key, self.log_file
            ):
                logger.error(sentence)
        return result.success

    def partitions(self, job_name: str, keys: Sequence[dg.AssetKey], partition_keys: Sequence[str]) -> int:
        """Build ``partition_keys`` of a wave as one range run, or (when that fails) one run per partition;
        returns the number of runs. The partitions not built when a full disk stops the build count as failed."""
        if not partition_keys:
            return 0
        run_config = _run_config(self.args, False)
        span = (partition_keys[0], partition_keys[-1])
        done: set[str] = set()
        try:
            if self.execute(job_name, keys, run_config, partition_range=span, log_failure=False):
                self.partitions_ok += len(partition_keys)
                return 1
            logger.warning(
                "%s: the run of partitions %s to %s failed; building them one run each", job_name, *span
            )
            for key in partition_keys:
                if self.execute(job_name, keys, run_config, partition_key=key):
                    self.partitions_ok += 1
                else:
                    self.failed_partitions.append(key)
                done.add(key)
        except (DagsterHomeUnwritable, StorageRootFull):
            self.failed_partitions.extend(key for key in partition_keys if key not in done)
            raise
        return 1 + len(partition_keys)

    def observe_raw_files(self) -> None:
        """Add every scan folder as a ``scenes`` partition, then record the raw folders' content versions."""
        from assets.partitions import SCENES_PARTITIONS_NAME
        from assets.raw_files import scan_folders
        from pipelines.automation import OBSERVE_RAW_FILES_JOB

        resources = self.defs.resources
        assert resources is not None  # build_definitions gives the build its resources
        scenes = scan_folders(resources["sources"], resources["storage"])
        for _ in range(3):  # a concurrent build may add some of them first: then read them again
            known = set(self.instance.get_dynamic_partitions(SCENES_PARTITIONS_NAME))
            try:
                self.instance.add_dynamic_partitions(
                    SCENES_PARTITIONS_NAME, [s for s in scenes if s not in known]
                )
                break
            except sqlalchemy.exc.IntegrityError:
                continue
        self.ok = self.execute(OBSERVE_RAW_FILES_JOB, None, _run_config(self.args, False)) and self.ok

    def unpartitioned(
        self, job_name: str, wave: Sequence[dg.AssetsDefinition], is_sample_world: bool
    ) -> bool:
        """Build an unpartitioned wave in one run; a definition whose step did not succeed (it failed, was skipped
        after a failure, or a full disk stopped the build) counts as failed."""
        keys = [key for node in wave for key in node.keys]
        names = [node.node_def.name for node in wave]
        self.succeeded_steps = set()
        try:
            success = self.execute(job_name, keys, _run_config(self.args, is_sample_world))
        except (DagsterHomeUnwritable, StorageRootFull):
            self._count(names, success=False)
            raise
        self._count(names, success)
        self.ok = success and self.ok
        return success

    def _count(self, names: Sequence[str], success: bool) -> None:
        built = [name for name in names if success or name in self.succeeded_steps]
        self.unpartitioned_built += len(built)
        self.unpartitioned_failed.extend(name for name in names if name not in built)

    def run_waves(self, waves: Sequence[Sequence[dg.AssetsDefinition]]) -> None:
        """Run the waves in order, a line per wave; a stop signal is looked for before and after each run."""
        from pipelines.jobs import job_for

        observed = False
        for wave in waves:
            self.stop.check("wave_started")
            keys = [key for node in wave for key in node.keys]
            names = ", ".join(sorted({node.node_def.name for node in wave}))
            job_name = job_for(wave[0])
            started = time.perf_counter()
            is_sample_world = any(k.to_user_string() == "sample_world" for k in keys)
            if not observed and not is_sample_world:
                self.observe_raw_files()
                observed = True
            if wave[0].partitions_def is None:
                success = self.unpartitioned(job_name, wave, is_sample_world)
                if is_sample_world:
                    self.sample_world_seconds = time.perf_counter() - started
                outcome = "ok" if success else "FAILED"
                logger.info("%s %s: %s (%.1f s)", job_name, names, outcome, time.perf_counter() - started)
                self.stop.check("wave_ended")
                continue
            partition_keys = wave[0].partitions_def.get_partition_keys(dynamic_partitions_store=self.instance)
            failed_before = len(self.failed_partitions)
            runs = self.partitions(job_name, keys, partition_keys)
            failed = self.failed_partitions[failed_before:]
            logger.info(
                "%s %s: %d partitions ok, %d failed%s (%d run%s, %.1f s)",
                job_name,
                names,
                len(partition_keys) - len(failed),
                len(failed),
                f" ({', '.join(failed)})" if failed else "",
                runs,
                "" if runs == 1 else "s",
                time.perf_counter() - started,
            )
            self.stop.check("wave_ended")
        if not observed:
            self.observe_raw_files()


def _cancel_unfinished_runs(instance: dg.DagsterInstance, tags: dict[str, str]) -> None:
    """Mark the runs of this build that a signal left unfinished (created but not started: Dagster ends a
    run it is executing itself) as canceled, so that none stays ``NOT_STARTED`` or ``STARTED``."""
    unfinished = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
    for run in instance.get_runs(filters=dg.RunsFilter(tags=tags, statuses=unfinished)):
        instance.report_run_canceled(
            run, message="spatial-build was stopped by a signal before this run ended"
        )


def _empty_reason(instance: dg.DagsterInstance, table: str) -> str | None:
    """Why ``table`` is empty, as its latest materialization says (``empty_because``), if it says."""
    event = instance.get_latest_materialization_event(dg.AssetKey(table))
    reason = (
        event.asset_materialization.metadata.get(EMPTY_REASON_KEY)
        if event and event.asset_materialization
        else None
    )
    return None if reason is None else str(reason.value)


def summarize(storage_root: Path, instance: dg.DagsterInstance | None = None) -> str:
    """One screen: every Parquet cache with its rows, files and size (and why an empty one is empty);
    quarantines folded into one line."""
    tables: dict[str, tuple[int, int, int]] = {}
    for path in sorted(storage_root.rglob("*.parquet")):
        relative = path.relative_to(storage_root)
        if relative.parts[0] in ("sample_world", "previews") or relative.name.startswith("."):
            continue
        name = relative.parts[0].removesuffix(".parquet")
        rows = pl.scan_parquet(path).select(pl.len()).collect().item()
        count, files, size = tables.get(name, (0, 0, 0))
        tables[name] = (count + rows, files + 1, size + path.stat().st_size)
    lines = [f"Parquet caches under {storage_root}:", f"  {'table':<30}{'rows':>9}{'files':>7}{'MiB':>9}"]
    for name in sorted(n for n in tables if not n.endswith("_quarantine")):
        rows, files, size = tables[name]
        reason = _empty_reason(instance, name) if rows == 0 and instance is not None else None
        lines.append(
            f"  {name:<30}{rows:>9}{files:>7}{size / 2**20:>9.2f}" + (f"  ({reason})" if reason else "")
        )
    quarantines = {n: tables[n][0] for n in tables if n.endswith("_quarantine")}
    flagged = ", ".join(f"{n}: {rows}" for n, rows in sorted(quarantines.items()) if rows)
    lines.append(
        f"Quarantined rows: {sum(quarantines.values())} in {len(quarantines)} quarantine tables"
        + (f" ({flagged})" if flagged else "")
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Build everything, print the summary; exit status 1 when any run failed, 130 when stopped by a signal,
    74 when ``$DAGSTER_HOME`` is full or not writable or the storage root's disk is full."""
    args = make_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logger.setLevel(logging.WARNING if args.quiet else logging.INFO)
    if args.workers is not None and args.workers < 1:
        make_parser().error(f"--workers must be at least 1, got {args.workers}")
    from data_contracts.storage import resolve_storage_root
    from pipelines.definitions import ALL_ASSETS, build_definitions

    storage_root = resolve_storage_root(args.storage_root).resolve()
    if args.estimate_cost:
        from assets.llm_costs import estimate_costs, format_cost_table
        from pipelines.definitions import build_resources

        sys.stdout.write(
            format_cost_table(estimate_costs(build_resources(str(storage_root)), storage_root)) + "\n"
        )
        return 0
    selection = dg.AssetSelection.from_string(args.select) if args.select != "*" else dg.AssetSelection.all()
    waves = build_waves(ALL_ASSETS, selection)
    tags = {
        LAUNCHED_BY_TAG: LAUNCHED_BY,
        "spatial/selection": args.select,
        BUILD_TAG: uuid.uuid4().hex[:12],
        **build_process_tags(),  # how the next build tells that this one died (pipelines/dead_builds.py)
    }
    log_path = Path(args.log_file) if args.log_file else default_log_file(tags[BUILD_TAG])
    log_file = open_log_file(log_path)
    if log_file is not None:
        logger.addHandler(log_file)
    started = time.perf_counter()
    processes_before = descendants()  # those of the caller (a test), not the build's
    build: Build | None = None
    stopped = False
    full: DagsterHomeUnwritable | StorageRootFull | None = None
    try:
        with StopSignals(parse_signal_at(os.environ.get(SIGNAL_AT_ENV))) as stop:
            try:
                build = Build(
                    defs=build_definitions(str(storage_root)),
                    instance=open_instance(),
                    args=args,
                    tags=tags,
                    storage_root=storage_root,
                    stop=stop,
                    log_file=log_path if log_file is not None else None,
                    run_logger=dagster_logger(args.verbose, log_file),
                )
                reclaim_dead_builds(build.instance, this_build=tags[BUILD_TAG])
                build.run_waves(waves)
                stop.check("wave_ended")  # a signal after the last run
            except KeyboardInterrupt:
                stopped = True
            except (DagsterHomeUnwritable, StorageRootFull) as error:
                full = error
            except (
                sqlalchemy.exc.OperationalError,
                sqlite3.OperationalError,
                OSError,
            ) as error:  # storage errors
                full = check_storage_root(error, storage_root) or check_dagster_home(error)
                if full is None:  # not a full or unwritable disk of the build's
                    raise
            stop.defer()  # from here a signal is noted, not raised: the summary is printed whole
            if stopped or full is not None:
                end_processes_started_since(processes_before)
            if stopped and build is not None:
                _cancel_unfinished_runs(build.instance, {BUILD_TAG: tags[BUILD_TAG]})
            if stopped:
                logger.warning(
                    "stopped by a signal: the run in progress was ended and no further run started"
                )
            elapsed = time.perf_counter() - started
            # The instance tells why an empty table is empty; not read from a home that cannot be written.
            instance = (
                build.instance if build is not None and not isinstance(full, DagsterHomeUnwritable) else None
            )
            sys.stdout.write(summarize(storage_root, instance) + "\n")
            stopped = stopped or stop.poll() is not None
        sys.stdout.write(summary_line(build, stopped or full is not None, elapsed) + "\n")
        if full is not None:
            sys.stdout.flush()  # the sentence comes last
            logger.error(full.sentence)
            return EXIT_DAGSTER_HOME_UNWRITABLE
    finally:
        if log_file is not None:
            logger.removeHandler(log_file)
            log_file.close()
    if stopped:
        return EXIT_INTERRUPTED
    failed = build is None or not build.ok or build.failed_partitions or build.unpartitioned_failed
    return 1 if failed else 0


def summary_line(build: Build | None, stopped: bool, elapsed: float) -> str:
    """The last line of a build: what it built and what failed (a run that failed, or one a full disk ended).

    >>> summary_line(None, True, 2.0).split(" in ")[0]
    'Stopped after building 0 unpartitioned asset definitions (0 failed) and 0 partitions (0 failed)'
    """
    built, failed_unpartitioned, partitions_ok, failed, sample_world_seconds = (
        (
            build.unpartitioned_built,
            len(build.unpartitioned_failed),
            build.partitions_ok,
            len(build.failed_partitions),
            build.sample_world_seconds,
        )
        if build is not None
        else (0, 0, 0, 0, 0.0)
    )
    return (
        f"{'Stopped after building' if stopped else 'Built'} {built} unpartitioned asset definitions "
        f"({failed_unpartitioned} failed) and {partitions_ok} partitions ({failed} failed) in {elapsed:.1f} s "
        f"({elapsed - sample_world_seconds:.1f} s after the sample world). Dagster UI: ./dev.sh dagster"
    )


if __name__ == "__main__":
    raise SystemExit(main())
