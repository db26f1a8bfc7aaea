"""`spatial-eval` runs against scripted answerers: the numbers it reports are the true ones.

The answerer is the loopback OpenAI-compatible server with a chosen policy (`tests/eval/scripted.py`):
the gold answer, always "A", the gold letter with its option text, a completion cut by the token
limit, a bare letter, or a server that refuses everything. The benchmarks are small files in their
native layouts (3DSRBench's VLMEvalKit TSV, an OmniSpatial folder).
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from tests.eval.scripted import AnswerKey, ScriptedOpenAIServer, write_3dsrbench_tsv, write_omnispatial
from training.eval import runner
from training.eval.backends import GenerationSettings
from training.eval.benchmarks import BenchmarkSources, load_3dsrbench, load_omnispatial
from training.eval.cli import main

KEY_ENV = "EVAL_TEST_KEY"


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")


def run(server, output, name, *extra, model="gpt-4o"):
    """``spatial-eval`` against ``server`` (OpenAI backend, SpatialThinker format unless told)."""
    return main(
        [
            "--model",
            model,
            "--backend",
            "openai",
            "--base-url",
            server.base_url,
            "--api-key-env",
            KEY_ENV,
            "--output",
            str(output),
            "--run-name",
            name,
            *extra,
        ]
    )


def report_of(output):
    return json.loads((output / "report.json").read_text())


def table_row(report, table_key, run_name):
    table = next(table for table in report["tables"] if table["key"] == table_key)
    return next(row for row in table["rows"] if row["method"] == run_name)


@pytest.fixture
def threedsr(tmp_path):
    """The 3DSRBench fixture with rotations and flips, and the answer key of its rows."""
    path = write_3dsrbench_tsv(tmp_path / "3dsrbench" / "3dsrbench_v1_vlmevalkit_circular.tsv")
    return path, AnswerKey(load_3dsrbench(path)[0])


class TestThreeDSRBench:
    def test_always_a_and_gold_on_the_official_metrics(self, threedsr, tmp_path, capsys):
        path, key = threedsr
        output = tmp_path / "eval"
        for name, policy in (("always-a", key.always_a), ("gold", key.gold)):
            with ScriptedOpenAIServer(policy) as server:
                assert (
                    run(server, output, name, "--benchmarks", "3dsrbench", "--3dsrbench-path", str(path)) == 0
                )
        console = capsys.readouterr().out
        report = report_of(output)
        # 16 rows: 7 have gold A. 7 CircularEval questions (4 originals, 3 flipped), 4 FlipEval questions.
        expected = {"always-a": (43.75, 0.0, 0.0), "gold": (100.0, 100.0, 100.0)}
        for name, (vanilla, circular, flip) in expected.items():
            row = table_row(report, "3dsrbench", name)
            assert (row["values"]["vanilla"], row["values"]["circular_eval"], row["values"]["flip_eval"]) == (
                vanilla,
                circular,
                flip,
            )
            assert (row["counts"]["vanilla"], row["counts"]["circular_eval"], row["counts"]["flip_eval"]) == (
                16,
                7,
                4,
            )
            assert table_row(report, "spatialthinker_spatial_vqa", name)["values"]["3dsrbench"] == circular
            # the console shows the table's number first, then the other two
            assert (
                f"{name} 3dsrbench: CircularEval {circular:.2f}% on 7 questions; vanilla {vanilla:.2f}% on 16 items; "
                f"FlipEval {flip:.2f}% on 4 questions" in console
            )
        markdown = (output / "report.md").read_text()
        assert "| **always-a** | 0.00 (7) |" in markdown  # SpatialThinker's 3DSRBench column
        assert "| **always-a** | 43.75 (16) | 0.00 (7) | 0.00 (4) |" in markdown

    def test_flipped_questions_count_without_rotations(self, tmp_path, capsys):
        # The file without rotations: originals are all gold A, two flipped questions are gold B.
        path = write_3dsrbench_tsv(tmp_path / "plain.tsv", rotate=False)
        key = AnswerKey(load_3dsrbench(path)[0])
        output = tmp_path / "eval"
        with ScriptedOpenAIServer(key.always_a) as server:
            assert (
                run(server, output, "always-a", "--benchmarks", "3dsrbench", "--3dsrbench-path", str(path))
                == 0
            )
        report = report_of(output)
        # The paper column used to drop the flipped rows: 100.00 for always answering "A".
        assert table_row(report, "spatialthinker_spatial_vqa", "always-a")["values"][
            "3dsrbench"
        ] == pytest.approx(100 * 5 / 7)
        assert table_row(report, "3dsrbench", "always-a")["values"]["flip_eval"] == 50.0
        assert "CircularEval 71.43% on 7 questions; vanilla 71.43% on 7 items" in capsys.readouterr().out


class TestAnswersAndFinishReasons:
    @pytest.fixture
    def omnispatial(self, tmp_path):
        root = write_omnispatial(tmp_path / "OmniSpatial", questions=6, options_in_image=2)
        return root, AnswerKey(load_omnispatial(root)[0])

    def _overall(self, server, output, root, name, *extra):
        code = run(
            server, output, name, "--benchmarks", "omnispatial", "--omnispatial-root", str(root), *extra
        )
        return code, report_of(output)["benchmarks"][name]["omnispatial"]["overall"]

    def test_gold_letter_with_its_option_text_is_right(self, omnispatial, tmp_path):
        root, key = omnispatial
        with ScriptedOpenAIServer(key.gold_letter_dot_text) as server:  # "C. Turn a bit to the left"
            code, overall = self._overall(server, tmp_path / "eval", root, "dot-text")
        assert code == 0 and overall["accuracy"] == 100.0 and overall["correct"] == 6

    def test_a_length_stop_is_truncated(self, omnispatial, tmp_path):
        root, key = omnispatial
        with ScriptedOpenAIServer(key.cut_by_the_limit) as server:  # the gold answer, but cut by the limit
            code, overall = self._overall(server, tmp_path / "eval", root, "cut")
        assert code == 0 and (overall["truncated"], overall["correct"], overall["accuracy"]) == (6, 0, 0.0)
        scores = pl.read_parquet(tmp_path / "eval" / "runs" / "cut" / "scores.parquet")
        assert set(scores["finish_reason"]) == {"length"}

    def test_a_normal_stop_without_the_closing_tags_is_unparseable(self, omnispatial, tmp_path):
        root, key = omnispatial
        with ScriptedOpenAIServer(key.bare_letter) as server:  # "C": finished, but not in the format
            code, overall = self._overall(server, tmp_path / "eval", root, "bare")
        assert code == 0 and (overall["unparseable"], overall["truncated"]) == (6, 0)

    def test_options_in_the_image_are_announced(self, omnispatial, tmp_path):
        root, key = omnispatial
        with ScriptedOpenAIServer(key.gold) as server:
            self._overall(server, tmp_path / "eval", root, "gold")
            texts = server.texts()
        drawn = [text for text in texts if "shown in the image" in text]
        assert len(drawn) == 2 and all("Options:" not in text for text in drawn)

    def test_failed_requests_exit_1_and_are_retried(self, omnispatial, tmp_path, capsys):
        root, key = omnispatial
        output = tmp_path / "eval"
        with ScriptedOpenAIServer(key.gold) as server:
            server.fail_every_request()
            code, overall = self._overall(server, output, root, "flaky", "--max-concurrency", "1")
            assert code == 1 and overall["error"] == 6 and overall["accuracy"] == 0.0
            assert "6 of 6 requests failed" in capsys.readouterr().err
            markdown = (output / "report.md").read_text()
            assert "| **flaky** | 0.00 (6) |" in markdown and "| 6 of 6 |" in markdown
            assert "**Failed requests:** flaky: 6 of 6 answers" in markdown
            code, _ = self._overall(server, output, root, "flaky", "--allow-failures")
            assert code == 0
            server.fault_policy = None  # the server is back: the failures are asked again, nothing else
            server.reset()
            code, overall = self._overall(server, output, root, "flaky")
            assert server.hits == 6
        assert code == 0 and overall["accuracy"] == 100.0 and overall["error"] == 0


def test_a_rerun_on_fewer_benchmarks_keeps_the_others(threedsr, tmp_path):
    path, threedsr_key = threedsr
    root = write_omnispatial(tmp_path / "OmniSpatial", questions=3)
    omni_key = AnswerKey(load_omnispatial(root)[0])
    output = tmp_path / "eval"
    both = ["--omnispatial-root", str(root), "--3dsrbench-path", str(path)]

    def policy(body):
        try:
            return omni_key.gold(body)
        except KeyError:
            return threedsr_key.gold(body)

    with ScriptedOpenAIServer(policy) as server:
        assert run(server, output, "model", "--benchmarks", "omnispatial,3dsrbench", *both) == 0
    with ScriptedOpenAIServer(threedsr_key.always_a) as server:  # 3DSRBench again, with another answerer
        assert (
            run(server, output, "model", "--benchmarks", "3dsrbench", *both, "--max-new-tokens", "512") == 0
        )
    scores = pl.read_parquet(output / "runs" / "model" / "scores.parquet")
    assert scores.group_by("benchmark").len().sort("benchmark").rows() == [
        ("3dsrbench", 16),
        ("omnispatial", 3),
    ]
    report = report_of(output)
    assert table_row(report, "spatialcore_table1", "model")["values"]["average"] == 100.0  # still there
    assert table_row(report, "3dsrbench", "model")["values"]["vanilla"] == 43.75  # replaced by the rerun
    meta = json.loads((output / "runs" / "model" / "run.json").read_text())
    assert meta["benchmarks"] == ["3dsrbench", "omnispatial"] and meta["items"] == 19


def test_an_interrupted_api_run_keeps_every_answer_it_received(threedsr, tmp_path, monkeypatch):
    from model_clients.sync_mode import SyncMode

    path, key = threedsr
    output = tmp_path / "eval"
    args = ["--benchmarks", "3dsrbench", "--3dsrbench-path", str(path), "--max-concurrency", "1"]
    original = SyncMode.execute
    calls = []

    def interrupted(self, request, cache_key, *arguments):
        calls.append(request.request_id)
        if len(calls) == 10:
            raise KeyboardInterrupt  # Ctrl-C while the tenth request is in flight
        return original(self, request, cache_key, *arguments)

    monkeypatch.setattr(SyncMode, "execute", interrupted)
    with ScriptedOpenAIServer(key.gold) as server:
        with pytest.raises(KeyboardInterrupt):
            run(server, output, "paid", *args)
        (cache_file,) = (output / "predictions").glob("*/3dsrbench.jsonl")
        assert len(cache_file.read_text().splitlines()) == 9  # every answer that came back is on disk
        monkeypatch.setattr(SyncMode, "execute", original)
        server.reset()
        assert run(server, output, "paid", *args) == 0
        assert server.hits == 16 - 9  # only the rest is asked (and paid for) again
    assert table_row(report_of(output), "3dsrbench", "paid")["values"]["circular_eval"] == 100.0


def test_the_same_model_name_on_another_endpoint_is_asked_again(threedsr, tmp_path):
    path, key = threedsr
    output = tmp_path / "eval"
    args = ["--benchmarks", "3dsrbench", "--3dsrbench-path", str(path)]
    with ScriptedOpenAIServer(key.gold) as first:
        assert run(first, output, "server-1", *args, model="local-model") == 0
    with ScriptedOpenAIServer(key.always_a) as second:
        assert run(second, output, "server-2", *args, model="local-model") == 0
        assert second.hits == 16  # not answered from the first server's cache
    report = report_of(output)
    assert table_row(report, "3dsrbench", "server-1")["values"]["vanilla"] == 100.0
    assert table_row(report, "3dsrbench", "server-2")["values"]["vanilla"] == 43.75


def test_vllm_gets_every_prompt_in_one_call_and_frees_the_gpu_first(
    tmp_path, tiny_model_dir, fake_vllm, monkeypatch
):
    root = write_omnispatial(tmp_path / "OmniSpatial", questions=40)
    built = []
    original = runner.TransformersBackend

    def scorer(*args, **kwargs):
        built.append(list(fake_vllm.events))  # what had been torn down when the entropy pass started
        return original(*args, **kwargs)

    monkeypatch.setattr(runner, "TransformersBackend", scorer)
    config = runner.EvalRunConfig(
        model=str(tiny_model_dir),
        backend="vllm",
        benchmarks=("omnispatial",),
        output_dir=str(tmp_path / "eval"),
        generation=GenerationSettings(max_new_tokens=8, batch_size=8),
        grounding_analysis=True,
        sources=BenchmarkSources(omnispatial_root=str(root)),
    )
    result = runner.run_evaluation(config)
    assert fake_vllm.generate_calls == [40]  # one call; the runner used to send chunks of 32
    assert built == [
        ["engine core shut down", "model parallel destroyed", "distributed environment destroyed"]
    ]
    assert result.scores.height == 40 and set(result.scores["predicted"]) == {"A"}
