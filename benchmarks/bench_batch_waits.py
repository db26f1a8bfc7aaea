"""Waits for batches per paid STVQA stage, old code against new, against servers with a fixed batch latency.

Builds ``scene_graphs`` of a sample world, then ``stvqa_candidates`` (Claude, Anthropic's Message Batches) and
``stvqa_validated`` (GPT-4o, OpenAI's Batch API), each as **one range run over every shard** (as a single-run
backfill or ``spatial-build`` runs them), with both LLM resources in ``mode: batch``, for two variants of the
code: the old one (a git revision, ``--baseline``, default ``HEAD``, exported with ``git archive``) and the new
one (this working tree, or ``--new``). Each variant runs in its own process with its own storage root, against
its own pair of loopback servers (``tests/fakes/llm_servers.py``, started by path, one process each) on which
every batch takes ``--batch-latency`` seconds from its creation to its end; the clients poll every
``--poll`` seconds. The servers answer the generation schema with a valid example and pass@2 with a letter.

Per stage and variant it prints:

- **sequential waits**: the longest chain of batches each created after the one before it ended (from the
  servers' own creation and end times): how many batch turnarounds the stage waited one after another;
- batches created, and requests in them;
- wall seconds of the stage's run.

With a real turnaround (minutes to 24 hours) the wall time is about the sequential waits times the turnaround.

    python benchmarks/bench_batch_waits.py                              # HEAD against the working tree, 12 scenes x 6 views, 2 s batches
    python benchmarks/bench_batch_waits.py --baseline REV --batch-latency 2 --poll 0.5
    python benchmarks/bench_batch_waits.py --tiny                       # smoke run: 2 scenes x 3 views, 0.3 s batches
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
SERVER_SCRIPT = REPOSITORY_ROOT / "tests" / "fakes" / "llm_servers.py"
STAGES = ("stvqa_candidates", "stvqa_validated")
PROTOCOL = {"stvqa_candidates": "anthropic", "stvqa_validated": "openai"}
TINY = {"scenes": 2, "views": 3, "batch_latency": 0.3, "poll": 0.05}
"""Defaults under ``--tiny``: a smoke run of seconds."""
API_KEY = "sk-bench-batch-waits"

RUN_STAGES = """
import json, sys, time
import dagster as dg
from assets.resources import LLMResource, SourcesResource, StorageResource, WorkersResource
from assets.sources.assets import scene_graphs_asset
from assets.stvqa.assets import stvqa_candidates_asset, stvqa_validated_asset
from assets.stvqa.shards import STVQA_SHARD_KEYS
from pipelines.cli import partition_range_tags
from pipelines.io_manager import ParquetIOManager

world, root, anthropic_url, openai_url, key, poll = sys.argv[1:7]
llm = {"api_key": key, "mode": "batch", "batch_poll_interval_s": float(poll), "storage_root": root}
resources = {
    "io_manager": ParquetIOManager(root=root),
    "storage": StorageResource(root=root),
    "sources": SourcesResource(sample_world_root=world),
    "workers": WorkersResource(max_workers=1),
    "stvqa_generator_llm": LLMResource(provider="anthropic", model="claude-sonnet-4-20250514", base_url=anthropic_url,
                                       max_concurrency=8, temperature=0.0, max_tokens=2048, **llm),
    "stvqa_judge_llm": LLMResource(provider="openai", model="gpt-4o", base_url=openai_url, image_detail="high",
                                   temperature=1.0, max_tokens=5, **llm),
}
assets = [scene_graphs_asset, stvqa_candidates_asset, stvqa_validated_asset]
assert dg.materialize([scene_graphs_asset], resources=resources).success
times = {}
for asset, name, backend in ((stvqa_candidates_asset, "stvqa_candidates", "anthropic"),
                             (stvqa_validated_asset, "stvqa_validated", "openai")):
    started = time.perf_counter()
    result = dg.materialize(assets, selection=[asset], resources=resources,
                            run_config={"ops": {name + "_asset": {"config": {"backend": backend}}}},
                            tags=partition_range_tags(STVQA_SHARD_KEYS[0], STVQA_SHARD_KEYS[-1]))
    times[name] = {"wall_s": time.perf_counter() - started, "success": result.success}
sys.stdout.write(json.dumps(times) + "\\n")
"""
"""What a variant runs (with its code first on ``PYTHONPATH``): ``scene_graphs``, then each paid stage as one
range run over the 32 shards; prints the stages' wall seconds as one JSON line."""


def export_revision(revision: str, folder: Path) -> Path:
    """The repository's files at ``revision``, unpacked into ``folder``."""
    folder.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(REPOSITORY_ROOT), "archive", revision], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def code_of(role: str, given: str | None, work: Path) -> tuple[str, Path]:
    """A variant's name and folder: the working tree (``given`` None), a folder, or an exported git revision."""
    if given is None:
        return f"{role} (working tree)", REPOSITORY_ROOT
    if Path(given).is_dir():
        return f"{role} ({Path(given).resolve().name})", Path(given).resolve()
    return f"{role} ({given})", export_revision(given, work / f"{role}_code")


class Server:
    """A loopback server process (this repository's fake) with a fixed batch latency."""

    def __init__(self, protocol: str, batch_latency: float) -> None:
        command = [sys.executable, str(SERVER_SCRIPT), "--protocol", protocol, "--responder", "letters"]
        command += ["--batch-latency", str(batch_latency)]
        self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        port = int(self.process.stdout.readline())
        self.base_url = f"http://127.0.0.1:{port}" + ("/v1" if protocol == "openai" else "")

    def stop(self) -> list[dict]:
        """Stop serving; the batches it ran (creation and end times)."""
        self.process.stdin.close()
        summary = json.loads(self.process.stdout.readline())
        self.process.wait(timeout=30)
        self.process.stdout.close()
        return summary["batches"]


def sequential_waits(batches: list[dict]) -> int:
    """The longest chain of batches, each created after the previous one ended.

    >>> sequential_waits([{"created_at": 0, "ended_at": 2}, {"created_at": 0.1, "ended_at": 2.1},
    ...                   {"created_at": 2.2, "ended_at": 4.2}])
    2
    """
    chain: list[tuple[float, float, int]] = []
    for batch in sorted(batches, key=lambda item: item["created_at"]):
        ended = batch["ended_at"] if batch["ended_at"] is not None else float("inf")
        before = [length for _, end, length in chain if end <= batch["created_at"]]
        chain.append((batch["created_at"], ended, 1 + max(before, default=0)))
    return max((length for _, _, length in chain), default=0)


def run_variant(name: str, code: Path, world: Path, work: Path, args: argparse.Namespace) -> dict[str, dict]:
    """One variant's stages against fresh servers: per stage, waits, batches, requests and wall seconds."""
    servers = {protocol: Server(protocol, args.batch_latency) for protocol in ("anthropic", "openai")}
    root = work / f"storage_{len(list(work.glob('storage_*')))}"
    try:
        environment = {**os.environ, "PYTHONPATH": str(code), "DAGSTER_HOME": str(root / "dagster_home")}
        (root / "dagster_home").mkdir(parents=True)
        result = subprocess.run(
            [
                sys.executable,
                "-c",
                RUN_STAGES,
                str(world),
                str(root),
                servers["anthropic"].base_url,
                servers["openai"].base_url,
                API_KEY,
                str(args.poll),
            ],
            env=environment,
            cwd=work,
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        batches = {protocol: server.stop() for protocol, server in servers.items()}
    if result.returncode != 0:
        raise SystemExit(f"{name} failed:\n{result.stderr[-3000:]}")
    times = json.loads(result.stdout.strip().splitlines()[-1])
    figures = {}
    for stage in STAGES:
        ran = batches[PROTOCOL[stage]]
        if not times[stage]["success"]:
            raise SystemExit(f"{name}: {stage} failed:\n{result.stderr[-3000:]}")
        figures[stage] = {
            "waits": sequential_waits(ran),
            "batches": len(ran),
            "requests": sum(batch["requests"] for batch in ran),
            "wall_s": times[stage]["wall_s"],
        }
        sys.stdout.write(
            f"{name}: {stage}: {figures[stage]['waits']} sequential waits, {figures[stage]['batches']} batches, "
            f"{figures[stage]['requests']} requests, {figures[stage]['wall_s']:.1f} s\n"
        )
    return figures


def make_world(folder: Path, scenes: int, views: int) -> tuple[Path, int]:
    """A sample world (this tree's generator) and its number of Visual-Genome-like images."""
    from assets.sample_world import SampleWorldConfig, generate_sample_world

    root = folder / "sample_world"
    generate_sample_world(
        SampleWorldConfig(root=root, num_scenes=scenes, views_per_scene=views, show_progress=False)
    )
    images = json.loads((root / "visual_genome" / "image_data.json").read_text())
    return root, len(images)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline", default="HEAD", help="The old code: a git revision or a folder (default HEAD)."
    )
    parser.add_argument(
        "--new", default=None, help="The new code: a revision or a folder (default: working tree)."
    )
    parser.add_argument("--scenes", type=int, default=12, help="Sample world: scenes (default 12).")
    parser.add_argument("--views", type=int, default=6, help="Sample world: views per scene (default 6).")
    parser.add_argument(
        "--batch-latency", type=float, default=2.0, help="Seconds from a batch's creation to its end."
    )
    parser.add_argument("--poll", type=float, default=0.5, help="The clients' batch_poll_interval_s.")
    parser.add_argument("--tiny", action="store_true", help="Tiny sizes for a smoke run.")
    if parser.parse_known_args(argv)[0].tiny:
        parser.set_defaults(**TINY)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_batch_waits_") as directory:
        work = Path(directory)
        world, images = make_world(work, args.scenes, args.views)
        variants = [code_of("old", args.baseline, work), code_of("new", args.new, work)]
        sys.stdout.write(
            f"{args.scenes} scenes x {args.views} views: {images} scene-graph images; every batch takes "
            f"{args.batch_latency:g} s, clients poll every {args.poll:g} s; one range run over the 32 shards per stage\n"
        )
        figures = {name: run_variant(name, code, world, work, args) for name, code in variants}
    (old, old_figures), (new, new_figures) = figures.items()
    sys.stdout.write(f"\n{'stage':<18}{'':<22}{old:>28}{new:>28}\n")
    for stage in STAGES:
        for key, label, unit in (
            ("waits", "sequential waits", "{:.0f}"),
            ("batches", "batches", "{:.0f}"),
            ("wall_s", "wall s", "{:.1f}"),
        ):
            old_value = unit.format(old_figures[stage][key])
            new_value = unit.format(new_figures[stage][key])
            sys.stdout.write(f"{stage:<18}{label:<22}{old_value:>28}{new_value:>28}\n")
    sys.stdout.write(json.dumps({"images": images, "batch_latency_s": args.batch_latency, **figures}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
