"""Speed of the LLM client layer against the loopback OpenAI-compatible server.

Two figures (targets from the SpatialCORE pseudo-GT issue):

1. Throughput with a fixed server latency: `--concurrency` requests in flight against a server that
   answers after `--latency` seconds; the ideal is concurrency / latency requests per second (160 for
   32 and 200 ms). Target: at least 90% of the ideal.
2. A fully cached rebuild: `--cached-rows` requests whose answers are all in the SQLite cache go through
   `LLMClient.run_batch` (keys, batched lookups, results). Target: at least 10,000 rows per second.

The server runs in a separate process (the script `tests/fakes/llm_servers.py`, started by path),
as a real endpoint would.

    python benchmarks/bench_llm.py
    python benchmarks/bench_llm.py --latency 0.2 --concurrency 32 --requests 1600 --cached-rows 10000
    python benchmarks/bench_llm.py --tiny        # seconds-long smoke run (explicit flags still win)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from model_clients import LLMClient, LLMClientConfig, LLMRequest
from model_clients.cache import CachedResponse
from model_clients.records import TokenUsage

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
SERVER_SCRIPT = REPOSITORY_ROOT / "tests" / "fakes" / "llm_servers.py"
PHRASES_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["phrases"],
    "properties": {"phrases": {"type": "array", "items": {"type": "string"}}},
}
TINY = {"latency": 0.02, "concurrency": 4, "requests": 16, "cached_rows": 50}
"""Defaults under `--tiny`: a smoke run of a few seconds."""
SYSTEM_PROMPT = (
    "Extract the physical objects and persons mentioned in the question and the options. Keep modifiers that "
    "tell instances apart; drop directions, distances and other non-visual words."
)


def phrase_request(number: int, image: bytes | None) -> LLMRequest:
    question = (
        f"Question {number}: is the gray vehicle to the left of the boy in orange clothes? A. yes B. no"
    )
    return LLMRequest(
        "object_phrases",
        "v1",
        question,
        system=SYSTEM_PROMPT,
        schema=PHRASES_SCHEMA,
        images=[image] if image else [],
        request_id=f"q{number}",
    )


def start_server(latency_s: float) -> tuple[subprocess.Popen, int]:
    process = subprocess.Popen(
        [sys.executable, str(SERVER_SCRIPT), "--protocol", "openai", "--latency", str(latency_s)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPOSITORY_ROOT,
    )
    return process, int(process.stdout.readline())


def measure_throughput(arguments: argparse.Namespace, work_dir: Path) -> None:
    server, port = start_server(arguments.latency)
    try:
        config = LLMClientConfig(
            base_url=f"http://127.0.0.1:{port}/v1",
            api_key="sk-benchmark",
            max_concurrency=arguments.concurrency,
            cache_path=work_dir / "throughput.sqlite",
        )
        with LLMClient(config) as client:
            warm_up = [LLMRequest("warm_up", "v1", f"warm {n}") for n in range(arguments.concurrency)]
            client.run_batch(warm_up, progress=False)
            requests = [phrase_request(number, None) for number in range(arguments.requests)]
            started = time.perf_counter()
            results = client.run_batch(requests, progress=False)
            elapsed = time.perf_counter() - started
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        server.stdout.close()
    failures = sum(not result.ok for result in results)
    ideal = arguments.concurrency / arguments.latency
    rate = len(requests) / elapsed
    sys.stdout.write(
        f"throughput: {len(requests)} requests, latency {arguments.latency * 1000:.0f} ms, concurrency "
        f"{arguments.concurrency}: {elapsed:.2f} s, {rate:.1f} req/s = {100 * rate / ideal:.1f}% of the ideal "
        f"{ideal:.0f} req/s (target >= 90%), failures {failures}\n"
    )


def measure_cached_rebuild(arguments: argparse.Namespace, work_dir: Path) -> None:
    image = bytes(range(256)) * (arguments.image_kib * 4) if arguments.image_kib else None
    if image is not None:
        image = b"\x89PNG\r\n\x1a\n" + image
    config = LLMClientConfig(
        base_url="http://127.0.0.1:9/v1", api_key="sk-benchmark", cache_path=work_dir / "cached.sqlite"
    )
    requests = [phrase_request(number, image) for number in range(arguments.cached_rows)]
    with LLMClient(config) as client:
        for request in requests:
            client.cache.put(
                CachedResponse(
                    client.cache_key(request),
                    "openai",
                    config.model,
                    request.template_name,
                    request.template_version,
                    "ok",
                    '{"phrases": ["gray vehicle", "boy in orange clothes"]}',
                    {"phrases": ["gray vehicle", "boy in orange clothes"]},
                    None,
                    TokenUsage(120, 14),
                    2.6e-5,
                    1,
                    0.0,
                )
            )
    fresh_requests = [phrase_request(number, image) for number in range(arguments.cached_rows)]
    with LLMClient(config) as client:
        started, started_cpu = time.perf_counter(), time.process_time()
        results = client.run_batch(fresh_requests, progress=arguments.progress)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - started_cpu
    if not all(result.cached and result.ok for result in results):
        raise RuntimeError("the cached rebuild made API calls: the cache keys are not stable")
    image_note = f", one {arguments.image_kib} KiB image per row" if image else ""
    sys.stdout.write(
        f"cached rebuild: {len(results)} rows{image_note}: {elapsed:.3f} s, {len(results) / elapsed:,.0f} rows/s "
        f"(target >= 10,000 rows/s); CPU {cpu:.3f} s = {len(results) / cpu:,.0f} rows per CPU-second\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.2, help="server latency in seconds")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument("--requests", type=int, default=1600, help="requests in the throughput run")
    parser.add_argument("--cached-rows", type=int, default=10_000, help="rows in the cached rebuild")
    parser.add_argument(
        "--image-kib", type=int, default=0, help="attach an image of this size to cached rows"
    )
    parser.add_argument("--progress", action="store_true", help="show the progress bar in the cached rebuild")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-cached", action="store_true")
    parser.add_argument("--tiny", action="store_true", help="tiny sizes for a smoke run")
    if parser.parse_known_args(argv)[0].tiny:
        parser.set_defaults(**TINY)
    arguments = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench_llm_") as directory:
        if not arguments.skip_throughput:
            measure_throughput(arguments, Path(directory))
        if not arguments.skip_cached:
            measure_cached_rebuild(arguments, Path(directory))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
