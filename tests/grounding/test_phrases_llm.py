"""The ``openai`` phrase backend against a loopback OpenAI-compatible server.

Faults are injected by the server (429 with Retry-After, 500, stalls past the timeout, truncated and
non-JSON bodies, answers that are not JSON of the schema): nothing is lost, nothing is paid twice
after a kill and a restart, and the API key never reaches an output, metadata, a log or the cache.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import polars as pl

from assets.grounding.assets import GROUNDING_ASSETS
from assets.grounding.phrases import PHRASES_PROMPT_NAME, PhraseSettings, extract_object_phrases
from assets.sources.assets import SOURCE_ASSETS
from data_contracts.storage import table_path
from model_clients import LLMClient, LLMClientConfig
from tests.fakes.llm_servers import Fault, LoopbackLLMServer, request_images, request_schema, request_text
from tests.grounding.conftest import TEST_API_KEY, asset_metadata, grounding_resources

ANSWERS = {
    "Is the red mug left of the laptop?": ["the red mug", "left side", "camera", "laptop"],
    "Which car is closer to the boy in orange clothes?": ["car", "boy in orange clothes", "distance"],
    "Where is the gray vehicle?": ["Gray vehicle", "direction"],
}


def answer_from_table(body: dict):
    """Answer the phrases listed for the question (unfiltered, as a model might), or an empty list."""
    question = request_text(body).splitlines()[0].removeprefix("Question: ")
    if question.startswith("Refuse"):
        return "Sorry, I cannot help with that."
    if question.startswith("Wrong shape"):
        return {"objects": ["cup"]}
    return {"phrases": ANSWERS.get(question, [])}


def _questions(texts: list[str], **extra) -> pl.DataFrame:
    rows = [
        {
            "question_id": f"q{index:03d}",
            "question": text,
            "options": [],
            "task_type": "Perspective_Taking",
            "sub_task_type": "Egocentric",
            "split": "train",
            "source": "omnispatial",
            **extra,
        }
        for index, text in enumerate(texts)
    ]
    return pl.DataFrame(rows)


def _client(server: LoopbackLLMServer, cache: Path, **overrides) -> LLMClient:
    settings = {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "base_url": server.base_url,
        "api_key": TEST_API_KEY,
        "cache_path": cache,
        "max_concurrency": 4,
        "backoff_base_s": 0.01,
        "backoff_max_s": 0.05,
        "timeout_s": 2.0,
        "seed": 0,
    }
    settings.update(overrides)
    return LLMClient(LLMClientConfig(**settings))


OPENAI = PhraseSettings(backend="openai", send_image=False)


def test_llm_answers_go_through_the_shared_filter(llm_server_factory, tmp_path, world_questions):
    server = llm_server_factory("openai", responder=answer_from_table)
    questions = world_questions.head(2).with_columns(
        pl.Series("question", list(ANSWERS)[:2]),
        pl.Series("task_type", ["Perspective_Taking", "Complex_Logic"]),
        pl.Series("sub_task_type", ["Egocentric", "Pattern_Recognition"]),
    )
    with _client(server, tmp_path / "cache.sqlite") as client:
        extraction = extract_object_phrases(
            questions, PhraseSettings(backend="openai"), llm_client=client, progress=False
        )
    assert extraction.frame["phrases"].to_list() == [["red mug", "laptop"], []]
    assert extraction.frame["extracted_phrases"][0].to_list() == ANSWERS[next(iter(ANSWERS))]
    assert extraction.frame["skipped"].to_list() == [False, True]  # pattern recognition: no call made
    assert server.hits == 1
    body = server.requests[0].body
    assert request_schema(body)["required"] == ["phrases"]
    assert len(request_images(body)) == 1  # the image goes with the prompt
    assert body["messages"][-1]["content"][0]["image_url"]["detail"] == "low"
    assert extraction.extractor == f"openai/gpt-4o-mini/{PHRASES_PROMPT_NAME}@v1"


def test_faults_are_retried_and_nothing_is_lost(llm_server_factory, tmp_path):
    server = llm_server_factory("openai", responder=answer_from_table)
    server.queue_faults(
        Fault.rate_limit(retry_after_s=0.05),
        Fault.server_error(500),
        Fault.timeout(delay_s=1.0),
        Fault.truncated(),
        Fault.non_json(),
    )
    texts = list(ANSWERS) + [f"Is box {index} near the shelf?" for index in range(5)]
    with _client(server, tmp_path / "cache.sqlite", timeout_s=0.5) as client:
        extraction = extract_object_phrases(_questions(texts), OPENAI, llm_client=client, progress=False)
        summary = client.summary
    assert extraction.frame.height == len(texts) and len(extraction.quarantine) == 0
    assert summary.retries >= 5 and summary.failures == 0
    assert extraction.frame["phrases"].to_list()[:3] == [
        ["red mug", "laptop"],
        ["car", "boy in orange clothes"],
        ["gray vehicle"],
    ]


def test_answers_outside_the_schema_are_asked_again_then_quarantined(llm_server_factory, tmp_path):
    server = llm_server_factory("openai", responder=answer_from_table)
    texts = ["Refuse this one", "Wrong shape here", "Where is the gray vehicle?"]
    with _client(server, tmp_path / "cache.sqlite") as client:
        extraction = extract_object_phrases(_questions(texts), OPENAI, llm_client=client, progress=False)
    assert extraction.frame["question_id"].to_list() == ["q002"]
    rows = extraction.quarantine.to_frame().sort("record_id")
    assert rows["record_id"].to_list() == ["q000", "q001"]
    assert all(reason.startswith("invalid_response") for reason in rows["reason"])
    assert json.loads(rows["payload_json"][0])["raw_text"] == "Sorry, I cannot help with that."
    assert server.hits == 2 + 2 + 1  # each bad answer asked twice, the good one once


def test_a_rebuild_is_served_from_the_cache(llm_server_factory, tmp_path):
    server = llm_server_factory("openai", responder=answer_from_table)
    questions = _questions(list(ANSWERS))
    with _client(server, tmp_path / "cache.sqlite") as client:
        first = extract_object_phrases(questions, OPENAI, llm_client=client, progress=False)
    hits = server.hits
    with _client(server, tmp_path / "cache.sqlite") as client:
        second = extract_object_phrases(questions, OPENAI, llm_client=client, progress=False)
        assert client.summary.cache_hits == len(ANSWERS) and client.summary.cost_usd == 0.0
    assert server.hits == hits
    assert first.frame.equals(second.frame)


WORKER = """
import sys
import polars as pl
from model_clients import LLMClient, LLMClientConfig
from assets.grounding.phrases import PhraseSettings, extract_object_phrases
questions = pl.read_parquet(sys.argv[1])
config = LLMClientConfig(provider="openai", model="gpt-4o-mini", base_url=sys.argv[2], api_key="sk-worker-key-123456",
                         cache_path=sys.argv[3], max_concurrency=2, timeout_s=10.0)
with LLMClient(config) as client:
    extract_object_phrases(questions, PhraseSettings(backend="openai", send_image=False), llm_client=client,
                           progress=False)
"""


def _cached_answers(path: Path) -> int:
    if not path.exists():
        return 0
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5) as connection:
        try:
            return connection.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        except sqlite3.OperationalError:
            return 0


def test_a_killed_run_resumes_without_paying_twice(llm_server_factory, tmp_path):
    server = llm_server_factory("openai", responder=answer_from_table, latency_s=0.15)
    texts = [f"Is the chair number {index} near the lamp?" for index in range(24)]
    questions = _questions(texts)
    questions.write_parquet(tmp_path / "questions.parquet")
    cache = tmp_path / "cache.sqlite"
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(tmp_path / "questions.parquet"), server.base_url, str(cache)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 90
    while _cached_answers(cache) < 4 and worker.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    worker.kill()
    worker.wait(timeout=30)
    committed = _cached_answers(cache)
    assert 4 <= committed < len(texts), worker.stderr.read().decode()[-2000:]

    with _client(server, cache, api_key="sk-worker-key-123456") as client:
        extraction = extract_object_phrases(questions, OPENAI, llm_client=client, progress=False)
        summary = client.summary
    assert extraction.frame.height == len(texts) and len(extraction.quarantine) == 0
    assert summary.cache_hits == committed  # every answer received before the kill is reused
    assert summary.api_calls == len(texts) - committed  # only the rest is asked (and paid) again


def _bytes_under(folder: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file())


def test_the_asset_with_the_openai_backend_never_leaks_the_key(
    llm_server_factory, tmp_path, small_world, caplog
):
    caplog.set_level("DEBUG")
    server = llm_server_factory("openai", api_key=TEST_API_KEY, responder=answer_from_table)
    server.queue_faults(Fault.echo_key_error(401))  # a gateway that repeats the key it was sent
    resources = grounding_resources(
        tmp_path,
        small_world,
        base_url=server.base_url,
        api_key=TEST_API_KEY,
        backoff_base_s=0.01,
        backoff_max_s=0.05,
    )
    result = dg.materialize(
        [*SOURCE_ASSETS, *GROUNDING_ASSETS],
        selection=[
            "mcq_questions",
            "mcq_images",
            "mcq_questions_quarantine",
            "object_phrases",
            "object_phrases_quarantine",
        ],
        resources=resources,
        run_config={  # one refusal in a handful of questions: a lenient threshold keeps the asset green
            "ops": {
                "object_phrases_asset": {
                    "config": {"backend": "openai", "skip_task_types": [], "max_failure_fraction": 0.5}
                }
            }
        },
    )
    assert result.success
    phrases = pl.read_parquet(table_path(tmp_path, "object_phrases"))
    quarantine = pl.read_parquet(table_path(tmp_path, "object_phrases_quarantine"))
    questions = pl.read_parquet(table_path(tmp_path, "mcq_questions")).filter(
        pl.col("source") == "omnispatial"
    )
    assert phrases.height + quarantine.height == questions.filter(pl.col("split") == "train").height
    assert quarantine.height == 1 and quarantine["reason"][0].startswith("rejected")
    metadata = asset_metadata(result)
    assert metadata["llm_api_calls"] >= phrases.height and metadata["llm_provider"] == "openai"
    key = TEST_API_KEY.encode()
    assert key not in _bytes_under(tmp_path)  # Parquet tables, previews, the response cache
    assert TEST_API_KEY not in str(result.all_events)
    assert TEST_API_KEY not in caplog.text
