"""``spatial-build``: materialise the whole asset graph in one command, then summarise the caches.

The graph runs through the project's named jobs, in dependency order (a Dagster run cannot mix
partitions definitions), in as few runs as that allows (:func:`build_waves`): the sample world;
then every unpartitioned asset whose inputs are built, in one ``datasets_job`` run; then each
partitioned family (per-scan DGE geometry, Grounding DINO shards, STVQA shards) in ``dge_job``,
``grounding_shards_job`` or ``stvqa_shards_job``, all partitions of a wave in one run (a partition
range, as a single-run backfill launches it; see :mod:`assets.partition_ranges`); then the
unpartitioned assets built on them, in one more run. The partitions of a range run are computed in a
pool of worker processes, one per core (``--workers N``; 1: one after another in the build's
process), started in the background when the build starts. The workers are kept busy across steps
and waves: within a range run, a partition's next asset starts as soon as its input is back (DGE
visibility after geometry, tasks after visibility; STVQA pass@2 after the candidates), and once
``rgbd_frames`` and ``rgbd_scenes`` are built, the DGE scans' geometry is queued for the workers
while the Grounding DINO and STVQA runs keep this process busy with their bookkeeping; a run takes
such a result only for the same call with arguments of equal value
(:func:`assets.partition_ranges.prefetch`). The instance's SQLite databases are held open for the
build (:func:`sqlite_kept_open`) and written without an fsync per commit
(:func:`sqlite_commits_without_fsync`). When a range run fails, the wave's
partitions are built again one run each, so a failing partition does not stop the others, and the
failures are reported per partition. ``--run-per-partition`` builds every partition in its own run
from the start (slower: each run costs about a second of instance bookkeeping;
``benchmarks/bench_build.py`` compares the two). Before the sources are read, new scan folders are added as ``scenes`` partitions and the raw
folders are observed (``observe_raw_files_job``), so the automation sensor knows what the build read.
Every run is tagged ``spatial/launched_by`` and ``spatial/selection``.

Runs are recorded in the Dagster instance of ``$DAGSTER_HOME`` when it is set (so ``dagster dev``
shows them afterwards), else in a temporary instance. The console shows one line per step and
the summary; Dagster's own event log of each run is in the UI (``--verbose`` prints it too).

Usage::

    spatial-build                       # the built-in sample world, offline backends
    spatial-build --storage-root /data/spatial --scenes 100
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sqlite3
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import dagster as dg
import polars as pl
import sqlalchemy.engine
import sqlalchemy.event
import sqlalchemy.exc

logger = logging.getLogger("spatial_build")

ASSET_PARTITION_RANGE_START_TAG = "dagster/asset_partition_range_start"
ASSET_PARTITION_RANGE_END_TAG = "dagster/asset_partition_range_end"
"""The run tags of a partition range (what a single-run backfill puts on its run)."""


def make_parser() -> argparse.ArgumentParser:
    """Command-line flags of ``spatial-build``."""
    parser = argparse.ArgumentParser(prog="spatial-build", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--storage-root",
        default=None,
        help="Where the Parquet caches go (default: $SPATIAL_DATA_ROOT, $DAGSTER_HOME/spatial_data or ./data).",
    )
    parser.add_argument(
        "--scenes", type=int, default=None, help="Sample world: number of scenes (default 12)."
    )
    parser.add_argument("--views", type=int, default=None, help="Sample world: views per scene (default 6).")
    parser.add_argument("--seed", type=int, default=None, help="Sample world: seed (default 0).")
    parser.add_argument(
        "--select",
        default="*",
        help="Dagster asset selection string limiting what is built (default: everything).",
    )
    parser.add_argument(
        "--run-per-partition",
        action="store_true",
        help="Build each partition in its own run (the old mode; by default all partitions of a wave run as "
        "one range run, and only a failed range is retried partition by partition).",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="Worker processes for the partitions of a range run (default: one per core, at most 8; 1: none, "
        "every partition in the build's own process).",
    )
    parser.add_argument("--quiet", action="store_true", help="Only warnings, errors and the final summary.")
    parser.add_argument("--verbose", action="store_true", help="Also print Dagster's event log of every run.")
    return parser


def _instance() -> dg.DagsterInstance:
    if os.environ.get("DAGSTER_HOME"):
        Path(os.environ["DAGSTER_HOME"]).mkdir(parents=True, exist_ok=True)
        return dg.DagsterInstance.get()
    return dg.DagsterInstance.ephemeral()


INSTANCE_SQLITE_FILES = ("event_log.db", "history/runs.db", "history/runs/index.db", "schedules/schedules.db")
"""The SQLite databases of an instance under ``$DAGSTER_HOME`` (consolidated or per-run event log)."""


@contextlib.contextmanager
def sqlite_kept_open(home: str | None) -> Iterator[list[Path]]:
    """Hold one idle connection to each SQLite database of the instance under ``home`` for the block.

    Dagster's SQLite storages open and close a connection for every event they store; when the last
    connection to a database in WAL mode closes, SQLite checkpoints the log into the database and
    truncates it, so each of a build's few thousand writes paid a checkpoint. With one connection
    held (no transaction, no lock: other processes read and write as before), the log is
    checkpointed every 1000 pages instead. Yields the databases held; none without ``home``
    (an ephemeral instance keeps its storage in memory).
    """
    paths = (
        [Path(home) / name for name in INSTANCE_SQLITE_FILES if (Path(home) / name).is_file()] if home else []
    )
    connections = [sqlite3.connect(path) for path in paths]
    for connection in connections:  # a read opens the write-ahead log: only then does it count as open
        connection.execute("PRAGMA schema_version").fetchall()
    try:
        yield paths
    finally:
        for connection in connections:
            connection.close()


@contextlib.contextmanager
def sqlite_commits_without_fsync() -> Iterator[None]:
    """Open this process's SQLAlchemy SQLite connections with ``PRAGMA synchronous=NORMAL`` for the block.

    Dagster's SQLite storages run in WAL mode, where SQLite's default (``FULL``) fsyncs the log at every
    commit: a build's two thousand event writes spent about 6 s waiting for the disk. With ``NORMAL``
    the log is fsynced at checkpoints only. The database stays consistent whatever happens, and a killed
    build loses nothing (the operating system still holds what it wrote); only a power cut or an
    operating-system crash can drop the last events, which the next build then writes again.
    """

    def relax(dbapi_connection, _record) -> None:
        if isinstance(dbapi_connection, sqlite3.Connection):
            dbapi_connection.execute("PRAGMA synchronous=NORMAL")

    sqlalchemy.event.listen(sqlalchemy.engine.Engine, "connect", relax)
    try:
        yield
    finally:
        sqlalchemy.event.remove(sqlalchemy.engine.Engine, "connect", relax)


def _run_config(args: argparse.Namespace, with_sample_world: bool) -> dict:
    config: dict = {"loggers": {"console": {"config": {"log_level": "INFO" if args.verbose else "WARNING"}}}}
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
    partitioned definitions sharing one partitions definition, built as one range run (or once per
    partition). Partitioned waves go first whenever one is ready, so that the unpartitioned assets that
    wait for them are built together afterwards; an unpartitioned wave takes every unpartitioned
    definition whose inputs are built before it or inside it. A definition holding a key of ``alone``
    (the sample world, which the raw files are observed after) is a wave of its own.
    """
    selected_keys = selection.resolve(all_assets)
    owner = {key: node for node in all_assets for key in node.keys}
    remaining = [node for node in all_assets if set(node.keys) & selected_keys]
    remaining_ids = {id(node) for node in remaining}
    waves: list[list[dg.AssetsDefinition]] = []

    def is_alone(node: dg.AssetsDefinition) -> bool:
        return any(key.to_user_string() in alone for key in node.keys)

    def grow(wave: list[dg.AssetsDefinition], partitions_def) -> None:
        """Add the remaining definitions of ``partitions_def`` whose inputs are built or in the wave."""
        grown = True
        while grown:
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

    while remaining:
        ready = [n for n in remaining if not (_upstream_nodes(n, owner) & remaining_ids)]
        if not ready:
            raise RuntimeError(
                "the asset graph has a cycle among: " + ", ".join(str(n.key) for n in remaining)
            )
        partitioned = [n for n in ready if n.partitions_def is not None]
        if any(is_alone(n) for n in ready):
            wave = [next(n for n in ready if is_alone(n))]
        elif partitioned:
            wave = [n for n in partitioned if n.partitions_def == partitioned[0].partitions_def]
            grow(wave, partitioned[0].partitions_def)
        else:
            wave = [n for n in ready if not is_alone(n)]
            grow(wave, None)
        waves.append(wave)
        remaining = [n for n in remaining if all(n is not w for w in wave)]
        remaining_ids = {id(node) for node in remaining}
    return waves


def _execute(
    defs: dg.Definitions,
    job_name: str,
    keys: Sequence[dg.AssetKey] | None,
    instance: dg.DagsterInstance,
    run_config: dict,
    tags: dict[str, str],
    partition_key: str | None = None,
    partition_range: tuple[str, str] | None = None,
    log_failure: bool = True,
) -> bool:
    """Run ``job_name`` (restricted to ``keys`` when given) for one partition, a range or none.

    Logs the failed steps (unless ``log_failure`` is False); True on success.
    """
    run_tags = dict(tags)
    if partition_range is not None:
        run_tags[ASSET_PARTITION_RANGE_START_TAG], run_tags[ASSET_PARTITION_RANGE_END_TAG] = partition_range
    result = defs.resolve_job_def(job_name).execute_in_process(
        run_config=run_config,
        instance=instance,
        partition_key=partition_key,
        asset_selection=list(keys) if keys is not None else None,
        tags=run_tags,
        raise_on_error=False,
    )
    if not result.success and log_failure:
        failed = [event.step_key for event in result.get_step_failure_events()]
        where = ""
        if partition_key:
            where = f" (partition {partition_key})"
        elif partition_range is not None:
            where = f" (partitions {partition_range[0]} to {partition_range[1]})"
        logger.error(
            "run %s of %s failed in %s%s (details: the run's page in the Dagster UI)",
            result.run_id,
            job_name,
            failed,
            where,
        )
    return result.success


def _execute_partitions(
    defs: dg.Definitions,
    job_name: str,
    keys: Sequence[dg.AssetKey],
    instance: dg.DagsterInstance,
    run_config: dict,
    tags: dict[str, str],
    partition_keys: Sequence[str],
    run_per_partition: bool = False,
) -> tuple[list[str], int]:
    """Build ``partition_keys`` of a wave: one range run, or (``run_per_partition``, or when the range
    run fails) one run per partition. Returns the failed partition keys and the number of runs."""
    if not partition_keys:
        return [], 0
    if not run_per_partition and len(partition_keys) > 1:
        span = (partition_keys[0], partition_keys[-1])
        if _execute(
            defs, job_name, keys, instance, run_config, tags, partition_range=span, log_failure=False
        ):
            return [], 1
        logger.warning(
            "%s: the run of partitions %s to %s failed; building them one run each",
            job_name,
            span[0],
            span[1],
        )
    failed = [
        key
        for key in partition_keys
        if not _execute(defs, job_name, keys, instance, run_config, tags, partition_key=key)
    ]
    runs = len(partition_keys) + (0 if run_per_partition or len(partition_keys) == 1 else 1)
    return failed, runs


def _wave_index(
    waves: Sequence[Sequence[dg.AssetsDefinition]], asset: str, absent: int | None = None
) -> int | None:
    """The index of the wave that builds ``asset`` (``absent`` when the selection leaves it out)."""
    for index, wave in enumerate(waves):
        if any(key.to_user_string() == asset for node in wave for key in node.keys):
            return index
    return absent


def _prefetch_scans(
    wave: Sequence[dg.AssetsDefinition], storage_root: Path, instance: dg.DagsterInstance, run_config: dict
) -> None:
    """Queue the DGE scans' geometry for the worker pool's idle moments, ahead of their range run.

    The scans' inputs are built; the waves until the scans' run (Grounding DINO and STVQA shards) keep
    this process busy with their runs' bookkeeping while the workers would mostly wait. The range run
    takes each scan's result when its arguments are the same (see
    :func:`assets.dge.assets.prefetch_scan_geometry`).
    """
    from assets.dge.assets import prefetch_scan_geometry

    scene_ids = list(wave[0].partitions_def.get_partition_keys(dynamic_partitions_store=instance))
    if len(scene_ids) < 2:  # a run of one scan computes it in its own process
        return
    queued = prefetch_scan_geometry(storage_root, scene_ids, run_config)
    if queued:
        logger.info("dge_job: %d scans queued for the workers ahead of their run", queued)


def _observe_raw_files(
    defs: dg.Definitions, instance: dg.DagsterInstance, args, tags: dict[str, str]
) -> bool:
    """Add every scan folder as a ``scenes`` partition, then record the raw folders' content versions."""
    from assets.partitions import SCENES_PARTITIONS_NAME
    from assets.raw_files import scan_folders
    from pipelines.automation import OBSERVE_RAW_FILES_JOB

    resources = defs.resources
    scenes = scan_folders(resources["sources"], resources["storage"])
    for attempt in range(3):
        known = set(instance.get_dynamic_partitions(SCENES_PARTITIONS_NAME))
        new = [scene for scene in scenes if scene not in known]
        if not new:
            break
        try:
            instance.add_dynamic_partitions(SCENES_PARTITIONS_NAME, new)
            break
        except sqlalchemy.exc.IntegrityError:  # a concurrent build added some of them first: read again
            logger.info("scene partitions added concurrently (attempt %d); reading them again", attempt + 1)
    return _execute(defs, OBSERVE_RAW_FILES_JOB, None, instance, _run_config(args, False), tags)


def summarize(storage_root: Path) -> str:
    """One screen: every Parquet cache with its rows, files and size; quarantines folded into one line."""
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
        lines.append(f"  {name:<30}{rows:>9}{files:>7}{size / 2**20:>9.2f}")
    quarantines = {n: tables[n][0] for n in tables if n.endswith("_quarantine")}
    flagged = ", ".join(f"{n}: {rows}" for n, rows in sorted(quarantines.items()) if rows)
    lines.append(
        f"Quarantined rows: {sum(quarantines.values())} in {len(quarantines)} quarantine tables"
        + (f" ({flagged})" if flagged else "")
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Build everything, print the summary; exit status 1 when any run failed."""
    args = make_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logger.setLevel(logging.WARNING if args.quiet else logging.INFO)
    from assets.partition_ranges import configure_workers, start_workers, worker_count
    from data_contracts.storage import resolve_storage_root
    from pipelines.definitions import ALL_ASSETS, build_definitions

    storage_root = resolve_storage_root(args.storage_root).resolve()
    selection = dg.AssetSelection.from_string(args.select) if args.select != "*" else dg.AssetSelection.all()
    waves = build_waves(ALL_ASSETS, selection)
    configure_workers(args.workers)
    starting_workers = None
    partitioned = any(wave[0].partitions_def is not None for wave in waves)
    if not args.run_per_partition and partitioned and worker_count() > 1:
        starting_workers = start_workers()  # the workers import their modules while the first waves run
    defs = build_definitions(str(storage_root))
    instance = _instance()
    with sqlite_kept_open(os.environ.get("DAGSTER_HOME")), sqlite_commits_without_fsync():
        return _build(args, waves, defs, instance, storage_root, starting_workers)


def _build(args, waves, defs, instance, storage_root: Path, starting_workers) -> int:
    """Run the waves, print the summary; exit status 1 when any run failed."""
    from assets.partition_ranges import drop_prefetched
    from pipelines.jobs import job_for

    tags = {"spatial/launched_by": "spatial-build", "spatial/selection": args.select}
    started = time.perf_counter()
    ok = True
    observed = False
    sample_world_seconds = 0.0
    built_unpartitioned = partitions_ok = failed_partitions = 0
    scan_wave = _wave_index(waves, "scene_geometry")
    scan_inputs_wave = max(_wave_index(waves, "rgbd_frames", -1), _wave_index(waves, "rgbd_scenes", -1))
    scans_prefetched = args.run_per_partition
    for index, wave in enumerate(waves):
        keys = [key for node in wave for key in node.keys]
        names = ", ".join(sorted({node.node_def.name for node in wave}))
        job_name = job_for(wave[0])
        wave_started = time.perf_counter()
        is_sample_world = any(k.to_user_string() == "sample_world" for k in keys)
        if not observed and not is_sample_world:
            ok = _observe_raw_files(defs, instance, args, tags) and ok
            observed = True
        if (
            not scans_prefetched
            and ok
            and observed
            and scan_wave is not None
            and scan_inputs_wave < index < scan_wave
        ):
            _prefetch_scans(waves[scan_wave], storage_root, instance, _run_config(args, False))
            scans_prefetched = True
        if wave[0].partitions_def is None:
            success = _execute(defs, job_name, keys, instance, _run_config(args, is_sample_world), tags)
            ok = success and ok
            built_unpartitioned += len(wave)
            if is_sample_world:
                sample_world_seconds = time.perf_counter() - wave_started
            logger.info(
                "%s %s: %s (%.1f s)",
                job_name,
                names,
                "ok" if success else "FAILED",
                time.perf_counter() - wave_started,
            )
            continue
        partition_keys = list(wave[0].partitions_def.get_partition_keys(dynamic_partitions_store=instance))
        failed, runs = _execute_partitions(
            defs,
            job_name,
            keys,
            instance,
            _run_config(args, False),
            tags,
            partition_keys,
            run_per_partition=args.run_per_partition,
        )
        partitions_ok += len(partition_keys) - len(failed)
        failed_partitions += len(failed)
        logger.info(
            "%s %s: %d partitions ok, %d failed%s (%d run%s, %.1f s)",
            job_name,
            names,
            len(partition_keys) - len(failed),
            len(failed),
            f" ({', '.join(failed)})" if failed else "",
            runs,
            "" if runs == 1 else "s",
            time.perf_counter() - wave_started,
        )
    if not observed:
        ok = _observe_raw_files(defs, instance, args, tags) and ok
    unused = drop_prefetched()
    if unused:
        logger.info("%d calls started ahead of their runs were not used", unused)
    elapsed = time.perf_counter() - started
    sys.stdout.write(summarize(storage_root) + "\n")
    sys.stdout.write(
        f"Built {built_unpartitioned} unpartitioned asset definitions and {partitions_ok} partitions "
        f"({failed_partitions} failed) in {elapsed:.1f} s ({elapsed - sample_world_seconds:.1f} s after the "
        f"sample world). Dagster UI: ./dev.sh dagster\n"
    )
    if starting_workers is not None:
        starting_workers.join()  # a pool still starting when the build ends is shut down whole, at exit
    return 0 if ok and not failed_partitions else 1


if __name__ == "__main__":
    raise SystemExit(main())
