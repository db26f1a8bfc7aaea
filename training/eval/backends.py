"""Inference backends behind one interface: transformers ``generate``, vLLM, and OpenAI-compatible APIs.

All three take :class:`GenerationRequest` s (the prompt messages of :mod:`training.prompts` plus the
item's images) and return one :class:`Generation` each (text, why it stopped, tokens). Greedy decoding
by default, batched. ``generate(requests, on_result=...)`` also reports each generation as soon as
the backend has it (``on_result(position, generation)``), so the caller can store it at once.

* :class:`TransformersBackend`: the base model (``AutoModelForImageTextToText``, the processor of
  :func:`training.models.load_processor`, no torchvision) plus an optional PEFT adapter, on CPU or GPU.
  It also runs the one scoring pass of the grounding analysis (:meth:`TransformersBackend.box_entropies`):
  full-vocabulary entropies at the coordinate digits only, through the trainer's selective LM-head pass.
* :class:`VllmBackend`: vLLM (imported lazily; the ``gpu`` extra). All prompts go to one
  ``LLM.generate`` call (vLLM schedules and batches them). The adapter is served as a LoRA request
  (``max_lora_rank`` rounded up to a rank vLLM accepts), or merged into the base weights first when it
  adapts layers vLLM's LoRA does not serve (the vision encoder); the merged folder carries the base
  model's tokenizer, processor and chat-template files. Either way the adapter is checked before any
  item is scored: a run that silently ignored the trained adapter (a bug of a public SpatiaLab
  runner) stops with :class:`AdapterNotAppliedError` instead. ``close()`` shuts the engine down and
  returns its GPU memory before the transformers entropy pass.
* :class:`OpenAIBackend`: any OpenAI-compatible endpoint (or Anthropic) through the project's LLM layer
  (:mod:`llm`: retries, rate limit, cost accounting). The provider's finish reason is kept (a
  ``length`` stop is a truncated completion) and each answer is reported as it arrives.

>>> request = GenerationRequest("q1", [{"role": "user", "content": "Which is closer?"}], images=[])
>>> messages_with_images(request.messages, 2)[0]["content"][:2]
[{'type': 'image'}, {'type': 'image'}]
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field
from tqdm.auto import tqdm

from data_contracts.images import decode_image, image_sha256
from training.eval.predictions import content_hash

if TYPE_CHECKING:
    from peft import PeftModel
    from transformers import PreTrainedModel

logger = logging.getLogger(__name__)

BACKENDS = ("transformers", "vllm", "openai")
ADAPTER_MODES = ("auto", "lora", "merge")
ADAPTER_EFFECT_TOLERANCE = 1e-5
PROMPT_TEMPLATE_VERSION = "spatial-eval-1"
# LoRA ranks vLLM's engine accepts for `max_lora_rank` (vllm.config.LoRAConfig).
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# Files of a model folder that vLLM and transformers read besides the weights and config: tokenizer,
# image and video processors, chat template, generation defaults.
PROCESSOR_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "preprocessor_config.json",
    "video_preprocessor_config.json",
    "processor_config.json",
    "chat_template.json",
    "chat_template.jinja",
    "generation_config.json",
)

ResultCallback = Callable[[int, "Generation"], None]


class AdapterNotAppliedError(RuntimeError):
    """The adapter given for an evaluation does not change the model's outputs."""


class GenerationSettings(BaseModel):
    """Decoding settings shared by the backends (also the decoding fields of the ``eval_report`` run config)."""

    max_new_tokens: int = Field(
        default=2048, ge=1, description="Completion token limit; hitting it marks the completion truncated."
    )
    temperature: float = Field(default=0.0, ge=0.0, allow_inf_nan=False, description="0 is greedy decoding.")
    top_p: float = Field(default=1.0, description="Nucleus sampling (with a temperature above 0).")
    batch_size: int = Field(
        default=8,
        ge=1,
        description="Prompts per generate batch of the transformers backend (vLLM schedules every prompt "
        "itself; the API backend uses its own concurrency).",
    )
    seed: int = Field(default=0, description="Sampling seed.")


@dataclass
class GenerationRequest:
    """One prompt: the text messages (system and user) and the item's images, in order.

    Attributes:
        request_id: the item id.
        messages: chat messages with string contents (as built by :func:`training.prompts.build_messages`).
        images: image cells ``{"bytes", "path"}``; they go into the first user message, before its text.
    """

    request_id: str
    messages: list[dict]
    images: list[dict] = field(default_factory=list)

    @property
    def prompt_hash(self) -> str:
        """Hash of the messages and the image bytes (the cache checks completions against it)."""
        return content_hash(
            {"messages": self.messages, "images": [image_sha256(cell) for cell in self.images]}
        )


@dataclass(frozen=True)
class Generation:
    """A completion.

    Attributes:
        text: the completion text, ``None`` when the backend failed.
        finish_reason: why generation stopped: ``"stop"``, ``"length"`` (token limit), ``"error"`` (no
            completion), or the provider's own reason (``"content_filter"``, ``"refusal"``,
            Anthropic's ``"end_turn"`` / ``"max_tokens"``...).
        completion_tokens: generated tokens, when known.
        error: why the backend failed.
    """

    text: str | None
    finish_reason: str | None
    completion_tokens: int | None = None
    error: str | None = None


def messages_with_images(messages: list[dict], image_count: int) -> list[dict]:
    """Insert ``image_count`` image parts before the text of the first user message.

    >>> messages_with_images([{"role": "system", "content": "s"}, {"role": "user", "content": "q"}], 1)[1]
    {'role': 'user', 'content': [{'type': 'image'}, {'type': 'text', 'text': 'q'}]}
    """
    result, inserted = [], False
    for message in messages:
        message = dict(message)
        if message.get("role") == "user" and not inserted:
            content = message.get("content")
            parts = content if isinstance(content, list) else [{"type": "text", "text": str(content)}]
            message["content"] = [{"type": "image"} for _ in range(image_count)] + list(parts)
            inserted = True
        result.append(message)
    if not inserted:
        raise ValueError("the prompt has no user message to attach the images to")
    return result


def endpoint_of(provider: str, base_url: str | None) -> str:
    """The identity of an API endpoint: provider and base URL (the provider's own API when ``None``).

    >>> endpoint_of("openai", "http://localhost:8000/v1/"), endpoint_of("anthropic", None)
    ('openai@http://localhost:8000/v1', 'anthropic@default')
    """
    return f"{provider}@{(base_url or 'default').rstrip('/')}"


def vllm_lora_rank(rank: int) -> int:
    """The smallest rank vLLM's ``max_lora_rank`` accepts that serves an adapter of rank ``rank``.

    >>> vllm_lora_rank(4), vllm_lora_rank(24), vllm_lora_rank(64), vllm_lora_rank(300)
    (8, 32, 64, 320)
    """
    for allowed in VLLM_LORA_RANKS:
        if allowed >= rank:
            return allowed
    raise ValueError(f"LoRA rank {rank} is above the largest rank vLLM serves ({VLLM_LORA_RANKS[-1]})")


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """Consecutive slices of ``size``.

    >>> [list(c) for c in chunks([1, 2, 3], 2)]
    [[1, 2], [3]]
    """
    for start in range(0, len(items), size):
        yield items[start : start + size]


# --------------------------------------------------------------------------------------------------
# Adapter checks (shared by the transformers and vLLM backends)
# --------------------------------------------------------------------------------------------------


def adapter_effect(base_logprobs: Sequence[float], adapted_logprobs: Sequence[float]) -> float:
    """Largest absolute difference between two runs' log-probabilities of the same tokens.

    Zero (within float noise) means the adapter changed nothing: it was not applied, or it is untrained.

    >>> adapter_effect([-1.0, -2.0], [-1.0, -2.5]), adapter_effect([-1.0], [-1.0])
    (0.5, 0.0)
    """
    if len(base_logprobs) != len(adapted_logprobs):
        raise ValueError(
            f"{len(base_logprobs)} base log-probabilities but {len(adapted_logprobs)} adapted ones"
        )
    differences = [
        abs(float(a) - float(b))
        for a, b in zip(base_logprobs, adapted_logprobs, strict=True)
        if math.isfinite(float(a)) and math.isfinite(float(b))
    ]
    return max(differences, default=0.0)


def require_adapter_effect(effect: float, adapter: str, tolerance: float = ADAPTER_EFFECT_TOLERANCE) -> None:
    """Raise :class:`AdapterNotAppliedError` when ``effect`` is within ``tolerance`` of zero.

    >>> require_adapter_effect(0.3, "ckpt")
    >>> require_adapter_effect(0.0, "ckpt")
    Traceback (most recent call last):
    ...
    training.eval.backends.AdapterNotAppliedError: adapter ckpt does not change the model's log-probabilities (largest change 0); it was not applied, or it is untrained
    """
    if not effect > tolerance:
        raise AdapterNotAppliedError(
            f"adapter {adapter} does not change the model's log-probabilities (largest change {effect:.3g}); "
            "it was not applied, or it is untrained"
        )


def adapter_tensor_names(adapter: str | Path) -> list[str]:
    """Names of the tensors stored in a PEFT adapter folder (``adapter_model.safetensors`` or ``.bin``)."""
    folder = Path(adapter)
    safetensors_file = folder / "adapter_model.safetensors"
    if safetensors_file.is_file():
        from safetensors import safe_open

        with safe_open(str(safetensors_file), framework="pt") as handle:
            return list(handle.keys())
    bin_file = folder / "adapter_model.bin"
    if bin_file.is_file():
        import torch

        return list(torch.load(bin_file, map_location="cpu", weights_only=True).keys())
    raise FileNotFoundError(f"no adapter weights (adapter_model.safetensors or .bin) in {folder}")


def adapter_targets_vision(adapter: str | Path) -> bool:
    """Whether an adapter adapts vision-encoder layers (vLLM's LoRA serves only the language model)."""
    return any(".visual." in f".{name}." or "vision_tower" in name for name in adapter_tensor_names(adapter))


def lora_b_is_zero(model) -> bool:
    """Whether every LoRA ``B`` matrix of a PEFT model is zero (then the adapter is a no-op)."""
    found = False
    for name, parameter in model.named_parameters():
        if "lora_B" in name:
            found = True
            if bool(parameter.detach().abs().max() > 0):
                return False
    return found


def resolve_adapter_mode(adapter: str | None, mode: str) -> str:
    """``none`` without adapter; ``merge`` for ``auto`` when the adapter touches the vision encoder, else ``lora``."""
    if mode not in ADAPTER_MODES:
        raise ValueError(f"adapter mode must be one of {', '.join(ADAPTER_MODES)}, got {mode!r}")
    if not adapter:
        return "none"
    if mode != "auto":
        return mode
    return "merge" if adapter_targets_vision(adapter) else "lora"


def local_model_folder(model: str | Path) -> Path | None:
    """The local folder of a model: the path itself, or its snapshot in the Hugging Face cache (no download)."""
    folder = Path(model)
    if folder.is_dir():
        return folder
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    try:
        return Path(snapshot_download(str(model), local_files_only=True))
    except (LocalEntryNotFoundError, HFValidationError, OSError):
        return None


def copy_processor_files(source: Path | None, target: Path) -> list[str]:
    """Copy the tokenizer, processor, chat-template and generation files of a model folder; returns their names."""
    copied: list[str] = []
    if source is None:
        return copied
    for name in PROCESSOR_FILES:
        if (source / name).is_file():
            shutil.copyfile(source / name, target / name)
            copied.append(name)
    return copied


def merge_adapter(
    model: str | Path, adapter: str | Path, output_dir: str | Path, dtype: str = "bfloat16"
) -> Path:
    """Merge a LoRA adapter into the base weights and write a model folder vLLM (or transformers) can load.

    The folder gets the merged weights and config plus the base model's own tokenizer, image and
    video processor, processor, chat-template and generation files (:data:`PROCESSOR_FILES`), so
    vLLM builds the same processor as for the base model (for Qwen3-VL: its patch size, pixel budget
    and video processor). Files the base folder lacks are written from the loaded tokenizer and
    image processor. A folder already holding a finished merge of the same pair is reused.

    Raises:
        `AdapterNotAppliedError`: when the adapter's LoRA ``B`` matrices are all zero (merging would
            change nothing).
    """
    import torch
    from peft import PeftModel
    from transformers import AutoModelForImageTextToText, AutoTokenizer
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    output = Path(output_dir)
    marker = output / "merged_from.json"
    source = {"model": str(model), "adapter": str(Path(adapter).resolve()), "layout": 2}
    if marker.is_file() and json.loads(marker.read_text()) == source:
        logger.info("reusing the merged model in %s", output)
        return output
    logger.info("merging adapter %s into %s -> %s", adapter, model, output)
    base = AutoModelForImageTextToText.from_pretrained(str(model), dtype=getattr(torch, dtype))
    peft_model = PeftModel.from_pretrained(base, str(adapter))
    if lora_b_is_zero(peft_model):
        raise AdapterNotAppliedError(
            f"adapter {adapter} has only zero LoRA B weights: it does not change the model"
        )
    merged = peft_model.merge_and_unload()
    output.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(output)
    copied = copy_processor_files(local_model_folder(model), output)
    if "tokenizer_config.json" not in copied:
        AutoTokenizer.from_pretrained(str(model)).save_pretrained(output)
    if "preprocessor_config.json" not in copied:
        Qwen2VLImageProcessorPil.from_pretrained(str(model)).save_pretrained(output)
    logger.info("merged model in %s with the base model's %s", output, ", ".join(copied) or "no extra files")
    marker.write_text(json.dumps(source))
    return output


# --------------------------------------------------------------------------------------------------
# transformers
# --------------------------------------------------------------------------------------------------


class TransformersBackend:
    """``generate`` of a local Qwen-VL model (optionally with a PEFT adapter), batched, greedy by default.

    Args:
        model (`str`): model folder or cached hub name (nothing is downloaded offline).
        adapter (`str`, *optional*): PEFT LoRA adapter folder.
        family (`str`, *optional*): box-convention family; read from the config when omitted.
        device (`str`, *optional*): ``cuda``, ``cpu``...; the GPU when there is one.
        dtype (`str`, *optional*, defaults to `"auto"`): ``bfloat16`` on GPU and ``float32`` on CPU when ``auto``.
        settings ([`GenerationSettings`], *optional*): decoding settings.
        attn_implementation (`str`, *optional*): e.g. ``flash_attention_2``.
    """

    name = "transformers"

    def __init__(
        self,
        model: str,
        adapter: str | None = None,
        *,
        family: str | None = None,
        device: str | None = None,
        dtype: str = "auto",
        settings: GenerationSettings | None = None,
        attn_implementation: str | None = None,
    ):
        import torch
        from transformers import AutoModelForImageTextToText

        from training.models import detect_family, load_processor

        self.settings = settings or GenerationSettings()
        self.model_name, self.adapter = model, adapter
        self.family = family or detect_family(model)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if dtype == "auto":
            dtype = "bfloat16" if self.device.startswith("cuda") else "float32"
        kwargs: dict[str, Any] = {"dtype": getattr(torch, dtype)}
        if attn_implementation:
            kwargs["attn_implementation"] = attn_implementation
        self.processor = load_processor(model, self.family)
        self.tokenizer = self.processor.tokenizer
        base = AutoModelForImageTextToText.from_pretrained(model, **kwargs)
        loaded: PreTrainedModel | PeftModel = base
        if adapter:
            from peft import PeftModel

            loaded = PeftModel.from_pretrained(base, adapter)
            if lora_b_is_zero(loaded):
                raise AdapterNotAppliedError(
                    f"adapter {adapter} has only zero LoRA B weights: it does not change the model"
                )
            logger.info("applied adapter %s to %s", adapter, model)
        # transformers wraps `PreTrainedModel.to` with `functools.wraps`: mypy reads it as unbound
        self.model = loaded.to(self.device).eval()  # type: ignore[arg-type]
        generation_config = getattr(self.model, "generation_config", None)
        eos = getattr(generation_config, "eos_token_id", None)
        eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos] if eos is not None else [])
        if self.tokenizer.eos_token_id is not None:
            eos_ids.add(self.tokenizer.eos_token_id)
        self.eos_token_ids = eos_ids
        self.pad_token_id = (
            self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else next(iter(eos_ids))
        )

    def close(self) -> None:
        """Release the model."""
        self.model = None

    def _prompt_texts(self, requests: Sequence[GenerationRequest]) -> list[str]:
        return [
            self.processor.apply_chat_template(
                messages_with_images(request.messages, len(request.images)),
                tokenize=False,
                add_generation_prompt=True,
            )
            for request in requests
        ]

    def _encode(self, requests: Sequence[GenerationRequest]):
        images = [decode_image(cell) for request in requests for cell in request.images]
        return self.processor(
            text=self._prompt_texts(requests), images=images or None, padding=True, return_tensors="pt"
        ).to(self.device)

    def generate(
        self, requests: Sequence[GenerationRequest], on_result: ResultCallback | None = None
    ) -> list[Generation]:
        """Generate one completion per request, ``batch_size`` at a time (each batch reported when done)."""
        import torch

        results: list[Generation] = []
        settings = self.settings
        sampling: dict[str, bool | float] = {"do_sample": False}
        if settings.temperature > 0:
            sampling = {"do_sample": True, "temperature": settings.temperature, "top_p": settings.top_p}
            torch.manual_seed(settings.seed)
        for batch in chunks(list(requests), settings.batch_size):
            done = len(results)
            inputs = self._encode(batch)
            with torch.no_grad():
                output = self.model.generate(
                    **inputs,
                    max_new_tokens=settings.max_new_tokens,
                    pad_token_id=self.pad_token_id,
                    **sampling,
                )
            generated = output[:, inputs["input_ids"].shape[1] :].tolist()
            for ids in generated:
                results.append(self._completion(ids))
            if on_result is not None:
                for position in range(done, len(results)):
                    on_result(position, results[position])
        return results

    def _completion(self, ids: list[int]) -> Generation:
        stop = next((position for position, token in enumerate(ids) if token in self.eos_token_ids), None)
        kept = ids[:stop] if stop is not None else ids
        text = self.tokenizer.decode(kept, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        finish = "stop" if stop is not None or len(ids) < self.settings.max_new_tokens else "length"
        return Generation(
            text=text, finish_reason=finish, completion_tokens=len(kept) + (1 if stop is not None else 0)
        )

    def box_entropies(
        self, requests: Sequence[GenerationRequest], completions: Sequence[str | None]
    ) -> list[list[float]]:
        """Coordinate-digit uncertainty ``H`` of every valid reasoning box, from one scoring pass.

        The completion is tokenised after the prompt; one no-grad backbone pass runs over prompt and
        completion, and the output head is applied only where a coordinate digit is predicted
        (:func:`training.entropy.selective_entropy_pass`). ``H`` per box is the reward library's
        :func:`~training.rewards.confidence.box_uncertainties`, so boxes and values cannot drift apart.

        Returns:
            `list[list[float]]`: per completion, one ``H`` in [0, 1] per valid reasoning-segment box
            (empty when it drew none).
        """
        import torch
        from trl.trainer.utils import pad

        from training.entropy import (
            CompletionTokenDecoder,
            coordinate_token_indices,
            scatter_entropies,
            selective_entropy_pass,
        )
        from training.rewards.confidence import box_uncertainties

        decoder = CompletionTokenDecoder(self.tokenizer)
        results: list[list[float]] = [[] for _ in requests]
        wanted = []
        for index, completion in enumerate(completions):
            if not completion:
                continue
            ids = self.tokenizer(completion, add_special_tokens=False)["input_ids"]
            tokens = decoder.decode(ids, expected_text=completion)
            positions = coordinate_token_indices(tokens) if "".join(tokens) == completion else []
            if positions:
                wanted.append((index, ids, tokens, positions))
        for batch in tqdm(list(chunks(wanted, self.settings.batch_size)), desc="box entropies", leave=False):
            inputs = self._encode([requests[index] for index, _, _, _ in batch])
            prompt_ids, prompt_mask = inputs["input_ids"], inputs["attention_mask"]
            completion_ids = [torch.tensor(ids) for _, ids, _, _ in batch]
            padded = pad(completion_ids, padding_value=self.pad_token_id, padding_side="right").to(
                self.device
            )
            completion_mask = pad(
                [torch.ones_like(ids) for ids in completion_ids], padding_value=0, padding_side="right"
            )
            input_ids = torch.cat([prompt_ids, padded], dim=1)
            attention_mask = torch.cat([prompt_mask, completion_mask.to(self.device)], dim=1)
            forward_kwargs = {key: inputs[key] for key in ("pixel_values", "image_grid_thw") if key in inputs}
            if "mm_token_type_ids" in inputs:
                forward_kwargs["mm_token_type_ids"] = torch.cat(
                    [inputs["mm_token_type_ids"], torch.zeros_like(padded)], dim=1
                )
            prompt_length = prompt_ids.shape[1]
            targets = [[prompt_length + position for position in positions] for _, _, _, positions in batch]
            values = selective_entropy_pass(self.model, input_ids, attention_mask, targets, forward_kwargs)
            for (index, _, tokens, positions), row_values in zip(batch, values, strict=True):
                entropies = scatter_entropies(len(tokens), positions, row_values.tolist())
                results[index] = box_uncertainties(tokens, entropies)
        return results


# --------------------------------------------------------------------------------------------------
# vLLM
# --------------------------------------------------------------------------------------------------


class VllmBackend:
    """vLLM offline inference of a Qwen-VL model, with its adapter served as LoRA or merged, and checked.

    Args:
        model (`str`): base model folder or name.
        adapter (`str`, *optional*): PEFT LoRA adapter folder.
        family (`str`, *optional*): box-convention family; read from the config when omitted.
        settings ([`GenerationSettings`], *optional*): decoding settings.
        adapter_mode (`str`, defaults to `"auto"`): ``lora`` (a LoRA request per prompt), ``merge`` (merge
            into the base weights first), or ``auto`` (merge when the adapter adapts the vision encoder,
            which vLLM's LoRA does not serve).
        merged_dir (`str`, *optional*): where a merged model is written (required for ``merge``).
        tensor_parallel_size (`int`, defaults to `1`), gpu_memory_utilization (`float`, defaults to `0.9`),
        max_model_len (`int`, *optional*): vLLM engine settings.
    """

    name = "vllm"

    def __init__(
        self,
        model: str,
        adapter: str | None = None,
        *,
        family: str | None = None,
        settings: GenerationSettings | None = None,
        adapter_mode: str = "auto",
        merged_dir: str | None = None,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        max_images_per_prompt: int = 4,
    ):
        try:
            from vllm import LLM
            from vllm.lora.request import LoRARequest
        except ImportError as error:
            raise ImportError("the vllm backend needs vLLM and a GPU: pip install -e '.[gpu]'") from error
        from training.models import detect_family, load_processor

        self.settings = settings or GenerationSettings()
        self.model_name, self.adapter = model, adapter
        self.family = family or detect_family(model)
        self.processor = load_processor(model, self.family)
        self.adapter_mode = resolve_adapter_mode(adapter, adapter_mode)
        model_path = model
        if self.adapter_mode == "merge":
            if not merged_dir:
                raise ValueError("merging the adapter needs merged_dir")
            assert adapter is not None  # `resolve_adapter_mode` merges only an adapter that is given
            model_path = str(merge_adapter(model, adapter, merged_dir))
        engine_kwargs: dict[str, Any] = {
            "model": model_path,
            "tensor_parallel_size": tensor_parallel_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            "seed": self.settings.seed,
            "limit_mm_per_prompt": {"image": max_images_per_prompt},
        }
        if max_model_len:
            engine_kwargs["max_model_len"] = max_model_len
        self.lora_request = None
        if self.adapter_mode == "lora":
            engine_kwargs.update(enable_lora=True, max_lora_rank=_adapter_rank(adapter))
            self.lora_request = LoRARequest("evaluated_adapter", 1, str(adapter))
        self.llm = LLM(**engine_kwargs)
        self._adapter_checked = self.adapter_mode != "lora"

    def close(self) -> None:
        """Shut the engine down and return its GPU memory (for the transformers scoring pass that follows).

        Dropping the ``LLM`` object is not enough: vLLM's engine core (a separate process in vLLM 1)
        and its distributed state hold the weights and the KV cache until they are shut down.
        """
        llm, self.llm = self.llm, None
        if llm is not None:
            release_vllm_engine(llm)

    def _prompt(self, request: GenerationRequest) -> dict:
        text = self.processor.apply_chat_template(
            messages_with_images(request.messages, len(request.images)),
            tokenize=False,
            add_generation_prompt=True,
        )
        prompt: dict[str, Any] = {"prompt": text}
        if request.images:
            prompt["multi_modal_data"] = {"image": [decode_image(cell) for cell in request.images]}
        return prompt

    def check_adapter(self, request: GenerationRequest) -> float:
        """Compare the prompt log-probabilities of one request with and without the LoRA adapter.

        Raises:
            `AdapterNotAppliedError`: when the adapter changes none of them.
        """
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=1)
        prompt = self._prompt(request)
        base = self.llm.generate([prompt], params, use_tqdm=False)[0]
        adapted = self.llm.generate([prompt], params, lora_request=self.lora_request, use_tqdm=False)[0]
        effect = adapter_effect(_prompt_token_logprobs(base), _prompt_token_logprobs(adapted))
        require_adapter_effect(effect, str(self.adapter))
        logger.info(
            "adapter %s is applied (largest prompt log-probability change %.4f)", self.adapter, effect
        )
        return effect

    def generate(
        self, requests: Sequence[GenerationRequest], on_result: ResultCallback | None = None
    ) -> list[Generation]:
        """Generate one completion per request in one ``LLM.generate`` call (vLLM schedules the batch itself)."""
        from vllm import SamplingParams

        if not requests:
            return []
        if not self._adapter_checked:
            self.check_adapter(requests[0])
            self._adapter_checked = True
        settings = self.settings
        params = SamplingParams(
            max_tokens=settings.max_new_tokens,
            temperature=settings.temperature,
            top_p=settings.top_p,
            seed=settings.seed,
        )
        outputs = self.llm.generate(
            [self._prompt(request) for request in requests], params, lora_request=self.lora_request
        )
        results = []
        for position, output in enumerate(outputs):
            results.append(vllm_generation(output))
            if on_result is not None:
                on_result(position, results[-1])
        return results


def vllm_generation(output: Any) -> Generation:
    """A :class:`Generation` from a vLLM ``RequestOutput`` (its first completion).

    >>> from types import SimpleNamespace
    >>> done = SimpleNamespace(text="</think>A", finish_reason="stop", token_ids=[1, 2, 3])
    >>> vllm_generation(SimpleNamespace(outputs=[done]))
    Generation(text='</think>A', finish_reason='stop', completion_tokens=3, error=None)
    """
    completion = output.outputs[0]
    return Generation(
        text=completion.text,
        finish_reason="length" if completion.finish_reason == "length" else "stop",
        completion_tokens=len(completion.token_ids),
    )


def release_vllm_engine(llm: Any) -> None:
    """Shut down a vLLM ``LLM``'s engine and distributed state, then free the CUDA cache."""
    import gc

    import torch

    engine = getattr(llm, "llm_engine", None)
    core = getattr(engine, "engine_core", None)
    if core is not None and hasattr(core, "shutdown"):
        core.shutdown()  # vLLM 1: stops the engine-core process that holds the GPU memory
    if engine is not None and hasattr(engine, "model_executor"):
        try:
            del engine.model_executor  # vLLM 0.x: the executor holds the workers and their memory
        except AttributeError:
            logger.debug("the engine's model executor cannot be dropped")
    del llm, engine, core
    try:
        from vllm.distributed.parallel_state import destroy_distributed_environment, destroy_model_parallel
    except ImportError:
        logger.debug("vLLM's parallel state cannot be imported: nothing to tear down")
    else:
        destroy_model_parallel()
        destroy_distributed_environment()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
    logger.info("released the vLLM engine")


def _adapter_rank(adapter: str | None) -> int:
    """``max_lora_rank`` for an adapter: its largest rank (``r``, ``rank_pattern``) rounded up to one vLLM accepts.

    vLLM only accepts the ranks of :data:`VLLM_LORA_RANKS` (an adapter of rank 24 needs 32).
    """
    config = json.loads((Path(str(adapter)) / "adapter_config.json").read_text())
    ranks = [
        int(config.get("r") or 8),
        *[int(value) for value in (config.get("rank_pattern") or {}).values()],
    ]
    return vllm_lora_rank(max(ranks))


def _prompt_token_logprobs(output) -> list[float]:
    """Log-probabilities of the actual prompt tokens from a vLLM ``RequestOutput`` (the first has none)."""
    values = []
    for token_id, entry in zip(output.prompt_token_ids, output.prompt_logprobs or [], strict=False):
        if entry is None or token_id not in entry:
            continue
        values.append(float(entry[token_id].logprob))
    return values


# --------------------------------------------------------------------------------------------------
# OpenAI-compatible APIs
# --------------------------------------------------------------------------------------------------


class _ReplyRecorder:
    """Wraps the LLM layer's provider adapter: keeps each reply's finish reason and reports answers as they arrive.

    The layer's :class:`~model_clients.LLMResult` does not carry the provider's finish reason; this adapter sees
    every reply at the provider boundary, so the backend can tell a ``length`` stop from a normal one.
    """

    def __init__(self, provider: Any):
        self.inner = provider
        self.name, self.model = provider.name, provider.model
        self.on_reply: Callable[[Any, Any], None] | None = None

    def send(self, request: Any, parameters: Any) -> Any:
        reply = self.inner.send(request, parameters)
        if self.on_reply is not None:
            self.on_reply(request, reply)
        return reply

    def close(self) -> None:
        self.inner.close()


class OpenAIBackend:
    """A chat model behind an OpenAI-compatible API (or Anthropic), through the project's LLM layer.

    Requests run concurrently with the layer's retries and rate limit; failures (after the retries)
    come back as ``finish_reason="error"``. The provider's own finish reason is kept (``length``, or
    Anthropic's ``max_tokens``, marks a truncated completion); an answer served from the layer's
    response cache, which does not store it, falls back to ``length`` when it used the whole token
    budget. Each answer is reported through ``on_result`` the moment it arrives. The endpoint
    (:func:`endpoint_of`) is part of the response-cache key, so the same model name on another server
    never reuses answers.

    Args:
        model (`str`): the API's model name.
        base_url (`str`, *optional*): API root (a vLLM server: ``http://host:8000/v1``).
        api_key (`str`, *optional*): the key; read from ``api_key_env`` when omitted.
        api_key_env (`str`, defaults to `"OPENAI_API_KEY"`): environment variable holding the key.
        provider (`str`, defaults to `"openai"`): ``openai`` or ``anthropic``.
        family (`str`, defaults to `"qwen2_vl"`): coordinate wording of the prompts (0..1000 grid).
        settings ([`GenerationSettings`], *optional*): decoding settings.
        cache_path (`str`, *optional*): the LLM layer's response cache file (in memory when omitted;
            ``spatial-eval``'s prediction cache keeps every answer anyway).
        max_concurrency (`int`, defaults to `8`): requests in flight.
        timeout_s (`float`, defaults to `120.0`): per-request timeout.
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        provider: str = "openai",
        family: str = "qwen2_vl",
        settings: GenerationSettings | None = None,
        cache_path: str | Path | None = None,
        max_concurrency: int = 8,
        timeout_s: float = 120.0,
        max_retries: int = 5,
    ):
        from model_clients import LLMClient, LLMClientConfig
        from model_clients.providers import build_provider as build_chat_provider

        self.settings = settings or GenerationSettings()
        self.model_name, self.adapter, self.family = model, None, family
        self.endpoint = endpoint_of(provider, base_url)
        key = api_key or os.environ.get(api_key_env)
        if not key and base_url is None:
            raise ValueError(
                f"no API key: set {api_key_env} (or pass base_url for a local OpenAI-compatible server)"
            )
        config = LLMClientConfig(
            provider=provider,
            model=model,
            base_url=base_url,
            api_key=key or "unused",
            temperature=self.settings.temperature,
            max_tokens=self.settings.max_new_tokens,
            cache_path=cache_path,
            max_concurrency=max_concurrency,
            timeout_s=timeout_s,
            max_retries=max_retries,
            seed=self.settings.seed,
        )
        self._recorder = _ReplyRecorder(
            build_chat_provider(
                provider, model, api_key=config.api_key, base_url=base_url, timeout_s=timeout_s
            )
        )
        self.client = LLMClient(config, provider=self._recorder)
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the client (and its cache)."""
        self.client.close()

    def _request(self, request: GenerationRequest, position: int):
        from model_clients import LLMRequest

        system = "\n\n".join(str(m["content"]) for m in request.messages if m.get("role") == "system") or None
        user = "\n\n".join(str(m["content"]) for m in request.messages if m.get("role") == "user")
        return LLMRequest(
            template_name="spatial_eval",
            # the endpoint joins the response-cache key (which holds provider and model but no base URL)
            template_version=f"{PROMPT_TEMPLATE_VERSION}+{content_hash(self.endpoint, 12)}",
            prompt=user,
            system=system,
            images=tuple(cell["bytes"] for cell in request.images),
            parameters={"temperature": self.settings.temperature, "max_tokens": self.settings.max_new_tokens},
            request_id=str(position),
        )

    def _from_reply(self, reply: Any) -> Generation:
        tokens = reply.usage.completion_tokens or None
        return Generation(reply.raw_text, self._finish(reply.finish_reason, tokens), tokens)

    def _finish(self, finish_reason: str | None, tokens: int | None) -> str:
        if finish_reason:
            return str(finish_reason)
        # Not reported (a server that omits it, or an answer from the response cache): a completion
        # that used the whole budget is taken as cut by the limit.
        return "length" if tokens is not None and tokens >= self.settings.max_new_tokens else "stop"

    def generate(
        self, requests: Sequence[GenerationRequest], on_result: ResultCallback | None = None
    ) -> list[Generation]:
        """One API call per request (concurrent, retried); each answer is reported as soon as it arrives."""
        reported: dict[int, Generation] = {}

        def on_reply(llm_request: Any, reply: Any) -> None:
            position = int(llm_request.request_id)
            generation = self._from_reply(reply)
            with self._lock:
                if position in reported:
                    return  # a re-asked request: the first answer was already reported
                reported[position] = generation
            if on_result is not None:
                on_result(position, generation)

        self._recorder.on_reply = on_reply
        try:
            results = self.client.run_batch(
                [self._request(request, position) for position, request in enumerate(requests)],
                progress=False,
            )
        finally:
            self._recorder.on_reply = None
        finish_by_key = {
            result.cache_key: reported[position].finish_reason
            for position, result in enumerate(results)
            if position in reported
        }
        generations = []
        for position, result in enumerate(results):
            if position in reported:
                generations.append(reported[position])
                continue
            if not result.ok:
                generation = Generation(None, "error", None, f"{result.status}: {result.error}")
            else:
                text = result.raw_text if result.raw_text is not None else str(result.data)
                tokens = result.usage.completion_tokens or None
                generation = Generation(
                    text, self._finish(finish_by_key.get(result.cache_key), tokens), tokens
                )
            generations.append(generation)
            if on_result is not None:
                on_result(position, generation)
        return generations


def build_backend(kind: str, model: str, adapter: str | None = None, **options: Any):
    """Construct a backend by name (``transformers``, ``vllm``, ``openai``) with its keyword options."""
    if kind == "transformers":
        return TransformersBackend(model, adapter, **options)
    if kind == "vllm":
        return VllmBackend(model, adapter, **options)
    if kind == "openai":
        if adapter:
            raise ValueError(
                "the openai backend cannot apply an adapter: serve it (e.g. vLLM --lora-modules) and name it as --model"
            )
        return OpenAIBackend(model, **options)
    raise ValueError(f"unknown backend {kind!r}; expected one of {', '.join(BACKENDS)}")
