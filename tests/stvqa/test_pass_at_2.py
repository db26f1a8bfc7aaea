"""The pass@2 filter: the offline solver on the sample world, and the OpenAI protocol with scripted answers."""

import json

import polars as pl
import pytest

from assets.stvqa.generate import QuestionGenerationSettings, generate_candidates
from assets.stvqa.pass_at_2 import PassAt2Settings, parse_answer_letter, rethreshold, run_pass_at_2
from data_contracts.stvqa_validated import StvqaPassAtTwoAttempts, StvqaValidated
from data_contracts.validation import check_frame
from tests.fakes.llm_servers import Fault, request_images, request_text


@pytest.fixture(scope="module")
def template_candidates(sample_scene_graphs, sample_geometry):
    settings = QuestionGenerationSettings(questions_per_image=8)
    return generate_candidates(sample_scene_graphs, settings, sample_geometry, progress=False).candidates


def test_every_template_question_survives_the_solver(
    template_candidates, sample_scene_graphs, sample_geometry
):
    output = run_pass_at_2(
        template_candidates, sample_scene_graphs, PassAt2Settings(), sample_geometry, progress=False
    )
    assert output.stats["retention"] == 1.0
    assert output.validated.height == template_candidates.height
    assert set(output.validated["first_correct_attempt"]) == {1}
    assert output.attempts.height == 2 * template_candidates.height  # one round of two tries each
    assert check_frame(output.validated, StvqaValidated).passed
    assert check_frame(output.attempts, StvqaPassAtTwoAttempts).passed


def test_solver_without_geometry_does_not_guess(template_candidates, sample_scene_graphs):
    output = run_pass_at_2(template_candidates, sample_scene_graphs, PassAt2Settings(), None, progress=False)
    metric = template_candidates.filter(
        pl.col("template").is_in(["distance.compare", "orientation.perspective"])
    )
    assert metric.height > 0
    dropped = set(template_candidates["question_id"]) - set(output.validated["question_id"])
    assert set(metric["question_id"]) <= dropped  # unsettled without geometry: abstained, four attempts each
    abstained = output.attempts.filter(pl.col("question_id").is_in(metric["question_id"]))
    assert set(abstained["status"]) == {"abstained"} and abstained.height == 4 * metric.height


@pytest.mark.parametrize(
    ("text", "option_count", "letter"),
    [
        ("B", 4, "B"),  # bare letter
        (" (c). ", 4, "C"),  # bracketed, lower case, full stop
        ("**D**", 4, "D"),  # bold
        ("A bit to the left", 4, None),  # prose starting with "A" is not an answer
        ("D", 3, None),  # outside three options
        ("The answer is B", 4, None),  # not only the letter
        (None, 2, None),  # no reply
    ],
)
def test_parse_answer_letter(text, option_count, letter):
    assert parse_answer_letter(text, option_count) == letter


def _scripted_judge(script):
    """Responder: the reply for (question text, try index) from `script`, by how often the question was seen."""
    seen = {}

    def respond(body):
        text = request_text(body)
        question = text.split("Question: ", 1)[1].split("\n", 1)[0]
        count = seen.get(question, 0)
        seen[question] = count + 1
        return script(question, count)

    return respond


def test_openai_pass_at_2_rounds(
    llm_server_factory, make_llm_client, template_candidates, sample_scene_graphs
):
    sample = template_candidates.head(3)
    first, second, third = sample.iter_rows(named=True)
    wrong = {
        row["question"]: next(letter for letter in "AB" if letter != row["answer"])
        for row in (first, second, third)
    }

    def script(question, count):
        if question == first["question"]:
            return first["answer"]  # right on the first try
        if question == second["question"]:
            return second["answer"] if count == 2 else wrong[question]  # right on the third try
        return "A bit unsure" if count == 0 else wrong[question]  # garbage, asked again, then never right

    server = llm_server_factory("openai", responder=_scripted_judge(script))
    client = make_llm_client(server, max_concurrency=1)  # tries arrive in order, so the script can count them
    output = run_pass_at_2(
        sample, sample_scene_graphs, PassAt2Settings(backend="openai"), client=client, progress=False
    )

    assert server.hits == 2 + 4 + 5  # the garbage reply is asked again once
    assert output.validated["question_id"].to_list() == [first["question_id"], second["question_id"]]
    kept = {row["question_id"]: row for row in output.validated.iter_rows(named=True)}
    assert kept[first["question_id"]]["pass_at_2_attempts"] == 2
    assert kept[second["question_id"]]["first_correct_attempt"] == 3
    assert output.stats == {**output.stats, "kept": 2, "filtered_out": 1, "retention": round(2 / 3, 4)}
    attempts = output.attempts.filter(pl.col("question_id") == third["question_id"]).sort("attempt")
    assert attempts["status"].to_list() == ["answered"] * 4  # "A bit unsure" is never read as "A"
    assert attempts["round"].to_list() == [1, 1, 2, 2]
    assert attempts["answer"].to_list() == [wrong[third["question"]]] * 4
    body = server.requests[0].body
    image_block = body["messages"][-1]["content"][0]
    assert image_block["image_url"]["detail"] == "high" and request_images(body)[0].startswith(b"\xff\xd8")
    assert "Reply with only the letter" in request_text(body) and body["temperature"] == 1.0
    assert output.attempts["cost_usd"].sum() > 0 and client.summary.cost_usd > 0
    # re-thresholding needs no new calls
    strict = rethreshold(output.attempts, min_correct=1, max_attempts=2)
    assert strict["question_id"].to_list() == [first["question_id"]]
    assert server.hits == 11


def test_replies_that_stay_unparseable_are_quarantined_with_how_to_ask_again(
    llm_server_factory, make_llm_client, template_candidates, sample_scene_graphs
):
    sample = template_candidates.head(2)
    first, second = sample.iter_rows(named=True)

    def script(question, count):
        if question == first["question"]:
            return "The answer is" if count == 0 else first["answer"]  # truncated, right when asked again
        return "The correct option"  # truncated every time

    server = llm_server_factory("openai", responder=_scripted_judge(script))
    client = make_llm_client(server, max_concurrency=1)
    output = run_pass_at_2(
        sample, sample_scene_graphs, PassAt2Settings(backend="openai"), client=client, progress=False
    )
    assert output.validated["question_id"].to_list() == [first["question_id"]]
    assert output.validated["first_correct_attempt"].to_list() == [1]
    garbage = output.attempts.filter(pl.col("question_id") == second["question_id"])
    assert garbage.height == 4 and set(garbage["status"]) == {"unparseable"}
    assert garbage["raw_text"].to_list() == ["The correct option"] * 4
    assert all(
        "requery_quarantined: true on the stvqa_judge_llm resource" in error for error in garbage["error"]
    )
    reason = output.quarantine.to_frame()["reason"].to_list()
    assert len(reason) == 1 and reason[0].startswith("pass@2 got no answer in 4 attempts: invalid_response")
    assert output.stats["filtered_out"] == 0  # not scored as a wrong answer
    assert server.hits == 3 + 4 * 2 and client.summary.invalid_responses == 4  # every bad reply asked twice

    # once the judge answers again, requery_quarantined asks only the quarantined tries
    fixed = llm_server_factory("openai", responder=_scripted_judge(lambda question, count: second["answer"]))
    requery = make_llm_client(fixed, requery_quarantined=True)
    again = run_pass_at_2(
        sample, sample_scene_graphs, PassAt2Settings(backend="openai"), client=requery, progress=False
    )
    assert set(again.validated["question_id"]) == {first["question_id"], second["question_id"]}
    assert fixed.hits == 2 and requery.summary.cache_hits == 2  # only the quarantined tries are paid


def test_transport_failures_are_quarantined(
    llm_server_factory, make_llm_client, template_candidates, sample_scene_graphs
):
    server = llm_server_factory("openai")
    server.fault_policy = lambda recorded, hit: Fault.http_error(400, "image too large")
    output = run_pass_at_2(
        template_candidates.head(2),
        sample_scene_graphs,
        PassAt2Settings(backend="openai"),
        client=make_llm_client(server),
        progress=False,
    )
    assert output.validated.height == 0
    rows = output.quarantine.to_frame()
    assert rows.height == 2 and all(
        "pass@2 got no answer in 4 attempts" in reason for reason in rows["reason"]
    )
    assert set(output.attempts["status"]) == {"error"}


def test_missing_scene_graph_is_quarantined(template_candidates, sample_scene_graphs):
    image_id = template_candidates["image_id"][0]
    output = run_pass_at_2(
        template_candidates,
        sample_scene_graphs.filter(pl.col("image_id") != image_id),
        PassAt2Settings(),
        progress=False,
    )
    reasons = output.quarantine.to_frame()["reason"].to_list()
    missing = template_candidates.filter(pl.col("image_id") == image_id).height
    assert len(reasons) == missing and all("missing from scene_graphs" in reason for reason in reasons)
    assert json.loads(output.quarantine.to_frame()["payload_json"][0])["image_id"] == image_id


def test_openai_backend_needs_a_client(template_candidates, sample_scene_graphs):
    with pytest.raises(ValueError, match="needs an LLM client"):
        run_pass_at_2(template_candidates, sample_scene_graphs, PassAt2Settings(backend="openai"))
