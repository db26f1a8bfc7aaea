"""``spatial-build``: materialise the whole asset graph in one command, then summarise the caches.

The graph is run in three phases, because partitioned assets (per-scan DGE geometry) cannot share a
run with unpartitioned ones:

1. every unpartitioned asset that does not read a partitioned one (sample world, sources, grounding,
   STVQA, ...);
2. every partitioned asset, once per partition (a failing scene does not stop the others);
3. the unpartitioned assets that read partitioned ones (training tables built from DGE tasks, ...).

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
    parser.add_argument("--storage-root", default=None, help="Where the Parquet caches go (default: $SPATIAL_DATA_ROOT, $DAGSTER_HOME/spatial_data or ./data).")
    parser.add_argument("--scenes", type=int, default=None, help="Sample world: number of scenes (default 12).")
    parser.add_argument("--views", type=int, default=None, help="Sample world: views per scene (default 6).")
    parser.add_argument("--seed", type=int, default=None, help="Sample world: seed (default 0).")
    parser.add_argument("--select", default="*", help="Dagster asset selection string limiting what is built (default: everything).")
    parser.add_argument("--quiet", action="store_true", help="Only warnings and the final summary.")
    return parser


def _instance() -> dg.DagsterInstance:
    if os.environ.get("DAGSTER_HOME"):
        Path(os.environ["DAGSTER_HOME"]).mkdir(parents=True, exist_ok=True)
        return dg.DagsterInstance.get()
    return dg.DagsterInstance.ephemeral()


def _run_config(args: argparse.Namespace, with_sample_world: bool) -> dict:
    config: dict = {"loggers": {"console": {"config": {"log_level": "WARNING" if args.quiet else "INFO"}}}}
    sample = {k: v for k, v in {"num_scenes": args.scenes, "views_per_scene": args.views, "seed": args.seed}.items() if v is not None}
    if sample and with_sample_world:
        config["ops"] = {"sample_world": {"config": sample}}
    return config


def build_phases(all_assets: Sequence, selection: dg.AssetSelection) -> tuple[list, list, list]:
    """Split the selected asset keys into the three phases described in the module docstring."""
    keys_of = lambda defs_list: {key for d in defs_list for key in d.keys}  # noqa: E731
    partitioned = [d for d in all_assets if d.partitions_def is not None]
    partitioned_keys = keys_of(partitioned)
    selected = selection.resolve(all_assets)
    downstream = dg.AssetSelection.assets(*partitioned_keys).downstream().resolve(all_assets) if partitioned_keys else set()
    phase_one = sorted(selected - downstream, key=str)
    phase_two = sorted(selected & partitioned_keys, key=str)
    phase_three = sorted((selected & downstream) - partitioned_keys, key=str)
    return phase_one, phase_two, phase_three


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
        logger.error("run %s failed in %s%s", result.run_id, failed, f" (partition {partition_key})" if partition_key else "")
    return result.success


def summarize(storage_root: Path) -> str:
    """One screen: every Parquet cache with its rows and size, quarantines last."""
    lines = [f"Parquet caches under {storage_root}:", f"  {'table':<34}{'rows':>9}{'files':>7}{'MiB':>9}"]
    tables: dict[str, tuple[int, int, int]] = {}
    for path in sorted(storage_root.rglob("*.parquet")):
        relative = path.relative_to(storage_root)
        if relative.parts[0] in ("sample_world", "previews") or relative.name.startswith("."):
            continue
        name = relative.parts[0].removesuffix(".parquet")
        rows = pl.scan_parquet(path).select(pl.len()).collect().item()
        count, files, size = tables.get(name, (0, 0, 0))
        tables[name] = (count + rows, files + 1, size + path.stat().st_size)
    for name in sorted(tables, key=lambda n: (n.endswith("_quarantine"), n)):
        rows, files, size = tables[name]
        lines.append(f"  {name:<34}{rows:>9}{files:>7}{size / 2**20:>9.2f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Build everything, print the summary; exit status 1 when any run failed."""
    args = make_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from pipelines.definitions import ALL_ASSETS, build_resources, scene_partition_keys
    from pipelines.storage import default_storage_root

    storage_root = Path(args.storage_root or default_storage_root()).resolve()
    resources = build_resources(str(storage_root))
    instance = _instance()
    selection = dg.AssetSelection.from_string(args.select) if args.select != "*" else dg.AssetSelection.all()
    phase_one, phase_two, phase_three = build_phases(ALL_ASSETS, selection)
    started = time.perf_counter()
    ok = _materialize(ALL_ASSETS, phase_one, resources, instance, _run_config(args, True))
    partitions_ok = failed_partitions = 0
    if phase_two:
        for key in scene_partition_keys(instance, storage_root):
            if _materialize(ALL_ASSETS, phase_two, resources, instance, _run_config(args, False), partition_key=key):
                partitions_ok += 1
            else:
                failed_partitions += 1
    ok = _materialize(ALL_ASSETS, phase_three, resources, instance, _run_config(args, False)) and ok
    elapsed = time.perf_counter() - started
    sys.stdout.write(summarize(storage_root) + "\n")
    sys.stdout.write(
        f"Built {len(phase_one) + len(phase_three)} assets"
        + (f" and {len(phase_two)} partitioned assets over {partitions_ok} partitions ({failed_partitions} failed)" if phase_two else "")
        + f" in {elapsed:.1f} s. Dagster UI: ./dev.sh dagster\n"
    )
    return 0 if ok and not failed_partitions else 1


if __name__ == "__main__":
    raise SystemExit(main())
