"""Backends: transformers generation and the entropy scoring pass on a tiny model, adapter checks, the API backend."""

import importlib.util
import json
import shutil
from types import SimpleNamespace

import pytest
import torch

from tests.eval.conftest import image_bytes
from tests.eval.scripted import Reply, ScriptedOpenAIServer
from tests.fakes.llm_servers import LoopbackLLMServer, request_images, request_text
from training.eval.backends import (
    VLLM_LORA_RANKS,
    AdapterNotAppliedError,
    GenerationRequest,
    GenerationSettings,
    OpenAIBackend,
    TransformersBackend,
    _adapter_rank,
    _prompt_token_logprobs,
    adapter_effect,
    adapter_targets_vision,
    build_backend,
    merge_adapter,
    require_adapter_effect,
    resolve_adapter_mode,
    vllm_lora_rank,
)
from training.models import load_processor
from training.prompts import build_messages

QUESTION = {
    "question": "Where is the red chair?",
    "options": ["left", "right"],
    "image_width": 32,
    "image_height": 24,
}


def _request(item_id="q1", fmt="spatialcore", family="qwen3_vl", images=1):
    cells = [{"bytes": image_bytes(), "path": f"{item_id}_{k}.png"} for k in range(images)]
    return GenerationRequest(item_id, build_messages(fmt, QUESTION, family), cells)


@pytest.fixture(scope="module")
def backend(tiny_model_dir):
    return TransformersBackend(
        str(tiny_model_dir), settings=GenerationSettings(max_new_tokens=6, batch_size=2), device="cpu"
    )


def test_generate_batched(backend):
    requests = [_request("a"), _request("b", images=2)]
    generations = backend.generate(requests)
    assert len(generations) == 2
    for generation in generations:
        assert isinstance(generation.text, str) and generation.finish_reason in ("stop", "length")
        if generation.finish_reason == "length":
            assert generation.completion_tokens == 6
    assert requests[0].prompt_hash != requests[1].prompt_hash


def test_finish_reason(backend):
    eos = next(iter(backend.eos_token_ids))
    assert backend._completion([5, 6, eos, backend.pad_token_id]).finish_reason == "stop"
    assert backend._completion([5] * 6).finish_reason == "length"
    assert backend._completion([5] * 3).finish_reason == "stop"  # shorter than the limit: the sequence ended


def _reference_uncertainties(backend, request, completion):
    """H per box from a plain full forward pass (every logit), for comparison with the selective pass."""
    from training.entropy import CompletionTokenDecoder, token_entropy
    from training.rewards.confidence import box_uncertainties

    inputs = backend._encode([request])
    ids = backend.tokenizer(completion, add_special_tokens=False)["input_ids"]
    input_ids = torch.cat([inputs["input_ids"], torch.tensor([ids])], dim=1)
    extra = {"pixel_values": inputs["pixel_values"], "image_grid_thw": inputs["image_grid_thw"]}
    if "mm_token_type_ids" in inputs:
        extra["mm_token_type_ids"] = torch.cat(
            [inputs["mm_token_type_ids"], torch.zeros(1, len(ids), dtype=torch.long)], dim=1
        )
    with torch.no_grad():
        logits = backend.model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), **extra).logits
    prompt_length = inputs["input_ids"].shape[1]
    entropies = token_entropy(logits[0, prompt_length - 1 : -1]).tolist()
    tokens = CompletionTokenDecoder(backend.tokenizer).decode(ids, expected_text=completion)
    return box_uncertainties(tokens, entropies)


def test_box_entropies_match_a_full_forward_pass(backend):
    two_boxes = '{"bbox_2d": [112, 340, 568, 902], "label": "red chair"}\n{"bbox_2d": [5, 17, 99, 100], "label": "lamp"}\nLeft.</think>A'
    malformed = (
        '{"bbox_2d": [1, 2, 3], "label": "x"}\n{"bbox_2d": [10, 20, 30, 40], "label": "cup"}\nok</think>B'
    )
    requests = [_request("a"), _request("b", images=2), _request("c"), _request("d")]
    completions = [two_boxes, malformed, "no boxes at all</think>A", None]
    values = backend.box_entropies(requests, completions)
    assert [len(v) for v in values] == [
        2,
        1,
        0,
        0,
    ]  # the malformed box neither gets a value nor shifts the next one
    assert all(0.0 <= h <= 1.0 for row in values for h in row)
    assert values[0] == pytest.approx(_reference_uncertainties(backend, requests[0], two_boxes), abs=1e-4)
    assert values[1] == pytest.approx(_reference_uncertainties(backend, requests[1], malformed), abs=1e-4)


def _save_adapter(model_dir, folder, target_modules, nonzero, rank=4):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText

    base = AutoModelForImageTextToText.from_pretrained(str(model_dir))
    peft_model = get_peft_model(base, LoraConfig(r=rank, lora_alpha=8, target_modules=target_modules))
    if nonzero:
        torch.manual_seed(0)
        for name, parameter in peft_model.named_parameters():
            if "lora_B" in name:
                parameter.data.normal_(0, 0.5)
    peft_model.save_pretrained(folder)
    return folder


LANGUAGE_TARGETS = r"model\.language_model\.layers\.\d+\.self_attn\.(q_proj|v_proj)"
VISION_TARGETS = r".*visual\.blocks\.\d+\.attn\.qkv"


def test_untrained_adapter_is_refused(tiny_model_dir, tmp_path):
    adapter = _save_adapter(tiny_model_dir, tmp_path / "zero", LANGUAGE_TARGETS, nonzero=False)
    with pytest.raises(AdapterNotAppliedError, match="zero LoRA B"):
        TransformersBackend(str(tiny_model_dir), str(adapter), device="cpu")
    with pytest.raises(AdapterNotAppliedError):
        merge_adapter(tiny_model_dir, adapter, tmp_path / "merged", dtype="float32")


def test_trained_adapter_changes_outputs_and_merges(tiny_model_dir, tmp_path, backend):
    adapter = _save_adapter(tiny_model_dir, tmp_path / "trained", LANGUAGE_TARGETS, nonzero=True)
    adapted = TransformersBackend(str(tiny_model_dir), str(adapter), device="cpu", settings=backend.settings)
    inputs = backend._encode([_request()])
    with torch.no_grad():
        base_logits = backend.model(**inputs).logits[0, -1]
        adapted_logits = adapted.model(**inputs).logits[0, -1]
    effect = adapter_effect(
        torch.log_softmax(base_logits, -1).tolist(), torch.log_softmax(adapted_logits, -1).tolist()
    )
    require_adapter_effect(effect, "trained")
    assert not adapter_targets_vision(adapter) and resolve_adapter_mode(str(adapter), "auto") == "lora"

    merged_dir = merge_adapter(tiny_model_dir, adapter, tmp_path / "merged", dtype="float32")
    merged = TransformersBackend(str(merged_dir), device="cpu", settings=backend.settings)
    with torch.no_grad():
        merged_logits = merged.model(**inputs).logits[0, -1]
    assert torch.allclose(merged_logits, adapted_logits, atol=1e-4)
    assert merge_adapter(tiny_model_dir, adapter, merged_dir, dtype="float32") == merged_dir  # reused


def test_vision_adapter_is_merged_for_vllm(tiny_model_dir, tmp_path):
    adapter = _save_adapter(tiny_model_dir, tmp_path / "vision", VISION_TARGETS, nonzero=True)
    assert adapter_targets_vision(adapter)
    assert resolve_adapter_mode(str(adapter), "auto") == "merge"
    assert resolve_adapter_mode(str(adapter), "lora") == "lora"
    assert resolve_adapter_mode(None, "auto") == "none"
    with pytest.raises(ValueError, match="adapter mode"):
        resolve_adapter_mode(str(adapter), "sometimes")


def test_adapter_effect_from_prompt_logprobs():
    def output(values):
        entries = [None] + [
            {token: SimpleNamespace(logprob=value), 999: SimpleNamespace(logprob=-9.0)}
            for token, value in values
        ]
        return SimpleNamespace(prompt_token_ids=[1] + [token for token, _ in values], prompt_logprobs=entries)

    base = _prompt_token_logprobs(output([(5, -1.0), (6, -2.0)]))
    same = _prompt_token_logprobs(output([(5, -1.0), (6, -2.0)]))
    changed = _prompt_token_logprobs(output([(5, -1.0), (6, -1.25)]))
    assert base == [-1.0, -2.0]
    assert adapter_effect(base, changed) == 0.75
    with pytest.raises(AdapterNotAppliedError, match="not applied"):
        require_adapter_effect(
            adapter_effect(base, same), "runs/adapter"
        )  # the SpatiaLab runner's silent failure
    with pytest.raises(ValueError):
        adapter_effect([1.0], [1.0, 2.0])


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_vllm_backend_needs_the_gpu_extra(tiny_model_dir):
    with pytest.raises(ImportError, match="gpu"):
        build_backend("vllm", str(tiny_model_dir))


def test_openai_backend_against_a_loopback_server(tmp_path):
    answers = {"q1": "<observe>o</observe><scene>{}</scene><think>t</think><answer>(B) right</answer>"}

    def policy(body):
        if "red chair" in request_text(body):
            return Reply(answers["q1"])
        return Reply("x" * 40, finish_reason="length")  # the server says the token limit cut it

    with ScriptedOpenAIServer(policy) as server:
        settings = GenerationSettings(max_new_tokens=64)
        api = OpenAIBackend(
            "gpt-4o",
            base_url=server.base_url,
            api_key="sk-test",
            settings=settings,
            cache_path=tmp_path / "cache.sqlite",
        )
        other = GenerationRequest("q2", [{"role": "user", "content": "Something else"}], [])
        arrived = []
        generations = api.generate(
            [_request("q1", "spatialthinker", "qwen2_vl"), other],
            on_result=lambda position, generation: arrived.append(position),
        )
        api.close()
        body = next(
            r.body for r in server.requests if "red chair" in request_text(r.body)
        )  # requests run concurrently
    assert generations[0].text == answers["q1"] and generations[0].finish_reason == "stop"
    assert generations[1].finish_reason == "length"  # the provider's own reason, kept
    assert sorted(arrived) == [0, 1]  # each answer reported once, as it arrived
    assert request_images(body) == [image_bytes()]
    assert body["temperature"] == 0.0 and body["max_completion_tokens"] == 64
    with pytest.raises(ValueError, match="adapter"):
        build_backend("openai", "gpt-4o", "runs/adapter", base_url="http://127.0.0.1:9/v1")


def test_openai_backend_keeps_the_providers_finish_reason(tmp_path):
    # A long answer that finished normally is not truncated, whatever its length; a short one the
    # server reports as cut by the limit is. (The backend used to guess from the token count.)
    def policy(body):
        text = request_text(body)
        return Reply("y" * 400) if "long" in text else Reply("short", finish_reason="length")

    requests = [
        GenerationRequest("long", [{"role": "user", "content": "a long answer"}], []),
        GenerationRequest("cut", [{"role": "user", "content": "a cut answer"}], []),
    ]
    with ScriptedOpenAIServer(policy) as server:
        api = OpenAIBackend(
            "gpt-4o", base_url=server.base_url, settings=GenerationSettings(max_new_tokens=64)
        )
        long, cut = api.generate(requests)
        api.close()
    assert (long.finish_reason, cut.finish_reason) == ("stop", "length")


def test_openai_response_cache_is_keyed_on_the_endpoint(tmp_path):
    # The same model name behind two servers is two models: a shared response cache must not mix them.
    request = GenerationRequest("q", [{"role": "user", "content": "Where is the cup?"}], [])
    cache = tmp_path / "shared.sqlite"
    texts = []
    for answer in ("from the first server", "from the second server"):
        with ScriptedOpenAIServer(lambda body, answer=answer: Reply(answer)) as server:
            api = OpenAIBackend("local-model", base_url=server.base_url, cache_path=cache)
            (generation,) = api.generate([request])
            api.close()
            texts.append((generation.text, server.hits))
    assert texts == [("from the first server", 1), ("from the second server", 1)]


def test_openai_backend_reports_failures(tmp_path):
    from tests.fakes.llm_servers import Fault

    with LoopbackLLMServer("openai") as server:
        server.queue_faults(Fault.http_error(400, "bad request"))
        api = OpenAIBackend(
            "gpt-4o",
            base_url=server.base_url,
            api_key="sk-test",
            max_retries=0,
            cache_path=tmp_path / "c.sqlite",
        )
        (generation,) = api.generate([GenerationRequest("q", [{"role": "user", "content": "hi"}], [])])
        api.close()
    assert generation.text is None and generation.finish_reason == "error" and "rejected" in generation.error


def test_merged_qwen3_vl_folder_carries_the_processor_files(tiny_model_dir, tmp_path):
    # vLLM builds its Qwen3-VL processor from the model folder: the merged folder must hold the base
    # model's tokenizer, image and video processor, chat template and generation files.
    base = tmp_path / "base"
    shutil.copytree(tiny_model_dir, base)
    video = {"video_processor_type": "Qwen3VLVideoProcessor", "patch_size": 16, "temporal_patch_size": 2}
    (base / "video_preprocessor_config.json").write_text(json.dumps(video))
    adapter = _save_adapter(base, tmp_path / "adapter", LANGUAGE_TARGETS, nonzero=True)
    merged = merge_adapter(base, adapter, tmp_path / "merged", dtype="float32")
    for name in (
        "preprocessor_config.json",
        "video_preprocessor_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "chat_template.jinja",
        "generation_config.json",
    ):
        assert (merged / name).read_bytes() == (base / name).read_bytes(), name
    processor = load_processor(merged, "qwen3_vl")
    assert processor.image_processor.patch_size == 16
    assert processor.tokenizer.chat_template == load_processor(base, "qwen3_vl").tokenizer.chat_template


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"r": 4}, 8),  # below vLLM's smallest multi-digit rank
        ({"r": 24}, 32),  # vLLM rejects 24: round up, never down
        ({"r": 32, "rank_pattern": {"visual.blocks.0.attn.qkv": 4}}, 32),  # the largest rank decides
        ({"r": 16, "rank_pattern": {"layers.0.mlp": 80}}, 128),  # a larger pattern rank
        ({"r": 320}, 320),  # an allowed rank stays
    ],
)
def test_vllm_lora_rank_is_one_vllm_accepts(tmp_path, config, expected):
    (tmp_path / "adapter_config.json").write_text(json.dumps(config))
    assert _adapter_rank(str(tmp_path)) == expected
    assert expected in VLLM_LORA_RANKS


def test_vllm_lora_rank_above_the_largest_is_refused():
    with pytest.raises(ValueError, match="512"):
        vllm_lora_rank(1024)


def test_vllm_backend_serves_a_lora_adapter_at_an_accepted_rank(tiny_model_dir, tmp_path, fake_vllm):
    adapter = _save_adapter(tiny_model_dir, tmp_path / "r24", LANGUAGE_TARGETS, nonzero=True, rank=24)
    backend = build_backend("vllm", str(tiny_model_dir), str(adapter), settings=GenerationSettings())
    assert fake_vllm.engines[0]["enable_lora"] and fake_vllm.engines[0]["max_lora_rank"] == 32
    generations = backend.generate([_request("a"), _request("b")])
    assert [g.text for g in generations] == ["boxes</think>A"] * 2
    backend.close()
    backend.close()  # closing twice is harmless
    assert fake_vllm.events == [
        "engine core shut down",
        "model parallel destroyed",
        "distributed environment destroyed",
    ]
