"""Speed of the object-phrase stage (``object_phrases`` with the ``openai`` backend), end to end.

`benchmarks/bench_llm.py` measures the client layer alone; this script measures the whole stage as
the asset runs it: prompts rendered from the question table, requests through the client layer,
answers parsed, the shared filter applied and the table built.

1. Throughput against the loopback OpenAI-compatible server (separate process) with a fixed latency
   (200 ms) at concurrency 32: the ideal is 160 questions/s; target at least 90% of it.
2. A fully cached rebuild of 10,000 questions (every answer already in the SQLite cache, the server
   unreachable): target at least 10,000 rows/s.

The server runs in a separate process (the script `tests/fakes/llm_servers.py`, started by path).

Usage::

    python benchmarks/bench_phrases.py [--latency 0.2] [--concurrency 32] [--questions 1600] [--cached-rows 10000]
    python benchmarks/bench_phrases.py --tiny    # seconds-long smoke run (explicit flags still win)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from assets.grounding.phrases import PhraseSettings, build_phrase_request, extract_object_phrases
from llm import LLMClient, LLMClientConfig
from llm.cache import CachedResponse
from llm.records import TokenUsage

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
SERVER_SCRIPT = REPOSITORY_ROOT / "tests" / "fakes" / "llm_servers.py"
TINY = {"latency": 0.02, "concurrency": 4, "questions": 16, "cached_rows": 50}
"""Defaults under `--tiny`: a smoke run of a few seconds."""

TEMPLATES = [
    (
        "If the {a} were moved 1 metre towards the camera, would it get closer to or farther from the {b}?",
        ["closer", "farther"],
    ),
    (
        "Imagine you stand at the {a} and face the {b}. Is the {c} on your left or on your right?",
        ["left", "right"],
    ),
    ("Which of these objects is closest to the camera?", ["{a}", "{b}", "{c}"]),
    (
        "If you walked from the camera to the {a}, what would be in your way?",
        ["{b}", "nothing, the way is clear"],
    ),
]
OBJECTS = [
    "gray vehicle",
    "boy in orange clothes",
    "red box",
    "green plant",
    "white lamp",
    "blue gear",
    "brown table",
]
ANSWER = ["the gray vehicle", "boy in orange clothes", "the left side", "camera", "distance"]


def make_questions(count: int) -> pl.DataFrame:
    """OmniSpatial-like questions (distinct texts) with options."""
    rows = []
    for number in range(count):
        template, options = TEMPLATES[number % len(TEMPLATES)]
        names = {
            key: f"{OBJECTS[(number + shift) % len(OBJECTS)]} {number}" for shift, key in enumerate("abc")
        }
        rows.append(
            {
                "question_id": f"omnispatial/{number}_0",
                "question": template.format(**names),
                "options": [option.format(**names) for option in options],
                "task_type": "Perspective_Taking",
                "sub_task_type": "Allocentric",
                "split": "train",
                "source": "omnispatial",
            }
        )
    return pl.DataFrame(rows)


def start_server(latency_s: float) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen(
        [sys.executable, str(SERVER_SCRIPT), "--protocol", "openai", "--latency", str(latency_s)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPOSITORY_ROOT,
    )
    return process, int(process.stdout.readline())


SETTINGS = PhraseSettings(backend="openai", send_image=False, skip_task_types=[])


def measure_throughput(arguments: argparse.Namespace, work_dir: Path) -> dict:
    server, port = start_server(arguments.latency)
    try:
        config = LLMClientConfig(
            base_url=f"http://127.0.0.1:{port}/v1",
            api_key="sk-benchmark",
            max_concurrency=arguments.concurrency,
            cache_path=work_dir / "throughput.sqlite",
        )
        with LLMClient(config) as client:
            extract_object_phrases(
                make_questions(arguments.concurrency).with_columns(
                    pl.col("question_id") + "-warm-up", pl.col("question") + " (warm-up)"
                ),
                SETTINGS,
                llm_client=client,
                progress=False,
            )
            questions = make_questions(arguments.questions)
            started = time.perf_counter()
            extraction = extract_object_phrases(questions, SETTINGS, llm_client=client, progress=False)
            elapsed = time.perf_counter() - started
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        server.stdout.close()
    ideal = arguments.concurrency / arguments.latency
    rate = extraction.frame.height / elapsed
    sys.stdout.write(
        f"stage throughput: {extraction.frame.height} questions, latency {arguments.latency * 1000:.0f} ms, "
        f"concurrency {arguments.concurrency}: {elapsed:.2f} s, {rate:.1f} questions/s = {100 * rate / ideal:.1f}% "
        f"of the ideal {ideal:.0f}/s (target >= 90%), quarantined {len(extraction.quarantine)}\n"
    )
    return {"questions_per_second": round(rate, 1), "share_of_ideal": round(rate / ideal, 3)}


def measure_cached_rebuild(arguments: argparse.Namespace, work_dir: Path) -> dict:
    questions = make_questions(arguments.cached_rows)
    config = LLMClientConfig(
        base_url="http://127.0.0.1:9/v1", api_key="sk-benchmark", cache_path=work_dir / "cached.sqlite"
    )
    with LLMClient(config) as client:
        for row in questions.iter_rows(named=True):
            request = build_phrase_request(row["question_id"], row["question"], row["options"], None)
            client.cache.put(
                CachedResponse(
                    client.cache_key(request),
                    "openai",
                    config.model,
                    request.template_name,
                    request.template_version,
                    "ok",
                    json.dumps({"phrases": ANSWER}),
                    {"phrases": ANSWER},
                    None,
                    TokenUsage(150, 20),
                    3.5e-5,
                    1,
                    0.0,
                )
            )
    with LLMClient(config) as client:
        started, started_cpu = time.perf_counter(), time.process_time()
        extraction = extract_object_phrases(questions, SETTINGS, llm_client=client, progress=False)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - started_cpu
        if client.summary.api_calls or extraction.frame.height != questions.height:
            raise RuntimeError("the cached rebuild made API calls or lost rows")
    rate = extraction.frame.height / elapsed
    sys.stdout.write(
        f"stage cached rebuild: {extraction.frame.height} questions: {elapsed:.3f} s, {rate:,.0f} rows/s "
        f"(target >= 10,000 rows/s); CPU {cpu:.3f} s\n"
    )
    return {"cached_rows_per_second": round(rate)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2, help="server latency in seconds")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument("--questions", type=int, default=1600, help="questions in the throughput run")
    parser.add_argument("--cached-rows", type=int, default=10_000, help="questions in the cached rebuild")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes for a smoke run")
    if parser.parse_known_args(argv)[0].tiny:
        parser.set_defaults(**TINY)
    arguments = parser.parse_args(argv)
    summary = {}
    with tempfile.TemporaryDirectory() as scratch:
        if not arguments.skip_throughput:
            summary.update(measure_throughput(arguments, Path(scratch)))
        summary.update(measure_cached_rebuild(arguments, Path(scratch)))
    sys.stdout.write(json.dumps(summary) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
