"""``spatial-build``: materialise the whole asset graph in one command, then summarise the caches.

A Dagster run cannot mix partitions definitions, so the graph is run in waves, in dependency order:
whenever every input of a set of unpartitioned assets is built, they run together in one run;
partitioned assets (per-scan DGE geometry, Grounding DINO shards, STVQA shards) run once per
partition, and a failing partition does not stop the others.

Runs are recorded in the Dagster instance of ``$DAGSTER_HOME`` when it is set (so ``dagster dev``
shows them afterwards), else in a temporary instance.

Usage::

    spatial-build                       # the built-in sample world, offline backends
    spatial-build --storage-root /data/spatial --scenes 100
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import dagster as dg
import polars as pl

logger = logging.getLogger("spatial_build")


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
    parser.add_argument("--quiet", action="store_true", help="Only warnings and the final summary.")
    return parser


def _instance() -> dg.DagsterInstance:
    if os.environ.get("DAGSTER_HOME"):
        Path(os.environ["DAGSTER_HOME"]).mkdir(parents=True, exist_ok=True)
        return dg.DagsterInstance.get()
    return dg.DagsterInstance.ephemeral()


def _run_config(args: argparse.Namespace, with_sample_world: bool) -> dict:
    config: dict = {"loggers": {"console": {"config": {"log_level": "WARNING" if args.quiet else "INFO"}}}}
    sample = {
        k: v
        for k, v in {"num_scenes": args.scenes, "views_per_scene": args.views, "seed": args.seed}.items()
        if v is not None
    }
    if sample and with_sample_world:
        config["ops"] = {"sample_world": {"config": sample}}
    return config


def _upstream_nodes(node: dg.AssetsDefinition, owner: dict) -> set[int]:
    upstream = {dep for deps in node.asset_deps.values() for dep in deps}
    return {id(owner[key]) for key in upstream if key in owner and owner[key] is not node}


def build_waves(
    all_assets: Sequence[dg.AssetsDefinition], selection: dg.AssetSelection
) -> list[list[dg.AssetsDefinition]]:
    """Order the selected asset definitions into waves (see the module docstring).

    Each wave is either a list of unpartitioned definitions, built in one run, or a list of
    partitioned definitions sharing one partitions definition, built once per partition.
    """
    selected_keys = selection.resolve(all_assets)
    owner = {key: node for node in all_assets for key in node.keys}
    remaining = [node for node in all_assets if set(node.keys) & selected_keys]
    remaining_ids = {id(node) for node in remaining}
    waves: list[list[dg.AssetsDefinition]] = []
    while remaining:
        ready = [n for n in remaining if not (_upstream_nodes(n, owner) & remaining_ids)]
        if not ready:
            raise RuntimeError(
                "the asset graph has a cycle among: " + ", ".join(str(n.key) for n in remaining)
            )
        unpartitioned = [n for n in ready if n.partitions_def is None]
        if unpartitioned:
            wave = unpartitioned
        else:
            first = ready[0].partitions_def
            wave = [n for n in ready if n.partitions_def == first]
            grown = True
            while grown:  # a chain of assets with the same partitions runs in one run per partition
                wave_ids = {id(n) for n in wave}
                extra = [
                    n
                    for n in remaining
                    if id(n) not in wave_ids
                    and n.partitions_def == first
                    and _upstream_nodes(n, owner) & remaining_ids <= wave_ids
                ]
                wave.extend(extra)
                grown = bool(extra)
        waves.append(wave)
        remaining = [n for n in remaining if all(n is not w for w in wave)]
        remaining_ids = {id(node) for node in remaining}
    return waves


def _materialize(assets, keys, resources, instance, run_config, partition_key=None) -> bool:
    if not keys:
        return True
    result = dg.materialize(
        assets,
        selection=keys,
        resources=resources,
        instance=instance,
        run_config=run_config,
        partition_key=partition_key,
        raise_on_error=False,
    )
    if not result.success:
        failed = [event.step_key for event in result.get_step_failure_events()]
        logger.error(
            "run %s failed in %s%s",
            result.run_id,
            failed,
            f" (partition {partition_key})" if partition_key else "",
        )
    return result.success


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
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from assets.partitions import register_scene_partitions
    from data_contracts.storage import default_storage_root
    from pipelines.definitions import ALL_ASSETS, build_resources

    storage_root = Path(args.storage_root or default_storage_root()).resolve()
    resources = build_resources(str(storage_root))
    instance = _instance()
    selection = dg.AssetSelection.from_string(args.select) if args.select != "*" else dg.AssetSelection.all()
    started = time.perf_counter()
    ok = True
    sample_world_config = _run_config(args, True)
    built_unpartitioned = partitions_ok = failed_partitions = 0
    for wave in build_waves(ALL_ASSETS, selection):
        keys = [key for node in wave for key in node.keys]
        partitions_def = wave[0].partitions_def
        if partitions_def is None:
            config = (
                sample_world_config
                if any(k.to_user_string() == "sample_world" for k in keys)
                else _run_config(args, False)
            )
            ok = _materialize(ALL_ASSETS, keys, resources, instance, config) and ok
            built_unpartitioned += len(wave)
            continue
        if isinstance(partitions_def, dg.DynamicPartitionsDefinition):
            partition_keys = register_scene_partitions(instance, storage_root)
        else:
            partition_keys = list(partitions_def.get_partition_keys())
        logger.info("building %s over %d partitions", [k.to_user_string() for k in keys], len(partition_keys))
        for partition_key in partition_keys:
            if _materialize(
                ALL_ASSETS, keys, resources, instance, _run_config(args, False), partition_key=partition_key
            ):
                partitions_ok += 1
            else:
                failed_partitions += 1
    elapsed = time.perf_counter() - started
    sys.stdout.write(summarize(storage_root) + "\n")
    sys.stdout.write(
        f"Built {built_unpartitioned} unpartitioned asset definitions and {partitions_ok} partitions "
        f"({failed_partitions} failed) in {elapsed:.1f} s. Dagster UI: ./dev.sh dagster\n"
    )
    return 0 if ok and not failed_partitions else 1


if __name__ == "__main__":
    raise SystemExit(main())
