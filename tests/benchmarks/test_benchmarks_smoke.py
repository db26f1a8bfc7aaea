"""Every benchmark script runs at its `--tiny` sizes, exits 0 and prints its figures.

The scripts run as a user runs them (a subprocess, `python benchmarks/<script>.py --tiny`) from a
folder outside the repository. Nothing here checks a speed: the figures of a shared machine say
nothing in a smoke run; what is checked is that each figure is printed.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
NUMBER = r"[0-9][0-9,]*(?:\.[0-9]+)?"


def _json_last_line(keys: set[str]):
    def check(stdout: str) -> None:
        summary = json.loads(stdout.strip().splitlines()[-1])
        assert keys <= set(summary), f"the summary lacks {keys - set(summary)}"

    return check


# script -> (extra flags, figures that must appear in stdout, extra check of stdout or None)
CASES = {
    "bench_batch_waits": (
        [],
        [
            rf"^{stage} +{figure} +{NUMBER} +{NUMBER}$"
            for stage in ("stvqa_candidates", "stvqa_validated")
            for figure in ("sequential waits", "batches", "wall s")
        ],
        _json_last_line({"images", "batch_latency_s"}),
    ),
    "bench_publish_memory": (
        [],
        [
            rf"^ +{images} images +{questions} questions +{NUMBER} MiB images +{NUMBER} MiB shards +{NUMBER} shards "
            rf"+{NUMBER} s +{NUMBER} MiB peak RSS$"
            for images, questions in ((20, 60), (40, 120))
        ],
        _json_last_line({"side", "questions_per_image", "runs"}),
    ),
    "bench_build": (
        # The scan chain only (range runs with worker processes, what the CPU count must follow): the whole
        # graph built by spatial-build is test_build_cli's (here it took 114 s wall, the scan chain 53 s).
        ["--select", "+key:scene_geometry"],
        [
            rf"^wall s \(whole command\) +{NUMBER} +{NUMBER} +{NUMBER}$",
            rf"^graph s \(spatial-build's summary\) +{NUMBER} +{NUMBER} +{NUMBER}$",
            rf"^CPU s \(user \+ sys, every process of the build\) +{NUMBER} +{NUMBER} +{NUMBER}$",
            rf"^CPU s per scene +{NUMBER} +{NUMBER} +{NUMBER}$",
            r"^processes left behind \(killed after 5 s\) +[0-9]+ +0$",  # none of the new code's
        ],
        None,
    ),
    "bench_llm": (
        [],
        [
            rf"throughput: 16 requests, .*: {NUMBER} s, {NUMBER} req/s = {NUMBER}% of the ideal",
            rf"cached rebuild: 50 rows: {NUMBER} s, {NUMBER} rows/s",
        ],
        None,
    ),
    "bench_phrases": (
        [],
        [
            rf"stage throughput: 16 questions, .*{NUMBER} questions/s",
            rf"stage cached rebuild: 50 questions: {NUMBER} s, {NUMBER} rows/s",
        ],
        _json_last_line({"questions_per_second", "share_of_ideal", "cached_rows_per_second"}),
    ),
    "bench_rewards": (
        [],
        [
            rf"^{re.escape(name)}\s+{NUMBER}\s+{NUMBER}$"
            for name in (
                "spatialcore_reward",
                "spatialcore_reward + box_entropies",
                "spatialthinker_reward",
                "dge_reward",
            )
        ],
        None,
    ),
    "bench_grounding": (
        [],
        [rf"batch\s+1: +{NUMBER} images/s", rf"batch\s+2: +{NUMBER} images/s"],
        _json_last_line({"images_per_second", "speedup_over_batch_1", "parameters"}),
    ),
    "bench_sample_world": (
        [],
        [
            rf"^world +{NUMBER} s +{NUMBER} views/s +{NUMBER} MB",
            rf"^one 3-frame 160x120 scene +{NUMBER} s +{NUMBER} views/s",
        ],
        None,
    ),
    "bench_scan_layouts": (
        ["--work-dir", "{tmp_path}"],
        [
            rf"^{dataset} +3 +{NUMBER} +{NUMBER} +{NUMBER} +{NUMBER} +{NUMBER}$"
            for dataset in ("scannet", "arkitscenes", "scannetpp")
        ],
        None,
    ),
    "bench_dge": (
        ["--work-dir", "{tmp_path}"],
        [
            rf"^\| realistic {source} \| {stage} \| {NUMBER} \| {NUMBER} \| {NUMBER} \| {NUMBER} \| {NUMBER} \|$"
            for source in ("mesh", "instance_masks")
            for stage in ("fusion", "scene_geometry", "frame_visibility", r"\*\*geometry \+ visibility\*\*")
        ],
        None,
    ),
    "bench_dge_objects": (
        ["--work-dir", "{tmp_path}"],
        [
            rf"^\| {source} \| {NUMBER} \| {NUMBER} \| {NUMBER} \| {NUMBER} \| {NUMBER} \| {NUMBER} \| {NUMBER} of {NUMBER} \|$"
            for source in ("mesh", "instance_masks")
        ],
        None,
    ),
    "bench_ray": (
        # One cluster size: each size starts its own Ray cluster, and the loop over sizes is the same code.
        ["--workers", "2", "--images", "4", "--scenes", "1"],
        [
            rf"^local +{NUMBER} +{NUMBER}$",
            rf"^ray, 2 workers +{NUMBER} +{NUMBER}$",
            rf"^OmniSpatial projection \(.+-based\): 6900 images x {NUMBER} s/image .+ = {NUMBER} h$",
        ],
        _json_last_line({"results", "per_image_seconds", "projection_basis", "omnispatial_8_worker_hours"}),
    ),
    "bench_tick": (
        [],
        [
            r"partitions requested by the ticks: 0$",
            rf"^automation tick, nothing changed \(best\) +{NUMBER} s$",
            rf"^no-change tick in all \(observe \+ evaluate\) +{NUMBER} s$",
        ],
        None,
    ),
    "bench_scale": (
        ["--work-dir", "{tmp_path}/scale", "--profile-run"],
        [
            rf"observe \(new\): 6 scans x 8 files, warm, per file +{NUMBER} us$",
            rf"events: one range run over 4 partitions \(no work\) +{NUMBER} CPU-s, {NUMBER} ms per partition",
            rf"build \(new\): per scan \(slope\) +-?{NUMBER} CPU-s every process",
            rf"build \(new\): the run's process per scan, profiled +-?{NUMBER} of -?{NUMBER} CPU-s in the project's",
            rf"long scan: {NUMBER} frames at 160x120, {NUMBER} keyframes used +{NUMBER} CPU-s",
            rf"vg \(new\): one STVQA shard's rows \({NUMBER} of 40\) +{NUMBER} CPU-s, peak {NUMBER} MiB",
            rf"mcq \(new\): mcq_questions from 40 questions \(2 per image\) +{NUMBER} CPU-s",
            r"^Projection to the full data sets$",
        ],
        None,
    ),
    "bench_confidence_overhead": (
        [],
        [
            rf"^without confidence +{NUMBER} +{NUMBER} +{NUMBER}$",
            rf"^with confidence +{NUMBER} +{NUMBER} +{NUMBER}$",
            rf"^step-time ratio +{NUMBER} wall",
            rf"^peak-memory ratio {NUMBER}",
        ],
        None,
    ),
}
SLOW = {
    "bench_batch_waits",
    "bench_build",
    "bench_dge",
    "bench_dge_objects",
    "bench_grounding",
    "bench_confidence_overhead",
    "bench_ray",
    "bench_scale",
    "bench_tick",
}  # over ~10 s at tiny sizes on 2 shared cores
RAY = {"bench_ray"}  # starts local Ray clusters: needs the ray extra
# The slow cases may take longer than the suite's 300 s per test on a busy shared machine (bench_build runs
# spatial-build twice, bench_ray starts a Ray cluster).
SLOW_TIMEOUT_S = 1200


def _scripts() -> list[str]:
    return sorted(path.stem for path in BENCHMARKS.glob("bench_*.py"))


@pytest.mark.parametrize(
    "script",
    [
        pytest.param(
            name,
            marks=([pytest.mark.slow, pytest.mark.timeout(SLOW_TIMEOUT_S)] if name in SLOW else [])
            + ([pytest.mark.ray] if name in RAY else []),
        )
        for name in sorted(CASES)
    ],
)
def test_script_runs_at_tiny_sizes_and_prints_its_figures(script, tmp_path):
    if script in RAY:
        pytest.importorskip("ray", reason="the 'ray' extra is not installed: pip install -e '.[ray]'")
    flags, figures, check = CASES[script]
    command = [sys.executable, str(BENCHMARKS / f"{script}.py"), "--tiny"]
    command += [flag.format(tmp_path=tmp_path) for flag in flags]
    result = subprocess.run(
        command, capture_output=True, text=True, cwd=tmp_path, timeout=SLOW_TIMEOUT_S - 60, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]
    for figure in figures:
        assert re.search(figure, result.stdout, flags=re.MULTILINE), f"no {figure!r} in:\n{result.stdout}"
    if check is not None:
        check(result.stdout)


def test_every_script_has_a_smoke_run():
    assert _scripts() == sorted(CASES)


@pytest.mark.parametrize("script", _scripts())
def test_script_has_a_tiny_mode_and_leaves_sys_path_alone(script):
    source = (BENCHMARKS / f"{script}.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    assert ast.get_docstring(tree), f"{script} has no module docstring"
    assert '"--tiny"' in source, f"{script} has no --tiny flag"
    attributes = {
        f"{node.value.id}.{node.attr}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
    }
    assert "sys.path" not in attributes, f"{script} edits sys.path; the project is installed"
