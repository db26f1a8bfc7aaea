"""``max_cost_usd`` caps what the STVQA stages spend, against the loopback servers in batch mode.

Before the first request a stage is checked against its upper bound: every round (pass@2's second round for every
question, generation's re-ask of every image) and every re-ask of an unusable answer; a budget above round 1 but
below that bound is refused with nothing sent (the case where a $0.035 cap with a $0.031 round-1 estimate spent
$0.048). While it runs, no batch goes out that could take the spend past the cap (its prompts and whole
``max_tokens``): a stage whose answers are longer than the estimate foresaw stops before its next round with one
sentence (spent, estimate, cap), the answers already paid stay cached, and a re-run pays only for the rest.
"""

from __future__ import annotations

import hashlib

import pytest

from assets.stvqa.generate import QuestionGenerationSettings, generate_candidates, generation_task
from assets.stvqa.pass_at_2 import PassAt2Settings, pass_at_2_task, run_pass_at_2
from model_clients import BudgetExceededError
from model_clients.pricing import format_usd
from tests.fakes.llm_servers import hide_cached_answers, request_text
from tests.stvqa.helpers import RELATION_ITEM

BATCH = {"mode": "batch", "batch_poll_interval_s": 0.02, "batch_sync_reask_max": 0}
PASS_AT_2 = PassAt2Settings(backend="openai")
GENERATION = QuestionGenerationSettings(backend="anthropic", questions_per_image=2)


def judge(body: dict) -> str:
    """Right, wrong, or no letter at all (asked again, then quarantined), from a hash of the question."""
    digest = hashlib.sha256(request_text(body).encode()).hexdigest()
    return ["A", "B", "Let me think about it"][int(digest, 16) % 3]


@pytest.fixture(scope="module")
def candidates(sample_scene_graphs, sample_geometry):
    settings = QuestionGenerationSettings(questions_per_image=3)
    return generate_candidates(sample_scene_graphs, settings, sample_geometry, progress=False).candidates


def _one_sentence(message: str) -> None:
    assert message.endswith(".") and ". " not in message and "\n" not in message


def test_pass_at_2_budget_counts_round_2_and_the_reasks_before_the_first_request(
    candidates, sample_scene_graphs, llm_server_factory, make_llm_client
):
    server = llm_server_factory("openai", responder=judge)
    probe = make_llm_client(server, **BATCH)
    first, later = pass_at_2_task(candidates, sample_scene_graphs, PASS_AT_2, None, probe).planned_requests()
    round_1 = probe.estimate(first).cost_usd
    bound = probe.estimate(first, later=later).upper_bound_usd
    assert len(later) == len(first) and bound == pytest.approx(
        4 * round_1, rel=0.01
    )  # 2 rounds, 1 re-ask each

    cap = 1.1 * round_1  # above round 1, below what both rounds and their re-asks could cost
    client = make_llm_client(server, max_cost_usd=cap, **BATCH)
    with pytest.raises(BudgetExceededError) as raised:
        run_pass_at_2(candidates, sample_scene_graphs, PASS_AT_2, client=client, progress=False)
    message = str(raised.value)
    _one_sentence(message)
    assert message.startswith(
        f"pass@2 could cost up to {format_usd(bound)} ({len(first)} uncached requests and "
    )
    assert f"above max_cost_usd {format_usd(cap)}: nothing was sent" in message
    assert "use mode: batch" not in message  # the stage is in batch mode already
    assert server.hits == 0

    within = make_llm_client(server, max_cost_usd=bound, **BATCH)
    output = run_pass_at_2(candidates, sample_scene_graphs, PASS_AT_2, client=within, progress=False)
    assert set(output.attempts["round"].to_list()) == {1, 2}  # round 2 ran
    assert max(server.batches.asked.values()) == 2  # and the replies with no letter were asked again
    assert within.summary.cost_usd <= bound and within.spent_usd == pytest.approx(within.summary.cost_usd)


def _long_answers_with_a_broken_item(body: dict) -> dict:
    """A long valid item and one with duplicate options (asked again); the re-ask gets two valid items."""
    long = {
        **RELATION_ITEM,
        "question": "Where is the chair " + "really " * 800 + "with respect to the table?",
    }
    if "previous answer" in request_text(body):
        return {"questions": [long, RELATION_ITEM]}
    return {"questions": [long, {**RELATION_ITEM, "options": ["left of", "left of"]}]}


def test_generation_stops_before_a_round_that_could_pass_the_cap(
    sample_scene_graphs, sample_geometry, llm_server_factory, make_llm_client, tmp_path
):
    # Earlier answers of the template were short: the estimate's observed mean is far below these answers.
    cache = tmp_path / "cache.sqlite"
    short = llm_server_factory("anthropic", responder=lambda body: {"questions": [RELATION_ITEM]})
    generate_candidates(
        sample_scene_graphs,
        GENERATION,
        sample_geometry,
        make_llm_client(short, cache_path=cache),
        progress=False,
    )
    hide_cached_answers(cache)

    server = llm_server_factory("anthropic", responder=_long_answers_with_a_broken_item)
    fresh = make_llm_client(server, cache_path=tmp_path / "fresh.sqlite", **BATCH)
    first, _ = generation_task(sample_scene_graphs, GENERATION, sample_geometry, fresh).planned_requests()
    worst_round = fresh.estimate(first).cost_usd  # no answers in that cache: prompts and whole max_tokens
    cap = 1.2 * worst_round  # round 1 fits at its worst; round 1 plus the re-ask round could not

    client = make_llm_client(server, cache_path=cache, max_cost_usd=cap, **BATCH)
    with pytest.raises(BudgetExceededError) as raised:
        generate_candidates(sample_scene_graphs, GENERATION, sample_geometry, client, progress=False)
    message = str(raised.value)
    _one_sentence(message)
    assert message.startswith("stvqa generation (re-ask) could cost up to $")
    assert (
        f"on top of {format_usd(client.spent_usd)} already spent ({len(first)} uncached requests" in message
    )
    assert f"above max_cost_usd {format_usd(cap)}: nothing more was sent" in message
    assert "the answers already paid stay in the response cache" in message
    assert len(server.batches.batches) == 1  # round 1 went out; the re-ask round did not
    assert 0 < client.spent_usd <= cap  # what was paid stays under the cap

    # A re-run with a higher budget pays only for the re-asks: round 1 comes from the cache.
    again = make_llm_client(server, cache_path=cache, max_cost_usd=10 * cap, **BATCH)
    output = generate_candidates(sample_scene_graphs, GENERATION, sample_geometry, again, progress=False)
    assert output.candidates.height == 2 * sample_scene_graphs.height
    first_ids = {custom_id for custom_id, _ in next(iter(server.batches.batches.values())).items}
    second = list(server.batches.batches.values())[1]
    assert len(server.batches.batches) == 2 and not first_ids & {custom_id for custom_id, _ in second.items}
    assert all("previous answer" in request_text(body) for _, body in second.items)
