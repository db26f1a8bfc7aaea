"""Quality of the offline object-phrase extractor, and speed of the ``openai`` phrase stage end to end.

0. Precision and recall of the offline (``spacy``) backend on the labelled spatial questions of
   `tests/grounding/fixtures/phrase_questions.jsonl` (see its README), with and without the object
   vocabulary: the rule-based chunker always, and the installed trained spaCy pipeline when there is
   one (not under `--tiny`). Phrase match = the whole phrase; head match = the head noun.

`benchmarks/bench_llm.py` measures the client layer alone; the next two measure the whole ``openai``
stage as the asset runs it: prompts rendered from the question table, requests through the client
layer, answers parsed, the shared filter applied and the table built.

1. Throughput against the loopback OpenAI-compatible server (separate process) with a fixed latency
   (200 ms) at concurrency 32: the ideal is 160 questions/s; target at least 90% of it.
2. A fully cached rebuild of 10,000 questions (every answer already in the SQLite cache, the server
   unreachable): target at least 10,000 rows/s.

The server runs in a separate process (the script `tests/fakes/llm_servers.py`, started by path).

Usage::

    python benchmarks/bench_phrases.py [--latency 0.2] [--concurrency 32] [--questions 1600] [--cached-rows 10000]
    python benchmarks/bench_phrases.py --tiny    # seconds-long smoke run (explicit flags still win)
    python benchmarks/bench_phrases.py --quality-only    # only the precision/recall figures
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

from assets.grounding.object_vocabulary import default_object_vocabulary
from assets.grounding.phrase_quality import evaluate_extractor, load_labelled_questions
from assets.grounding.phrases import (
    OfflinePhraseBackend,
    PhraseSettings,
    RuleBasedChunker,
    SpacyNounChunker,
    build_phrase_request,
    extract_object_phrases,
    load_offline_extractor,
)
from model_clients import LLMClient, LLMClientConfig
from model_clients.cache import CachedResponse
from model_clients.records import TokenUsage

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
SERVER_SCRIPT = REPOSITORY_ROOT / "tests" / "fakes" / "llm_servers.py"
LABELLED_QUESTIONS = REPOSITORY_ROOT / "tests" / "grounding" / "fixtures" / "phrase_questions.jsonl"
TINY = {"latency": 0.02, "concurrency": 4, "questions": 16, "cached_rows": 50, "spacy_quality": False}
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


def _quality_extractors(with_spacy: bool) -> list:
    """The rule-based chunker, and the installed trained spaCy pipeline when asked for and present."""
    extractors = [RuleBasedChunker()]
    if with_spacy:
        installed = load_offline_extractor(None)
        if isinstance(installed, SpacyNounChunker):
            extractors.append(installed)
        else:
            sys.stdout.write("phrase quality: no trained spaCy pipeline installed; rules only\n")
    return extractors


def measure_quality(arguments: argparse.Namespace) -> dict:
    """Precision and recall of the offline backend on the labelled questions (all, and the held-out split)."""
    questions = load_labelled_questions(LABELLED_QUESTIONS)
    summary = {}
    for extractor in _quality_extractors(arguments.spacy_quality):
        for vocabulary in (None, default_object_vocabulary()):
            backend = OfflinePhraseBackend(extractor, vocabulary)
            for split in ("all", "held_out"):
                selected = [item for item in questions if split in ("all", item.split)]
                started = time.perf_counter()
                scores = evaluate_extractor(selected, backend.phrases)
                elapsed = time.perf_counter() - started
                phrase, head = scores["phrase"], scores["head"]
                sys.stdout.write(
                    f"phrase quality {backend.name:<40} {split:<8} {len(selected):>3} questions: phrase "
                    f"P {phrase.precision:.3f} R {phrase.recall:.3f} (TP {phrase.true_positives}, FP "
                    f"{phrase.false_positives}, FN {phrase.false_negatives}); head P {head.precision:.3f} "
                    f"R {head.recall:.3f}; {1000 * elapsed / max(len(selected), 1):.2f} ms/question\n"
                )
                if split == "all":
                    prefix = f"{extractor.name.split('@')[0].split('/')[0]}_{'objects' if vocabulary else 'all_nouns'}"
                    summary[f"{prefix}_precision"] = round(phrase.precision, 4)
                    summary[f"{prefix}_recall"] = round(phrase.recall, 4)
    return summary


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
    parser.add_argument("--quality-only", action="store_true", help="only the precision/recall figures")
    parser.add_argument(
        "--no-spacy-quality",
        dest="spacy_quality",
        action="store_false",
        help="measure the rule-based chunker only, even when a trained spaCy pipeline is installed",
    )
    parser.add_argument("--tiny", action="store_true", help="tiny sizes for a smoke run")
    if parser.parse_known_args(argv)[0].tiny:
        parser.set_defaults(**TINY)
    arguments = parser.parse_args(argv)
    summary = measure_quality(arguments)
    if arguments.quality_only:
        sys.stdout.write(json.dumps(summary) + "\n")
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        if not arguments.skip_throughput:
            summary.update(measure_throughput(arguments, Path(scratch)))
        summary.update(measure_cached_rebuild(arguments, Path(scratch)))
    sys.stdout.write(json.dumps(summary) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
