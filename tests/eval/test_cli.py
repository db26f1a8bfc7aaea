"""`spatial-eval` end to end: a tiny local model on the sample world's OmniSpatial-like split, resume, API runs, errors."""

import json

import polars as pl
import pytest

from data_contracts.eval_report import EvalReport
from data_contracts.validation import check_frame
from readers.mcq import read_omnispatial
from tests.fakes.llm_servers import LoopbackLLMServer, request_text
from training.eval import runner
from training.eval.backends import TransformersBackend
from training.eval.benchmarks import eval_items_from_mcq
from training.eval.cli import main
from training.prompts import build_messages


@pytest.fixture
def generation_calls(monkeypatch):
    """Record how many prompts each transformers `generate` call receives."""
    calls = []
    original = TransformersBackend.generate

    def recording(self, requests, on_result=None):
        calls.append(len(requests))
        return original(self, requests, on_result)

    monkeypatch.setattr(TransformersBackend, "generate", recording)
    return calls


def test_tiny_model_on_the_sample_world(tmp_path, small_world, tiny_model_dir, generation_calls):
    questions, _ = read_omnispatial(small_world / "omnispatial", split="test")
    output = tmp_path / "eval"
    common = [
        "--model",
        str(tiny_model_dir),
        "--benchmarks",
        "omnispatial",
        "--omnispatial-root",
        str(small_world / "omnispatial"),
        "--output",
        str(output),
        "--max-new-tokens",
        "8",
        "--batch-size",
        "6",
        "--device",
        "cpu",
    ]

    assert main([*common, "--limit", "2"]) == 0  # an interrupted run: two questions done
    assert generation_calls == [2]
    assert main([*common, "--grounding-analysis"]) == 0  # continues with the rest only
    assert generation_calls == [2, questions.height - 2]

    scores = pl.read_parquet(output / "runs" / "tiny-qwen3-vl" / "scores.parquet")
    assert check_frame(scores, EvalReport).passed
    assert sorted(scores["item_id"]) == sorted(questions["question_id"])
    assert set(scores["prompt_format"]) == {"spatialcore"}  # Qwen3-VL: SpatialCORE's format
    # a random tiny model never closes its reasoning in 8 tokens: every answer is truncated and wrong, none guessed
    assert set(scores["status"]) <= {"truncated", "unparseable", "wrong", "correct"}
    assert scores.filter(pl.col("status") != "correct")["score"].sum() == 0.0

    for name in ("report.md", "report.csv", "report.json"):
        assert (output / name).is_file()
    markdown = (output / "report.md").read_text()
    assert (
        "SpatialCORE Table 1: OmniSpatial" in markdown
        and "**tiny-qwen3-vl**" in markdown
        and "Grounding analysis" in markdown
    )
    report = json.loads((output / "report.json").read_text())
    overall = report["benchmarks"]["tiny-qwen3-vl"]["omnispatial"]["overall"]
    assert overall["n"] == questions.height
    assert (
        overall["truncated"] + overall["unparseable"] + overall["wrong"] + overall["correct"]
        == questions.height
    )
    for figure in ("figure4_iou_by_entropy_quartile.png", "figure5_accuracy_and_uncertainty.png"):
        assert (output / "grounding" / figure).read_bytes()[:4] == b"\x89PNG"

    generation_calls.clear()
    assert main(common) == 0  # everything cached: no model is even loaded
    assert generation_calls == []


def _answer_key(small_world):
    questions, _ = read_omnispatial(small_world / "omnispatial", split="test")
    items = eval_items_from_mcq(questions, "omnispatial")
    key = {}
    for item in items.iter_rows(named=True):
        prompt = build_messages("spatialthinker", item, "qwen2_vl")[-1]["content"]
        letter = item["answer"]
        key[prompt] = (
            f"<observe>a room</observe><scene>{{}}</scene><think>done</think><answer>({letter}) {item['options'][item['answer_index']]}</answer>"
        )
    return key


def test_api_runs_side_by_side(tmp_path, small_world, monkeypatch):
    key = _answer_key(small_world)
    monkeypatch.setenv("EVAL_TEST_KEY", "sk-test")
    output = tmp_path / "eval"
    first_prompt = min(key)

    def good(body):
        return key[request_text(body)]

    def one_unsure(body):
        text = request_text(body)
        return (
            "<observe>?</observe><scene>{}</scene><think>no idea</think><answer>I am not sure</answer>"
            if text == first_prompt
            else key[text]
        )

    for name, model, responder in (("api-good", "gpt-4o", good), ("api-unsure", "gpt-4o-mini", one_unsure)):
        with LoopbackLLMServer("openai", responder=responder) as server:
            code = main(
                [
                    "--model",
                    model,
                    "--backend",
                    "openai",
                    "--base-url",
                    server.base_url,
                    "--api-key-env",
                    "EVAL_TEST_KEY",
                    "--benchmarks",
                    "omnispatial",
                    "--omnispatial-root",
                    str(small_world / "omnispatial"),
                    "--output",
                    str(output),
                    "--run-name",
                    name,
                ]
            )
        assert code == 0
    report = json.loads((output / "report.json").read_text())
    good_summary = report["benchmarks"]["api-good"]["omnispatial"]["overall"]
    unsure_summary = report["benchmarks"]["api-unsure"]["omnispatial"]["overall"]
    n = len(key)
    assert good_summary["accuracy"] == 100.0 and good_summary["n"] == n
    assert unsure_summary["unparseable"] == 1 and unsure_summary["accuracy"] == pytest.approx(
        100.0 * (n - 1) / n
    )
    table = next(t for t in report["tables"] if t["key"] == "spatialcore_table1")
    evaluated = {row["method"]: row for row in table["rows"] if not row["published"]}
    assert (
        set(evaluated) == {"api-good", "api-unsure"} and evaluated["api-good"]["values"]["average"] == 100.0
    )


def test_user_errors_exit_2(tmp_path, capsys, tiny_model_dir):
    assert main(["--model", str(tiny_model_dir), "--benchmarks", "cvbench", "--output", str(tmp_path)]) == 2
    assert "cvbench_path" in capsys.readouterr().err
    assert main(["--model", str(tiny_model_dir), "--benchmarks", "mmlu", "--output", str(tmp_path)]) == 2
    assert "unknown benchmark" in capsys.readouterr().err
    assert (
        main(
            [
                "--model",
                str(tiny_model_dir),
                "--benchmarks",
                "blink",
                "--blink-path",
                str(tmp_path / "none"),
                "--output",
                str(tmp_path),
            ]
        )
        == 2
    )


def test_run_names():
    config = runner.EvalRunConfig(
        model="Qwen/Qwen3-VL-8B-Thinking", adapter="runs/spatialcore-8b/checkpoint-300"
    )
    assert config.resolved_run_name() == "Qwen3-VL-8B-Thinking+checkpoint-300"
    with pytest.raises(ValueError, match="prompt_format"):
        runner.EvalRunConfig(model="m", prompt_format="plain")


def test_benchmark_locations_on_the_command_line():
    from training.eval.cli import config_from_args, make_parser

    args = make_parser().parse_args(
        [
            "--model",
            "m",
            "--output",
            "out",
            "--benchmarks",
            "cv-bench=hf://datasets/nyu-visionx/CV-Bench@main,omnispatial",
        ]
    )
    config = config_from_args(args)
    assert config.benchmarks == ["cvbench", "omnispatial"]
    assert config.sources.cvbench_path == "hf://datasets/nyu-visionx/CV-Bench@main"


def test_a_missing_model_folder_is_one_line_not_a_hub_lookup(tmp_path, capsys, monkeypatch):
    # `outputs/tiny-qwen3-vl` before it was built looks like a Hub id; without a refusal here the hub
    # would be retried five times and end in a traceback
    monkeypatch.chdir(tmp_path)
    status = main(
        ["--model", "outputs/tiny-qwen3-vl", "--benchmarks", "omnispatial", "--output", str(tmp_path)]
    )
    error = capsys.readouterr().err
    assert status == 2 and len(error.strip().splitlines()) == 1
    assert "neither a folder here nor in the Hugging Face cache" in error


def test_the_flags_follow_the_settings_models():
    """Every run, decoding and benchmark-source setting has its flag, with the model's own default and help."""
    from training.eval.backends import GenerationSettings
    from training.eval.benchmarks import BenchmarkSources
    from training.eval.cli import config_from_args, make_parser

    parser = make_parser()
    config = config_from_args(parser.parse_args(["--model", "m", "--output", "out"]))
    assert config.generation == GenerationSettings()
    assert config.sources == BenchmarkSources()
    assert (config.backend, config.prompt_format, config.limit) == ("transformers", "auto", None)
    helps = {action.dest: action.help for action in parser._actions}  # noqa: SLF001 - argparse keeps them there
    for model in (GenerationSettings, BenchmarkSources):
        for name, field in model.model_fields.items():
            assert helps[name] == field.description, name
    args = parser.parse_args(
        [
            "--model",
            "m",
            "--output",
            "out",
            "--omnispatial-split",
            "train",
            "--blink-subsets",
            "Counting, Jigsaw",
        ]
    )
    sources = config_from_args(args).sources
    assert (sources.omnispatial_split, sources.blink_subsets) == ("train", ["Counting", "Jigsaw"])
