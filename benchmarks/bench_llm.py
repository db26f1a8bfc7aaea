"""Speed of the LLM client layer against the loopback OpenAI-compatible server.

Two figures:

1. Throughput with a fixed server latency: `--concurrency` requests in flight against a server that
   answers after `--latency` seconds; the ideal is concurrency / latency requests per second (320 for
   64 and 200 ms). Target: at least 90% of the ideal. The client layer (`LLMClient.run_batch`: cache
   keys, estimate, SQLite cache, schema checks, retries) runs side by side with a minimal client (the
   same JSON bodies through `http.client`, one keep-alive connection per worker thread, no cache, no
   checks), interleaved `--repeats` times; each line gives the median rate and the CPU seconds this
   process spent per request (the server runs in its own process), and the last line the ratios.
2. A fully cached rebuild: `--cached-rows` requests whose answers are all in the SQLite cache go through
   `LLMClient.run_batch` (keys, batched lookups, results). Target: at least 10,000 rows per second.

The server runs in a separate process (the script `tests/fakes/llm_servers.py`, started by path),
as a real endpoint would.

    python benchmarks/bench_llm.py
    python benchmarks/bench_llm.py --latency 0.2 --concurrency 64 --requests 3200 --repeats 3 --cached-rows 10000
    python benchmarks/bench_llm.py --tiny        # seconds-long smoke run (explicit flags still win)
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
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
TINY = {"latency": 0.02, "concurrency": 4, "requests": 16, "cached_rows": 50, "repeats": 1}
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


@dataclass
class Run:
    """One throughput run: requests, wall seconds, CPU seconds of this process, failures."""

    requests: int
    elapsed_s: float
    cpu_s: float
    failures: int

    @property
    def rate(self) -> float:
        return self.requests / self.elapsed_s

    @property
    def cpu_ms_per_request(self) -> float:
        return 1000 * self.cpu_s / self.requests


def run_client_layer(port: int, arguments: argparse.Namespace, work_dir: Path, repeat: int) -> Run:
    """`LLMClient.run_batch` over fresh requests (a new cache file per repeat)."""
    config = LLMClientConfig(
        base_url=f"http://127.0.0.1:{port}/v1",
        api_key="sk-benchmark",
        max_concurrency=arguments.concurrency,
        cache_path=work_dir / f"throughput-{repeat}.sqlite",
    )
    with LLMClient(config) as client:
        warm_up = [LLMRequest("warm_up", "v1", f"warm {n}") for n in range(arguments.concurrency)]
        client.run_batch(warm_up, progress=False)
        requests = [phrase_request(number, None) for number in range(arguments.requests)]
        started, started_cpu = time.perf_counter(), time.process_time()
        results = client.run_batch(requests, progress=False)
        elapsed, cpu = time.perf_counter() - started, time.process_time() - started_cpu
    return Run(len(requests), elapsed, cpu, sum(not result.ok for result in results))


def minimal_body(number: int) -> bytes:
    """The JSON body the client layer sends for `phrase_request(number)`, built by hand."""
    body = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": phrase_request(number, None).prompt},
        ],
        "max_completion_tokens": 1024,
        "temperature": 0.0,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "response", "schema": PHRASES_SCHEMA, "strict": True},
        },
    }
    return json.dumps(body).encode("utf-8")


def run_minimal_client(port: int, arguments: argparse.Namespace) -> Run:
    """The same requests through `http.client`: one keep-alive connection per worker thread, nothing else."""
    local = threading.local()
    headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-benchmark"}

    def send(number: int) -> bool:
        connection = getattr(local, "connection", None)
        if connection is None:
            connection = local.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        connection.request("POST", "/v1/chat/completions", body=minimal_body(number), headers=headers)
        response = connection.getresponse()
        answer = json.loads(response.read())
        return response.status == 200 and bool(answer["choices"][0]["message"]["content"])

    with ThreadPoolExecutor(max_workers=arguments.concurrency) as pool:
        list(pool.map(send, range(arguments.concurrency)))  # warm up: one connection per thread
        started, started_cpu = time.perf_counter(), time.process_time()
        answered = list(pool.map(send, range(arguments.requests)))
        elapsed, cpu = time.perf_counter() - started, time.process_time() - started_cpu
    return Run(len(answered), elapsed, cpu, answered.count(False))


def _median(runs: list[Run]) -> Run:
    ordered = sorted(runs, key=lambda run: run.rate)
    middle = ordered[len(ordered) // 2]
    cpu = statistics.median(run.cpu_s for run in runs)
    return Run(middle.requests, middle.elapsed_s, cpu, sum(run.failures for run in runs))


def measure_throughput(arguments: argparse.Namespace, work_dir: Path) -> None:
    server, port = start_server(arguments.latency)
    layer_runs: list[Run] = []
    minimal_runs: list[Run] = []
    try:
        for repeat in range(arguments.repeats):  # interleaved, so both see the same machine load
            layer_runs.append(run_client_layer(port, arguments, work_dir, repeat))
            minimal_runs.append(run_minimal_client(port, arguments))
    finally:
        server.stdin.close()
        server.wait(timeout=30)
        server.stdout.close()
    ideal = arguments.concurrency / arguments.latency
    layer, minimal = _median(layer_runs), _median(minimal_runs)
    where = f"latency {arguments.latency * 1000:.0f} ms, concurrency {arguments.concurrency}"
    for name, run in (("throughput", layer), ("minimal client", minimal)):
        sys.stdout.write(
            f"{name}: {run.requests} requests, {where}: {run.elapsed_s:.2f} s, {run.rate:.1f} req/s = "
            f"{100 * run.rate / ideal:.1f}% of the ideal {ideal:.0f} req/s (target >= 90%), CPU "
            f"{run.cpu_ms_per_request:.2f} ms/request, failures {run.failures} (median of {arguments.repeats})\n"
        )
    sys.stdout.write(
        f"client layer / minimal client: rate {layer.rate / minimal.rate:.2f}x, CPU per request "
        f"{layer.cpu_ms_per_request / minimal.cpu_ms_per_request:.1f}x\n"
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
    parser.add_argument("--concurrency", type=int, default=64, help="requests in flight")
    parser.add_argument("--requests", type=int, default=3200, help="requests in each throughput run")
    parser.add_argument("--repeats", type=int, default=3, help="throughput runs of each client, interleaved")
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
