"""The resumable prediction cache."""

from training.eval.predictions import CachedPrediction, PredictionCache, RunKey, content_hash


def test_resume_and_prompt_check(tmp_path):
    key = RunKey(
        model="models/base",
        adapter="runs/adapter",
        settings={"max_new_tokens": 32, "backend": "transformers"},
    )
    cache = PredictionCache(tmp_path, key)
    cache.add(
        "omnispatial",
        [
            CachedPrediction("q1", "hash-1", "</think>A", "stop", 4),
            CachedPrediction("q2", "hash-2", "x", "length", 32),
        ],
    )
    reopened = PredictionCache(tmp_path, key)
    assert reopened.count("omnispatial") == 2
    assert reopened.get("omnispatial", "q1", "hash-1").completion == "</think>A"
    assert reopened.get("omnispatial", "q1", "changed prompt") is None  # a changed prompt is generated again
    assert reopened.get("spatialab", "q1", "hash-1") is None  # keyed by benchmark too
    reopened.add("omnispatial", [CachedPrediction("q1", "hash-1", "</think>B", "stop", 4)])
    assert (
        PredictionCache(tmp_path, key).get("omnispatial", "q1", "hash-1").completion == "</think>B"
    )  # last entry wins


def test_run_keys_separate_models_adapters_and_settings(tmp_path):
    base = RunKey("models/base", None, {"max_new_tokens": 32})
    adapted = RunKey("models/base", "runs/adapter", {"max_new_tokens": 32})
    longer = RunKey("models/base", None, {"max_new_tokens": 64})
    names = {base.folder_name, adapted.folder_name, longer.folder_name}
    assert (
        len(names) == 3
        and base.folder_name.startswith("base__base__")
        and adapted.folder_name.startswith("base__adapter__")
    )
    assert content_hash({"a": 1}) == content_hash({"a": 1})


def test_half_written_line_is_skipped(tmp_path):
    key = RunKey("m", None, {})
    cache = PredictionCache(tmp_path, key)
    cache.add("blink", [CachedPrediction("q1", "h", "</think>A", "stop", 2)])
    path = cache.folder / "blink.jsonl"
    path.write_text(path.read_text() + '{"item_id": "q2", "prompt_ha')  # a killed process
    reopened = PredictionCache(tmp_path, key)
    assert reopened.count("blink") == 1 and reopened.get("blink", "q1", "h") is not None
    assert cache.write_manifest().is_file()
