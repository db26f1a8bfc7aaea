"""``spatial-build``: materialise the whole asset graph in one command, then summarise the caches.

It observes the raw folders (new scan folders become ``scenes`` partitions), then runs the named jobs
in waves (:func:`build_waves`: a run cannot mix partitions definitions): each partitioned family is one
run over the range of its partitions, as a single-run backfill launches it (:func:`partition_range_tags`),
and a failed range is built again one run per partition so the failures are named. Ctrl-C or SIGTERM
ends the run in progress, starts no other and prints the summary (exit status 130). Runs go to the
instance of ``$DAGSTER_HOME`` (its ``dagster.yaml`` decides the storage), else a temporary one, tagged
``spatial/launched_by``, ``spatial/selection``, ``spatial/build`` and the build's process. See the README's
"How ``spatial-build`` runs the graph".

Before it runs anything, a build gives back what killed builds left (:mod:`pipelines.dead_builds`). When
``$DAGSTER_HOME`` is full or not writable, it stops with one sentence and the summary, exit status 74
(:mod:`pipelines.dagster_home`).

Usage::

    spatial-build                       # the built-in sample world, offline backends
    spatial-build --storage-root /data/spatial --scenes 100
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
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
from pipelines.dagster_home import DagsterHomeUnwritable, check_dagster_home
from pipelines.dead_builds import (
    BUILD_TAG,
    LAUNCHED_BY,
    LAUNCHED_BY_TAG,
    build_process_tags,
    reclaim_dead_builds,
)
from pipelines.run_tags import PARTITION_RANGE_END_TAG, PARTITION_RANGE_START_TAG

logger = logging.getLogger("spatial_build")

EXIT_INTERRUPTED = 130
"""Exit status of a build stopped by Ctrl-C or SIGTERM (128 + SIGINT, as a shell reports it)."""
EXIT_DAGSTER_HOME_UNWRITABLE = 74
"""Exit status of a build stopped because ``$DAGSTER_HOME`` is full or not writable (EX_IOERR of sysexits.h)."""


def make_parser() -> argparse.ArgumentParser:
    """Command-line flags of ``spatial-build``."""
    parser = argparse.ArgumentParser(
        prog="spatial-build",
        description=__doc__.split("\n\n")[0],
        epilog="Exit status: 0 built, 1 a run failed, 130 stopped by Ctrl-C or SIGTERM, 74 DAGSTER_HOME is "
        "full or not writable.",
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
    parser.add_argument("--verbose", action="store_true", help="Also print Dagster's event log of every run.")
    return parser


def partition_range_tags(first: str, last: str) -> dict[str, str]:
    """The run tags that make a run cover the partitions ``first`` to ``last`` (``execute_in_process`` takes no
    range): those of a single-run backfill and ``dagster asset materialize --partition-range``; pinned by
    ``tests/pipelines/test_range_runs.py``."""
    return {PARTITION_RANGE_START_TAG: first, PARTITION_RANGE_END_TAG: last}


def _instance() -> dg.DagsterInstance:
    if os.environ.get("DAGSTER_HOME"):
        Path(os.environ["DAGSTER_HOME"]).mkdir(parents=True, exist_ok=True)
        return dg.DagsterInstance.get()
    return dg.DagsterInstance.ephemeral()


def _run_config(args: argparse.Namespace, with_sample_world: bool) -> dict:
    config: dict = {"loggers": {"console": {"config": {"log_level": "INFO" if args.verbose else "WARNING"}}}}
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
    ok: bool = True
    unpartitioned_built: int = 0
    partitions_ok: int = 0
    sample_world_seconds: float = 0.0
    failed_partitions: list[str] = field(default_factory=list)

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

        Logs the failed steps (unless ``log_failure`` is False); True on success. Raises
        KeyboardInterrupt when Dagster ended the run because of Ctrl-C or SIGTERM, and
        :class:`DagsterHomeUnwritable` when a step failed because ``$DAGSTER_HOME`` is full or not writable.
        """
        tags = dict(self.tags)
        if partition_range is not None:
            tags.update(partition_range_tags(*partition_range))
        result = self.defs.resolve_job_def(job_name).execute_in_process(
            run_config=run_config,
            instance=self.instance,
            partition_key=partition_key,
            asset_selection=list(keys) if keys is not None else None,
            tags=tags,
            raise_on_error=False,
        )
        if _interrupted(result):
            raise KeyboardInterrupt
        for event in result.get_step_failure_events():
            if unwritable := check_dagster_home(event.step_failure_data.error):
                raise unwritable
        if not result.success and log_failure:
            failed = [event.step_key for event in result.get_step_failure_events()]
            where = f" (partition {partition_key})" if partition_key else ""
            logger.error(
                "run %s of %s failed in %s%s (details: its page in the Dagster UI)",
                result.run_id,
                job_name,
                failed,
                where,
            )
        return result.success

    def partitions(self, job_name: str, keys: Sequence[dg.AssetKey], partition_keys: Sequence[str]) -> int:
        """Build ``partition_keys`` of a wave as one range run, or (when that fails) one run per partition;
        returns the number of runs."""
        if not partition_keys:
            return 0
        run_config = _run_config(self.args, False)
        span = (partition_keys[0], partition_keys[-1])
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
        return 1 + len(partition_keys)

    def observe_raw_files(self) -> None:
        """Add every scan folder as a ``scenes`` partition, then record the raw folders' content versions."""
        from assets.partitions import SCENES_PARTITIONS_NAME
        from assets.raw_files import scan_folders
        from pipelines.automation import OBSERVE_RAW_FILES_JOB

        resources = self.defs.resources
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

    def run_waves(self, waves: Sequence[Sequence[dg.AssetsDefinition]]) -> None:
        """Run the waves in order, a line per wave."""
        from pipelines.jobs import job_for

        observed = False
        for wave in waves:
            keys = [key for node in wave for key in node.keys]
            names = ", ".join(sorted({node.node_def.name for node in wave}))
            job_name = job_for(wave[0])
            started = time.perf_counter()
            is_sample_world = any(k.to_user_string() == "sample_world" for k in keys)
            if not observed and not is_sample_world:
                self.observe_raw_files()
                observed = True
            if wave[0].partitions_def is None:
                success = self.execute(job_name, keys, _run_config(self.args, is_sample_world))
                self.ok = success and self.ok
                self.unpartitioned_built += len(wave)
                if is_sample_world:
                    self.sample_world_seconds = time.perf_counter() - started
                outcome = "ok" if success else "FAILED"
                logger.info("%s %s: %s (%.1f s)", job_name, names, outcome, time.perf_counter() - started)
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
    74 when ``$DAGSTER_HOME`` is full or not writable."""
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
    # SIGTERM stops the build as Ctrl-C does (Dagster handles both inside a run).
    previous_sigterm = signal.signal(signal.SIGTERM, signal.default_int_handler)
    started = time.perf_counter()
    build: Build | None = None
    stopped = False
    unwritable: DagsterHomeUnwritable | None = None
    try:
        build = Build(defs=build_definitions(str(storage_root)), instance=_instance(), args=args, tags=tags)
        reclaim_dead_builds(build.instance, this_build=tags[BUILD_TAG])
        build.run_waves(waves)
    except KeyboardInterrupt:
        stopped = True
        if build is not None:
            _cancel_unfinished_runs(build.instance, {BUILD_TAG: tags[BUILD_TAG]})
        logger.warning("stopped by a signal: the run in progress was ended and no further run started")
    except DagsterHomeUnwritable as error:
        unwritable = error
    except (sqlalchemy.exc.OperationalError, sqlite3.OperationalError, OSError) as error:  # storage errors
        unwritable = check_dagster_home(error)
        if unwritable is None:  # not about DAGSTER_HOME
            raise
    finally:
        signal.signal(signal.SIGTERM, previous_sigterm)
    elapsed = time.perf_counter() - started
    # The instance tells why an empty table is empty; not read from a home that cannot be written.
    instance = build.instance if build is not None and unwritable is None else None
    sys.stdout.write(summarize(storage_root, instance) + "\n")
    unpartitioned, partitions_ok, failed, sample_world_seconds = (
        (
            build.unpartitioned_built,
            build.partitions_ok,
            len(build.failed_partitions),
            build.sample_world_seconds,
        )
        if build is not None
        else (0, 0, 0, 0.0)
    )
    sys.stdout.write(
        f"{'Stopped after building' if stopped or unwritable else 'Built'} {unpartitioned} unpartitioned asset "
        f"definitions and {partitions_ok} partitions ({failed} failed) in {elapsed:.1f} s "
        f"({elapsed - sample_world_seconds:.1f} s after the sample world). Dagster UI: ./dev.sh dagster\n"
    )
    if unwritable is not None:
        sys.stdout.flush()  # the sentence comes last
        logger.error(unwritable.sentence)
        return EXIT_DAGSTER_HOME_UNWRITABLE
    if stopped:
        return EXIT_INTERRUPTED
    return 0 if build is not None and build.ok and not failed else 1


if __name__ == "__main__":
    raise SystemExit(main())
