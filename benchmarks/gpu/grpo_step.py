"""One real GRPO step of a Qwen3-VL-4B-shaped policy, with torch and transformers only.

What a SpatialCORE step costs on the GPU, measured without TRL, peft or vLLM (a bare GPU machine has
none of them and a vLLM wheel does not fit in what can be carried there): a micro-batch of 8
completions of 3,072 tokens after a prompt with one 640x480 image (300 image tokens), the policy with
LoRA r 32 / alpha 64 on every language linear layer and r 4 / alpha 8 on every vision linear layer
(fp32 adapters, as peft creates them), gradient checkpointing, bf16 weights. One step is what TRL 1.16
runs after generation with vLLM importance sampling on:

1. the no-grad log-prob pass of the old policy (dropout off); with confidence weighting it also
   returns every completion token's full-vocabulary entropy, from which the coordinate digits' box
   entropies are taken (`training.entropy.coordinate_token_indices` on the decoded completion);
2. the reference pass (the base model, adapters off) for the KL term (beta 0.01);
3. group-relative advantages (G 4) and the GRPO loss (Eq. 11, TRL's `grpo`), backward, AdamW.

The output head is applied in 512-token chunks, each recomputed in the backward pass, as TRL's fused
log-prob head does: the full logits (8 x 3,072 x 151,936) are never held. Completions are the
SpatialCORE format (two boxes, reasoning, `</think>`, a letter) followed by random tokens up to 3,072,
so the entropy work is real. Weights are random: they cost what trained ones cost.
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path

import torch
from torch import nn

HEAD_CHUNK_TOKENS = 512


class LoRALinear(nn.Module):
    """A frozen linear layer plus a trainable low-rank update (fp32 A and B, B starting at zero)."""

    def __init__(self, base: nn.Linear, rank: int, alpha: int, dropout: float = 0.05):
        super().__init__()
        self.base = base
        self.scaling = alpha / rank
        self.dropout = nn.Dropout(dropout)
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features, device=base.weight.device))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank, device=base.weight.device))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.enabled = True

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        output = self.base(hidden)
        if not self.enabled:
            return output
        update = self.dropout(hidden).to(self.lora_A.dtype) @ self.lora_A.t() @ self.lora_B.t()
        return output + (update * self.scaling).to(output.dtype)


def add_lora(
    model: nn.Module,
    language_rank: int = 32,
    language_alpha: int = 64,
    vision_rank: int = 4,
    vision_alpha: int = 8,
) -> list[LoRALinear]:
    """Wrap every linear layer but the output head; vision layers get their own rank (the paper's set-up)."""
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    targets = [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, nn.Linear) and not name.endswith("lm_head")
    ]
    adapters = []
    for name, module in targets:
        vision = ".visual." in f".{name}."
        adapter = LoRALinear(
            module, vision_rank if vision else language_rank, vision_alpha if vision else language_alpha
        )
        parent_name, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, child, adapter)
        adapters.append(adapter)
    return adapters


def _head_chunk(head: nn.Module, hidden: torch.Tensor, targets: torch.Tensor, with_entropy: bool):
    logits = head(hidden).float()
    log_probs = torch.log_softmax(logits, dim=-1)
    chosen = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    if not with_entropy:
        return chosen, torch.zeros_like(chosen)
    return chosen, -(log_probs.exp() * log_probs).sum(-1)


def completion_log_probs(model, inputs: dict, completion_ids: torch.Tensor, with_entropy: bool, grad: bool):
    """Per-token log-probs (and entropies) of the completions; the head runs chunk by chunk, recomputed."""
    length = completion_ids.shape[1]
    outputs = model.model(**inputs, use_cache=False)
    hidden = outputs.last_hidden_state[:, -length - 1 : -1, :]
    head = model.lm_head
    log_probs, entropies = [], []
    for start in range(0, length, HEAD_CHUNK_TOKENS):
        end = min(start + HEAD_CHUNK_TOKENS, length)
        chunk, targets = hidden[:, start:end], completion_ids[:, start:end]
        if grad:
            values = torch.utils.checkpoint.checkpoint(
                _head_chunk, head, chunk, targets, with_entropy, use_reentrant=False
            )
        else:
            values = _head_chunk(head, chunk, targets, with_entropy)
        log_probs.append(values[0])
        entropies.append(values[1])
    return torch.cat(log_probs, dim=1), torch.cat(entropies, dim=1)


def forced_completions(
    tokenizer, count: int, length: int, vocab_size: int, seed: int = 0
) -> tuple[torch.Tensor, list[str]]:
    """`count` completions of exactly `length` tokens: the SpatialCORE format, then random tokens."""
    generator = torch.Generator().manual_seed(seed)
    rows, texts = [], []
    for index in range(count):
        text = (
            f'{{"bbox_2d": [{120 + index}, 340, 568, 902], "label": "red chair"}}\n'
            f'{{"bbox_2d": [560, {120 + index}, 760, 640], "label": "blue lamp"}}\n'
            f"The chair is left of the lamp.</think>{'ABCD'[index % 4]}"
        )
        ids = tokenizer(text, add_special_tokens=False)["input_ids"][:length]
        filler = torch.randint(0, min(vocab_size, 151643), (length - len(ids),), generator=generator).tolist()
        rows.append(ids + filler)
        texts.append(text)
    return torch.tensor(rows), texts


def build_inputs(
    config,
    tokenizer,
    batch: int,
    prompt_text_tokens: int,
    image_size: tuple[int, int],
    completion_ids: torch.Tensor,
    device: str,
) -> dict:
    """input_ids / attention / mm_token_type_ids / pixel_values / image_grid_thw of one micro-batch."""
    vision = config.vision_config
    patch, merge, temporal = vision.patch_size, vision.spatial_merge_size, vision.temporal_patch_size
    grid_h, grid_w = image_size[1] // patch, image_size[0] // patch
    image_tokens = grid_h * grid_w // (merge * merge)
    text = tokenizer("Where is the red chair relative to the blue lamp? " * 64, add_special_tokens=False)[
        "input_ids"
    ]
    text = (text * (prompt_text_tokens // max(len(text), 1) + 1))[:prompt_text_tokens]
    prompt = (
        [config.vision_start_token_id]
        + [config.image_token_id] * image_tokens
        + [config.vision_end_token_id]
        + text
    )
    input_ids = torch.cat([torch.tensor([prompt] * batch), completion_ids], dim=1)
    token_types = torch.zeros_like(input_ids)
    token_types[:, 1 : 1 + image_tokens] = 1
    patches = grid_h * grid_w
    pixel_values = torch.randn(batch * patches, 3 * temporal * patch * patch)
    grids = torch.tensor([[1, grid_h, grid_w]] * batch)
    return (
        {
            "input_ids": input_ids.to(device),
            "attention_mask": torch.ones_like(input_ids).to(device),
            "mm_token_type_ids": token_types.to(device),
            "pixel_values": pixel_values.to(device),
            "image_grid_thw": grids.to(device),
        },
        len(prompt),
        image_tokens,
    )


def _set_adapters(adapters: list[LoRALinear], enabled: bool) -> None:
    for adapter in adapters:
        adapter.enabled = enabled


def run_step(
    model_folder: Path,
    confidence: bool,
    device: str,
    batch: int = 8,
    completion: int = 3072,
    prompt_text_tokens: int = 120,
    image_size: tuple[int, int] = (640, 480),
    group: int = 4,
    beta: float = 0.01,
    steps: int = 3,
) -> dict:
    """`steps` GRPO steps on one micro-batch; median time after the first, peak memory, box entropies."""
    from transformers import AutoConfig, AutoModelForImageTextToText, AutoTokenizer

    from training.entropy import CompletionTokenDecoder, coordinate_token_indices

    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(model_folder)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    with torch.device(device):
        model = AutoModelForImageTextToText.from_config(config, dtype=dtype, attn_implementation="sdpa")
    model.config.use_cache = False
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    adapters = add_lora(model)
    model.train()
    tokenizer = AutoTokenizer.from_pretrained(model_folder)
    completion_ids, texts = forced_completions(tokenizer, batch, completion, config.text_config.vocab_size)
    inputs, prompt_length, image_tokens = build_inputs(
        config, tokenizer, batch, prompt_text_tokens, image_size, completion_ids, device
    )
    completion_ids = completion_ids.to(device)
    decoder = CompletionTokenDecoder(tokenizer)
    trainable = [parameter for parameter in model.parameters() if parameter.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=5e-5)
    rewards = torch.rand(batch, generator=torch.Generator().manual_seed(1)).to(device)
    grouped = rewards.view(-1, group)
    advantages = ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + 1e-4)).view(-1)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    times, box_entropies = [], []
    for _ in range(steps):
        started = time.perf_counter()
        with torch.no_grad():
            dropout = [module for module in model.modules() if isinstance(module, nn.Dropout)]
            for module in dropout:
                module.eval()
            old_log_probs, entropies = completion_log_probs(
                model, inputs, completion_ids, confidence, grad=False
            )
            for module in dropout:
                module.train()
            if confidence:
                for row, text in enumerate(texts):
                    tokens = decoder.decode(
                        completion_ids[
                            row, : len(tokenizer(text, add_special_tokens=False)["input_ids"])
                        ].tolist()
                    )
                    positions = coordinate_token_indices(tokens)
                    box_entropies.append(float(entropies[row, positions].mean()) if positions else math.nan)
            _set_adapters(adapters, False)
            reference, _ = completion_log_probs(model, inputs, completion_ids, False, grad=False)
            _set_adapters(adapters, True)
        log_probs, _ = completion_log_probs(model, inputs, completion_ids, False, grad=True)
        ratio = torch.exp(log_probs - old_log_probs)
        clipped = torch.clamp(ratio, 0.8, 1.2)
        policy = -torch.min(ratio * advantages[:, None], clipped * advantages[:, None])
        kl = torch.exp(reference - log_probs) - (reference - log_probs) - 1
        loss = (policy + beta * kl).mean(dim=1).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None
    return {
        "status": "ok",
        "device": device,
        "dtype": str(dtype).removeprefix("torch."),
        "confidence": confidence,
        "batch": batch,
        "sequence": prompt_length + completion,
        "completion": completion,
        "image_tokens": image_tokens,
        "lora_parameters": sum(parameter.numel() for parameter in trainable),
        "steps": steps,
        "step_times_s": times,
        "step_time_s": statistics.median(times[1:] or times),
        "peak_memory_gib": peak,
        "mean_box_entropy": statistics.mean([v for v in box_entropies if not math.isnan(v)])
        if box_entropies
        else None,
    }


def preflight_estimate(
    model_folder: Path, batch: int, sequence: int, completion: int, image_tokens: int
) -> dict:
    """The preflight's estimate for this step (no vLLM engine, one GPU, LoRA, checkpointing), in GiB.

    The CUDA context and allocator allowance is left out: `max_memory_allocated` does not count it.
    """
    from training.architectures import load_shape
    from training.preflight import RUNTIME_RESERVE_GIB, Machine, memory_budget
    from training.recipe_file import Recipe

    shape = load_shape(str(model_folder))
    recipe = Recipe(
        "grpo",
        None,
        {
            "use_peft": True,
            "lora_r": 32,
            "language_lora": True,
            "vision_lora": True,
            "vision_lora_r": 4,
            "beta": 0.01,
            "dtype": "bfloat16",
            "per_device_train_batch_size": batch,
            "max_completion_length": completion,
            "gradient_checkpointing": True,
            "use_vllm": False,
        },
    )
    lines, _, _ = memory_budget(
        recipe, shape, Machine(gpus=1, gpu_memory_gib=None), 0, sequence, image_tokens
    )
    return {
        "total_gib": sum(line.gib for line in lines) - RUNTIME_RESERVE_GIB,
        "lines": {line.label: round(line.gib, 2) for line in lines if line.gib},
    }
