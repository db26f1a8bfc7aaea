"""`spatial-train preflight`: will a recipe start and fit on the GPUs it is meant for? Checked on any machine.

Usage::

    spatial-train preflight --config training/recipes/spatialcore_8b.yaml --gpus 8 --gpu h100-80gb
    spatial-train preflight --config training/recipes/spatialthinker_7b.yaml --accelerate-config \\
        training/recipes/accelerate/zero3_8gpu.yaml --data_root DATA
    spatial-train preflight --config training/recipes/spatialthinker_7b_vllm_server.yaml \\
        --server-tensor-parallel-size 4

Without a GPU and without downloads, from the model's shape (`training.architectures`: its local or
cached `config.json`, else the recipe models' published configs) and from the training table (the
longest prompt in tokens, image tokens included, plus `max_completion_length`), it prints one budget
per GPU: weights (ZeRO stage, LoRA), optimizer state and gradients, activations of one micro-batch,
the colocated vLLM engine's share (its weights, its overhead, the activations of its start-up profiling
run on a largest image, and the KV cache that is left, per token and for the context the data needs),
and a verdict. With `vllm_enable_sleep_mode` the engine is asleep while the policy trains and awake
beside the policy's weights and trainable state while it generates: both phases are budgeted. The GPU
is named (`--gpu h100-80gb`, `h200`, `a100-80gb`, `a100-40gb`, `l40s`: the memory CUDA reports for
each, `GPU_MEMORY_GIB`) or given in GiB (`--gpu-memory-gib`). It exits with status 1 and one sentence
naming the first violation:

* the vLLM engine cannot hold one sequence of its context (`vllm_max_model_length`; unset, vLLM sizes
  the engine for the model's full context: 262,144 tokens for Qwen3-VL, 36 GiB of KV cache for the 8B);
* the tensor-parallel size does not divide the attention heads (vLLM's or the `trl vllm-serve` one);
* the context is shorter than the longest prompt + completion (`vllm_max_model_length`, the model's
  positions);
* a batch setting TRL's `GRPOConfig` refuses (the generation batch not a multiple of the global batch or
  of the group size, fewer than 2 generations, ...): checked by the config's own rules, which a test holds
  equal to constructing it (`grpo_config_rules_problem`); with `--check-packages`, where TRL is installed,
  the config itself is constructed with the recipe's values for the number of GPUs (every rule of TRL and
  transformers, at the cost of importing them: several CPU seconds); `spatial-train grpo` constructs it on
  the machine itself;
* vision LoRA on a model without a vision encoder;
* the estimated peak does not fit in the GPU;
* DeepSpeed, vLLM or flash-attn missing (checked with `--check-packages`, and always inside
  `spatial-train grpo|sft`, which run the same checks on the machine itself before loading anything).

`vllm_max_model_length: auto` in a recipe is resolved here, by the same count: the longest prompt of
the data plus `max_completion_length`.

The memory figures are estimates (the formulas are in `memory_budget`); `benchmarks/gpu/run.sh`
prints one beside a measured peak. Text tokens are counted with the model's tokenizer when it is on
this machine; otherwise they are bounded from above by the prompt's UTF-8 bytes (byte-level BPE: every
token is at least one byte), and the table says so.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import logging
import math
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data_contracts.boxes import UnknownModelFamilyError
from training.architectures import (
    MODEL_TYPE_TO_FAMILY,
    ModelShape,
    UnknownArchitectureError,
    load_shape,
    local_model_folder,
)
from training.recipe_file import Recipe, RecipeFileError, read_recipe

logger = logging.getLogger(__name__)

GIB = 2**30
GPU_MEMORY_GIB = {
    "h100-80gb": 79.6,
    "h200": 139.7,
    "a100-80gb": 79.3,
    "a100-40gb": 39.5,
    "l40s": 44.3,
}
"""Memory of one GPU, by `--gpu` name: the total CUDA reports (`torch.cuda.get_device_properties(i).total_memory`,
GiB, rounded down), less than the marketing size (an "80 GB" H100 has 85,520,809,984 bytes, 79.6 GiB)."""
GPU_LABELS = {
    "h100-80gb": "H100 80GB",
    "h200": "H200 141GB",
    "a100-80gb": "A100 80GB",
    "a100-40gb": "A100 40GB",
    "l40s": "L40S 48GB",
}
DEFAULT_GPU = "h100-80gb"
H100_MEMORY_GIB = GPU_MEMORY_GIB[DEFAULT_GPU]
# CUDA context, NCCL buffers and the caching allocator's fragmentation, per GPU.
RUNTIME_RESERVE_GIB = 2.0
# vLLM's own use beyond weights, KV cache and its profiling run's activations: CUDA graphs, the sampler's
# buffers and memory outside torch (NCCL, cuBLAS workspaces).
VLLM_RUNTIME_GIB = 1.5
# TRL's colocated engine: `max_num_batched_tokens` (the language model's profiling run).
VLLM_BATCHED_TOKENS = 4096
# `trl vllm-serve --gpu_memory_utilization` default.
VLLM_SERVE_MEMORY_UTILIZATION = 0.9
# TRL's chunked log-prob head projects 4,096 tokens at a time.
LOGPROB_TILE_TOKENS = 4096
# The chat template's own tokens (role headers, a default system prompt, the generation prompt), an
# allowance on top of the message contents when no tokenizer is at hand.
TEMPLATE_TOKEN_ALLOWANCE = 48
VLLM_RECIPE_KEYS = ("vllm_max_model_length",)


class PreflightError(ValueError):
    """The preflight cannot run (no model, no usable row, a table without a prompt format)."""


# Bad input, each a one-line error (a missing table is a `FileNotFoundError`).
PREFLIGHT_INPUT_ERRORS = (
    RecipeFileError,
    PreflightError,
    UnknownArchitectureError,
    UnknownModelFamilyError,
    FileNotFoundError,
)


@dataclass
class Machine:
    """Where the recipe would run.

    Attributes:
        gpus: training processes, one per GPU (all machines together).
        gpu_memory_gib: memory of one GPU; `None` skips the memory checks (no GPU to check against).
        gpu_label: what the memory is (a `--gpu` name, `--gpu-memory-gib`, the GPU here), for the report.
        zero_stage: DeepSpeed ZeRO stage (0: DDP, no DeepSpeed); `None` follows the recipe (3 for full
            fine-tuning, as the recipes' ZeRO-3 accelerate configs; 0 for LoRA).
        server_tensor_parallel_size: `trl vllm-serve --tensor_parallel_size` of a server-mode run.
        check_packages: report a missing vLLM / DeepSpeed / flash-attn as a violation.
        trl_config: how the batch settings are checked: by `GRPOConfig`'s `rules` (no import), by constructing
            it (`construct`, where TRL is installed; else its rules), or `parsed`: the trainer's parser has built
            the config already (`machine_here`), so they hold.
    """

    gpus: int = 8
    gpu_memory_gib: float | None = H100_MEMORY_GIB
    zero_stage: int | None = None
    server_tensor_parallel_size: int | None = None
    check_packages: bool = False
    gpu_label: str = f"{GPU_LABELS[DEFAULT_GPU]}, --gpu {DEFAULT_GPU}"
    trl_config: str = "rules"

    @classmethod
    def named(cls, gpu: str, gpus: int = 8, **fields) -> Machine:
        """`gpus` GPUs of the named kind (a key of `GPU_MEMORY_GIB`).

        >>> machine = Machine.named("a100-40gb", gpus=4)
        >>> machine.gpu_memory_gib, machine.gpu_label
        (39.5, 'A100 40GB, --gpu a100-40gb')
        """
        if gpu not in GPU_MEMORY_GIB:
            raise PreflightError(
                f"unknown GPU {gpu!r}: name one of {', '.join(GPU_MEMORY_GIB)} or give --gpu-memory-gib"
            )
        return cls(
            gpus=gpus,
            gpu_memory_gib=GPU_MEMORY_GIB[gpu],
            gpu_label=f"{GPU_LABELS[gpu]}, --gpu {gpu}",
            **fields,
        )


@dataclass
class PromptScan:
    """The longest prompt of a training table, in the tokens the model will see.

    Attributes:
        table: the table read.
        rows: rows counted (after split, task-type and `max_train_samples` selection).
        longest_prompt: text + image tokens of the longest prompt.
        text_tokens, image_tokens, images: that prompt's parts.
        exact: counted with the model's tokenizer (`False`: an upper bound from UTF-8 bytes).
        longest_target: SFT: the longest target completion in tokens.
    """

    table: str
    rows: int
    longest_prompt: int
    text_tokens: int
    image_tokens: int
    images: int
    exact: bool
    longest_target: int | None = None


@dataclass
class BudgetLine:
    """One line of the per-GPU budget: what, GiB, how it was computed."""

    label: str
    gib: float
    how: str = ""


@dataclass
class Check:
    """One check: passed (`ok`), or the violation in one sentence; `None` when not checked here."""

    name: str
    ok: bool | None
    text: str


@dataclass
class Report:
    """What `run_preflight` found."""

    recipe: Recipe
    machine: Machine
    shape: ModelShape
    zero_stage: int
    scan: PromptScan | None
    needed_context: int
    engine_context: int | None
    lines: list[BudgetLine] = field(default_factory=list)
    engine_lines: list[BudgetLine] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    generation_gib: float | None = None
    """With `vllm_enable_sleep_mode`: one GPU while generating (the engine awake beside the policy), else None."""

    @property
    def training_gib(self) -> float:
        """One GPU while the policy trains (the budget lines' sum)."""
        return sum(line.gib for line in self.lines)

    @property
    def total_gib(self) -> float:
        """The estimated peak of one GPU: the larger of the training and the generating phase."""
        return max(self.training_gib, self.generation_gib or 0.0)

    @property
    def violations(self) -> list[Check]:
        """The failed checks, in the order they are checked."""
        return [check for check in self.checks if check.ok is False]

    @property
    def passed(self) -> bool:
        """Whether no check failed."""
        return not self.violations

    def first_violation(self) -> str | None:
        """The first failed check's sentence, or `None`."""
        return self.violations[0].text if self.violations else None

    def format(self) -> str:
        """The report as text: header, model and data, the budget table, the checks, the verdict."""
        out = io.StringIO()
        recipe, machine, shape = self.recipe, self.machine, self.shape
        memory = (
            f"{machine.gpu_memory_gib:g} GiB ({machine.gpu_label})"
            if machine.gpu_memory_gib
            else "memory not checked"
        )
        engine = "DDP (no DeepSpeed)" if self.zero_stage == 0 else f"DeepSpeed ZeRO-{self.zero_stage}"
        out.write(
            f"preflight of {recipe.path or 'the command-line recipe'} ({recipe.kind}): "
            f"{machine.gpus} GPU{'s' if machine.gpus != 1 else ''} x {memory}, {engine}\n"
        )
        vision = (
            f", vision {shape.vision_parameters() / 1e9:.2f} B" if shape.vision else ", no vision encoder"
        )
        out.write(
            f"model  {shape.name}: {shape.parameter_count() / 1e9:.2f} B parameters{vision}; {shape.num_layers} "
            f"layers, {shape.num_heads} heads / {shape.num_kv_heads} KV heads x {shape.head_dim}; context "
            f"{shape.max_position_embeddings:,} (from {shape.source})\n"
        )
        if self.scan is not None:
            scan = self.scan
            counted = "tokenizer" if scan.exact else "upper bound from UTF-8 bytes, no tokenizer here"
            tail = (
                f" + completion {recipe['max_completion_length']:,}"
                if recipe.kind == "grpo"
                else f" + target {scan.longest_target or 0:,}"
            )
            out.write(
                f"data   {scan.table}: {scan.rows:,} rows; longest prompt {scan.longest_prompt:,} tokens (text "
                f"{scan.text_tokens:,} by {counted}, {scan.images} image(s) {scan.image_tokens:,}){tail} = "
                f"{self.needed_context:,}\n"
            )
        else:
            out.write(f"data   not read: context {self.needed_context:,} from --prompt-tokens\n")
        width = max(len(line.label) for line in [*self.lines, *self.engine_lines]) + 2
        out.write(f"\nper GPU{' ' * (width - 7)}     GiB  how\n")
        for line in self.lines:
            out.write(f"  {line.label.ljust(width - 2)} {line.gib:7.2f}  {line.how}\n")
            if line.label.startswith("vLLM engine"):
                for part in self.engine_lines:
                    out.write(f"    {part.label.ljust(width - 4)} {part.gib:7.2f}  {part.how}\n")
        phases = [("total (estimate)", self.training_gib)]
        if self.generation_gib is not None:
            phases = [
                ("training (estimate)", self.training_gib),
                ("generating (estimate)", self.generation_gib),
            ]
        for label, gib in phases:
            if machine.gpu_memory_gib:
                out.write(
                    f"  {label.ljust(width - 2)} {gib:7.2f}  of {machine.gpu_memory_gib:g} GiB "
                    f"({machine.gpu_memory_gib - gib:+.2f} GiB left)\n"
                )
            else:
                out.write(f"  {label.ljust(width - 2)} {gib:7.2f}\n")
        if self.generation_gib is not None:
            out.write(
                "  (vllm_enable_sleep_mode: the engine sleeps while the policy trains; while it generates, the engine's "
                "share sits beside the policy's weights, reference, trainable state and runtime, without activations)\n"
            )
        out.write("\nchecks\n")
        for check in self.checks:
            mark = {True: "ok  ", False: "FAIL", None: "--  "}[check.ok]
            out.write(f"  {mark} {check.name}: {check.text}\n")
        if self.notes:
            out.write("\nnotes\n")
            for note in self.notes:
                out.write(f"  - {note}\n")
        verdict = self.first_violation()
        out.write(f"\nverdict: {'FAILS: ' + verdict if verdict else 'passes'}\n")
        return out.getvalue()


def _count(value: int) -> str:
    """A parameter count in B or M.

    >>> _count(8_767_123_696), _count(89_505_664)
    ('8.77 B', '89.5 M')
    """
    return f"{value / 1e9:.2f} B" if value >= 1e9 else f"{value / 1e6:.1f} M"


# ---------------------------------------------------------------------------------------- prompts


def _family(recipe: Recipe, shape: ModelShape) -> str:
    family = recipe["model_family"] or MODEL_TYPE_TO_FAMILY.get(shape.model_type)
    if family is None:
        raise UnknownModelFamilyError(shape.model_type)
    return family


def _prompt_format(recipe: Recipe) -> str:
    from training.prompts import FORMAT_OF_TABLE

    if recipe.kind == "sft":
        return "spatialcore"
    table = recipe["dataset_table"]
    fmt = recipe["prompt_format"] or FORMAT_OF_TABLE.get(table)
    if fmt is None:
        raise PreflightError(f"set prompt_format for table {table!r}")
    return fmt


def _image_size(cell) -> tuple[int, int] | None:
    data = cell.get("bytes") if isinstance(cell, dict) else None
    if not data:
        return None
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.size
    except (UnidentifiedImageError, OSError):
        return None


def _bound_tokens(messages: list[dict]) -> int:
    """An upper bound of the templated text tokens: UTF-8 bytes of each message plus its header."""
    total = TEMPLATE_TOKEN_ALLOWANCE
    for message in messages:
        content = message["content"]
        text = content if isinstance(content, str) else "".join(part.get("text", "") for part in content)
        total += len(text.encode("utf-8")) + len(str(message["role"])) + 4
    return total


def _with_images(messages: list[dict], images: int) -> list[dict]:
    """The messages as TRL hands them to the chat template: the images first in the first user turn."""
    result, placed = [], False
    for message in messages:
        if message["role"] == "user" and not placed:
            parts = [{"type": "image"} for _ in range(images)]
            parts.append({"type": "text", "text": str(message["content"])})
            result.append({"role": "user", "content": parts})
            placed = True
        else:
            result.append(
                {"role": message["role"], "content": [{"type": "text", "text": str(message["content"])}]}
            )
    return result


def load_tokenizer(model: str):
    """The model's tokenizer with its chat template when the model is on this machine; else `None`."""
    folder = local_model_folder(model)
    if folder is None:
        return None
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    if tokenizer.chat_template is None and (folder / "chat_template.jinja").is_file():
        tokenizer.chat_template = (folder / "chat_template.jinja").read_text()
    return tokenizer if tokenizer.chat_template is not None else None


class _TokenCounter:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def prompt(self, messages: list[dict], images: int) -> int:
        """Text tokens of the templated prompt, each image's placeholder token excluded."""
        text = self.tokenizer.apply_chat_template(
            _with_images(messages, images), tokenize=False, add_generation_prompt=True
        )
        count = len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return count - images  # the processor replaces each <|image_pad|> by the image's tokens

    def target(self, text: str) -> int:
        return len(self.tokenizer(text + "<|im_end|>\n", add_special_tokens=False)["input_ids"])


def _table_rows(recipe: Recipe, data_root: str | None, prompt_format: str):
    """(rows without image bytes, image sizes per row) of the recipe's selection of its table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from data_contracts.storage import default_storage_root, table_files

    table = recipe["dataset_table"]
    files = table_files(data_root or recipe["data_root"] or default_storage_root(), table)
    parts = [pq.read_table(path) for path in files]
    arrow = pa.concat_tables(parts, promote_options="default")
    split = recipe["dataset_split"]
    if split is not None and "split" in arrow.column_names:
        arrow = arrow.filter(pa.compute.equal(arrow["split"], split))
    task_types = recipe["include_task_types"]
    if task_types:
        column = recipe["task_type_column"] or "task_type"
        arrow = arrow.filter(pa.compute.is_in(arrow[column], value_set=pa.array(list(task_types))))
    limit = recipe["max_train_samples"]
    if limit is not None:
        arrow = arrow.slice(0, int(limit))
    image_column = "image" if prompt_format == "spatialcore" and "image" in arrow.column_names else "images"
    rows = arrow.drop_columns([c for c in ("image", "images") if c in arrow.column_names]).to_pylist()
    sizes: list[list[tuple[int, int]]] = []
    has_sizes = "image_width" in arrow.column_names and "image_height" in arrow.column_names
    if has_sizes and image_column == "image":
        sizes = [[(int(row["image_width"] or 0), int(row["image_height"] or 0))] for row in rows]
    elif image_column in arrow.column_names:
        for cells in arrow[image_column].to_pylist():
            cells = cells if isinstance(cells, list) else [cells]
            sizes.append([size for size in (_image_size(cell) for cell in cells) if size is not None])
    else:
        sizes = [[] for _ in rows]
    return table, rows, sizes


def scan_prompts(
    recipe: Recipe, shape: ModelShape, data_root: str | None = None, tokenizer=None
) -> PromptScan:
    """Find the longest prompt (text + image tokens) of the recipe's rows; for SFT also the longest target.

    Text is counted exactly with `tokenizer` (its chat template, images inserted as TRL inserts them),
    else bounded from above by UTF-8 bytes. Rows whose prompt cannot be built are skipped (the trainer
    quarantines them). To keep the exact count cheap, rows are tokenised in decreasing order of their
    bound, stopping once no remaining row can be longer.
    """
    from training.prompts import build_messages

    family = _family(recipe, shape)
    prompt_format = _prompt_format(recipe)
    table, rows, sizes = _table_rows(recipe, data_root, prompt_format)
    rule = shape.image_rule
    candidates = []
    for row, row_sizes in zip(rows, sizes, strict=True):
        try:
            messages = build_messages(prompt_format, row, family)
        except (ValueError, KeyError, TypeError):
            continue
        image_tokens = sum(rule.tokens(w, h) for w, h in row_sizes if w > 0 and h > 0) if rule else 0
        # each image also keeps its <|vision_start|> and <|vision_end|> tokens
        candidates.append(
            (_bound_tokens(messages) + 2 * len(row_sizes), image_tokens, messages, row, row_sizes)
        )
    if not candidates:
        raise PreflightError(f"table {table!r} has no row the recipe can build a prompt from")
    counter = _TokenCounter(tokenizer) if tokenizer is not None else None
    candidates.sort(key=lambda item: item[0] + item[1], reverse=True)
    best: tuple[int, int, int] | None = None
    for bound, image_tokens, messages, _, row_sizes in candidates:
        if counter is None:
            best = (bound, image_tokens, len(row_sizes))
            break
        if best is not None and bound + image_tokens <= best[0] + best[1]:
            break
        text = counter.prompt(messages, len(row_sizes))
        if best is None or text + image_tokens > best[0] + best[1]:
            best = (text, image_tokens, len(row_sizes))
    assert best is not None  # `candidates` is not empty: its first item always sets `best`
    longest_target = None
    if recipe.kind == "sft":
        longest_target = _longest_target(rows, family, counter)
    return PromptScan(
        table=table,
        rows=len(rows),
        longest_prompt=best[0] + best[1],
        text_tokens=best[0],
        image_tokens=best[1],
        images=best[2],
        exact=counter is not None,
        longest_target=longest_target,
    )


def _longest_target(rows: list[dict], family: str, counter: _TokenCounter | None) -> int:
    from training.sft import build_sft_targets

    texts = []
    for row in rows:
        if row.get("completion"):
            texts.append(str(row["completion"]))
            continue
        try:
            texts.append(build_sft_targets([row], family=family)[0])
        except (ValueError, KeyError, TypeError):
            continue
    if not texts:
        return 0
    if counter is None:
        return max(len(text.encode("utf-8")) for text in texts) + 4
    return max(counter.target(text) for text in texts)


# ---------------------------------------------------------------------------------------- budget


def _default_zero_stage(recipe: Recipe) -> int:
    return 0 if recipe["use_peft"] else 3


def _dtype_bytes(recipe: Recipe) -> int:
    return 4 if str(recipe["dtype"]) in ("float32", "torch.float32") else 2


def _vision_trainable(recipe: Recipe) -> bool:
    if recipe["use_peft"]:
        return bool(recipe["vision_lora"])
    return not recipe["freeze_vision"]


def _trainable_parameters(recipe: Recipe, shape: ModelShape) -> int:
    if recipe["use_peft"]:
        language = int(recipe["lora_r"]) if recipe["language_lora"] else None
        vision = int(recipe["vision_lora_r"]) if recipe["vision_lora"] and shape.vision else None
        return shape.lora_parameters(language, vision)
    frozen = shape.vision_parameters() if recipe["freeze_vision"] else 0
    return shape.parameter_count() - frozen


def layer_activation_elements(shape: ModelShape) -> int:
    """Elements one token keeps in one decoder layer during its backward pass (bf16, flash/SDPA attention).

    The norms' fp32 copies and inputs (about 6 hidden widths), q/k/v with their norms, rotary copies
    and the attention's own saved tensors (about 6 widths each of q and kv), and the MLP's gate, up,
    product and their gradients (about 6 intermediate widths).
    """
    q = shape.num_heads * shape.head_dim
    kv = shape.num_kv_heads * shape.head_dim
    return 6 * shape.hidden_size + 6 * q + 6 * kv + 6 * shape.intermediate_size


def activation_parts(
    shape: ModelShape,
    batch: int,
    sequence: int,
    completion: int,
    image_tokens: int,
    checkpointing: bool,
    vision_trainable: bool,
) -> dict[str, float]:
    """Bytes of the activations of one micro-batch of `batch` sequences of `sequence` tokens.

    * layer inputs kept by gradient checkpointing: layers x batch x sequence x hidden x 2 bytes (without
      checkpointing, every layer keeps its whole working set instead);
    * the working set of the layer being recomputed: batch x sequence x `layer_activation_elements` x 2;
    * TRL's chunked log-prob head (`fused_lm_head`: the logits are never materialised): the completion's
      hidden states in fp32 for their gradient, plus one 4,096-token tile of the vocabulary projection;
    * the vision encoder, when it trains (LoRA or unfrozen): the same two terms over its patches
      (4 per image token after the 2 x 2 merge).
    """
    tokens = batch * sequence
    layer = tokens * layer_activation_elements(shape) * 2
    kept = shape.num_layers * tokens * shape.hidden_size * 2 if checkpointing else shape.num_layers * layer
    head = (
        batch * completion * shape.hidden_size * 4
        + LOGPROB_TILE_TOKENS * min(shape.vocab_size, 32768) * 4 * 2
    )
    vision = 0.0
    if shape.vision is not None and vision_trainable and image_tokens:
        patches = batch * image_tokens * shape.vision.spatial_merge_size**2
        hv, iv = shape.vision.hidden_size, shape.vision.intermediate_size
        block = patches * (12 * hv + 6 * iv) * 2
        vision = (
            (shape.vision.depth * patches * hv * 2 + block) if checkpointing else shape.vision.depth * block
        )
    return {"kept": kept, "layer": layer if checkpointing else 0.0, "head": head, "vision": vision}


def memory_budget(
    recipe: Recipe, shape: ModelShape, machine: Machine, zero_stage: int, context: int, image_tokens: int
) -> tuple[list[BudgetLine], list[BudgetLine], dict]:
    """Per-GPU budget lines (and the vLLM engine's parts) of `recipe` on `machine`.

    Weights: parameters x dtype bytes, divided over the GPUs under ZeRO-3. The reference model (KL with
    `beta` > 0) costs a second copy when fine-tuning fully; with LoRA the base model with the adapter
    off is the reference. Trainable parameters: LoRA weights in fp32 (peft's default) with fp32
    gradients and AdamW's two moments, 16 bytes each; full fine-tuning under DeepSpeed keeps bf16
    gradients, fp32 master weights and two fp32 moments (14 bytes on top of the weight), under DDP bf16
    gradients and moments (6 bytes). ZeRO shards the optimizer state (stage >= 1), the gradients
    (>= 2) and the weights (3). ZeRO-3 also gathers the largest unit (the embedding, or a layer) twice
    (the one in use and the prefetched one). The colocated vLLM engine takes
    `vllm_gpu_memory_utilization` of the GPU; inside it, its weights (divided by its tensor-parallel
    size), `VLLM_RUNTIME_GIB`, the activations of its profiling run (`vllm_profile_bytes`), and the KV
    cache gets the rest. With `vllm_enable_sleep_mode` the engine's line is 0 (asleep while training) and
    the third value's `generation_gib` is the generating phase: every line but the activations, plus the
    engine's share.
    """
    gpus, dtype_bytes = machine.gpus, _dtype_bytes(recipe)
    lines = _weight_lines(recipe, shape, gpus, zero_stage, dtype_bytes)
    lines.append(_trainable_state_line(recipe, shape, gpus, zero_stage))
    if zero_stage >= 3:
        gathered = 2 * shape.largest_layer_parameters() * dtype_bytes
        lines.append(
            BudgetLine("ZeRO-3 gathered parameters", gathered / GIB, "the largest unit in use + prefetched")
        )
    lines.append(_activation_line(recipe, shape, context, image_tokens))
    lines.append(BudgetLine("CUDA context, NCCL, allocator", RUNTIME_RESERVE_GIB, "fixed allowance"))
    engine_lines: list[BudgetLine] = []
    engine: dict = {}
    if recipe["use_vllm"] and recipe["vllm_mode"] == "colocate" and machine.gpu_memory_gib:
        engine_lines, engine = _colocated_engine_lines(recipe, shape, machine, machine.gpu_memory_gib, lines)
    return lines, engine_lines, engine


def _weight_lines(
    recipe: Recipe, shape: ModelShape, gpus: int, zero_stage: int, dtype_bytes: int
) -> list[BudgetLine]:
    """Budget lines of the policy weights and of the reference model (a frozen copy only with KL and no LoRA)."""
    parameters = shape.parameter_count()
    shard = gpus if zero_stage >= 3 else 1
    lines = [
        BudgetLine(
            f"policy weights ({'fp32' if dtype_bytes == 4 else 'bf16'})",
            parameters * dtype_bytes / shard / GIB,
            f"{_count(parameters)} x {dtype_bytes} B"
            + (f" / {gpus} GPUs (ZeRO-3)" if shard > 1 else ", whole on each GPU"),
        )
    ]
    beta = float(recipe["beta"] or 0.0)
    if beta > 0 and not recipe["use_peft"]:
        lines.append(
            BudgetLine(
                "reference model",
                parameters * dtype_bytes / shard / GIB,
                f"beta {beta:g}: a frozen copy" + (" (ZeRO-3 sharded)" if shard > 1 else ""),
            )
        )
    else:
        lines.append(
            BudgetLine(
                "reference model",
                0.0,
                "LoRA: the base model with the adapter off" if beta > 0 else "beta 0: none",
            )
        )
    return lines


def _trainable_state_line(recipe: Recipe, shape: ModelShape, gpus: int, zero_stage: int) -> BudgetLine:
    """Budget line of the trainable parameters' weights, gradients and optimizer moments, as ZeRO shards them."""
    trainable = _trainable_parameters(recipe, shape)
    if recipe["use_peft"]:
        weight_bytes, gradient_bytes, optimizer_bytes = 4, 4, 8
        what = "LoRA fp32 weights, gradients, AdamW moments"
    elif zero_stage > 0:
        weight_bytes, gradient_bytes, optimizer_bytes = 0, 2, 12
        what = "bf16 gradients, fp32 master weights and AdamW moments"
    else:
        weight_bytes, gradient_bytes, optimizer_bytes = 0, 2, 4
        what = "bf16 gradients and AdamW moments"
    state = (
        weight_bytes * trainable / (gpus if zero_stage >= 3 else 1)
        + gradient_bytes * trainable / (gpus if zero_stage >= 2 else 1)
        + optimizer_bytes * trainable / (gpus if zero_stage >= 1 else 1)
    )
    per_parameter = weight_bytes + gradient_bytes + optimizer_bytes
    return BudgetLine(
        "trainable state",
        state / GIB,
        f"{_count(trainable)} trainable x {per_parameter} B ({what})"
        + (f", ZeRO-{zero_stage} sharded" if zero_stage else ""),
    )


def _activation_line(recipe: Recipe, shape: ModelShape, context: int, image_tokens: int) -> BudgetLine:
    """Budget line of the activations of one micro-batch (`activation_parts`), with its parts spelled out."""
    batch = int(recipe["per_device_train_batch_size"])
    completion = int(recipe["max_completion_length"]) if recipe.kind == "grpo" else context
    parts = activation_parts(
        shape,
        batch,
        context,
        completion,
        image_tokens,
        bool(recipe["gradient_checkpointing"]),
        _vision_trainable(recipe),
    )
    how = (
        f"micro-batch {batch} x {context:,} tokens: layer inputs {parts['kept'] / GIB:.2f}, "
        f"recomputed layer {parts['layer'] / GIB:.2f}, log-prob head {parts['head'] / GIB:.2f}, "
        f"vision {parts['vision'] / GIB:.2f}"
        + ("" if recipe["gradient_checkpointing"] else " (no gradient checkpointing)")
    )
    return BudgetLine("activations", sum(parts.values()) / GIB, how)


def _colocated_engine_lines(
    recipe: Recipe, shape: ModelShape, machine: Machine, gpu_memory_gib: float, lines: list[BudgetLine]
) -> tuple[list[BudgetLine], dict]:
    """The colocated vLLM engine: appends its share to `lines`; returns its own lines and `vllm_engine`'s parts."""
    utilization = float(recipe["vllm_gpu_memory_utilization"])
    tensor_parallel = int(recipe["vllm_tensor_parallel_size"] or 1)
    engine = vllm_engine(
        shape,
        utilization * gpu_memory_gib,
        tensor_parallel,
        dtype_bytes=2,
        max_sequences=_engine_max_sequences(recipe, machine),
    )
    sleep = bool(recipe["vllm_enable_sleep_mode"])
    share_how = f"vllm_gpu_memory_utilization {utilization:g} x {gpu_memory_gib:g} GiB"
    lines.append(
        BudgetLine(
            "vLLM engine (colocate)",
            0.0 if sleep else engine["share_gib"],
            f"{share_how}; asleep while training (vllm_enable_sleep_mode), awake while generating"
            if sleep
            else share_how,
        )
    )
    if sleep:
        engine["generation_gib"] = (
            sum(line.gib for line in lines if line.label != "activations") + engine["share_gib"]
        )
    profile = engine["profile"]
    engine_lines = [
        BudgetLine("engine weights", engine["weights_gib"], f"bf16, tensor parallel {tensor_parallel}"),
        BudgetLine(
            "engine profiling run",
            engine["profile_gib"],
            f"the larger of: the vision encoder on a largest image ({profile['image_tokens']:,} tokens) "
            f"{profile['vision'] / GIB:.2f}, the language model on {VLLM_BATCHED_TOKENS:,} batched tokens "
            f"and the sampler {profile['language'] / GIB:.2f}",
        ),
        BudgetLine("engine runtime", VLLM_RUNTIME_GIB, "CUDA graphs, sampler buffers, memory outside torch"),
        BudgetLine(
            "KV cache",
            max(engine["kv_gib"], 0.0),
            f"{engine['kv_per_token'] / 1024:g} KiB per token: {max(engine['kv_tokens'], 0):,} tokens",
        ),
    ]
    return engine_lines, engine


def _engine_max_sequences(recipe: Recipe, machine: Machine) -> int:
    """`max_num_seqs` TRL gives its colocated engine: per device x tensor parallel x steps per generation."""
    steps = _steps_per_generation(recipe, machine.gpus) or 1
    return int(recipe["per_device_train_batch_size"]) * int(recipe["vllm_tensor_parallel_size"] or 1) * steps


def vllm_profile_bytes(shape: ModelShape, tensor_parallel: int = 1, max_sequences: int = 256) -> dict:
    """Activations of the profiling run vLLM makes at start-up (bytes per rank), before it sizes the KV cache.

    vLLM runs the vision encoder on a largest image (`ImageRule.most_tokens` tokens, 4 patches each after
    the 2 x 2 merge: 16,384 tokens for Qwen3-VL and Qwen2.5-VL) and the language model on
    `VLLM_BATCHED_TOKENS` tokens, then samples `max_sequences` rows of logits; the KV cache gets what the
    peak leaves. Inference keeps no activations across layers, so each part is one block's working set in
    bf16: the vision encoder about 4 hidden + 2 intermediate widths per patch (plus the merged image's
    embeddings, one per DeepStack layer too), the language model 4 hidden + 2 intermediate widths per
    token, the sampler fp32 logits and log-probs.

    >>> from training.architectures import published_shape
    >>> parts = vllm_profile_bytes(published_shape("Qwen/Qwen3-VL-8B-Thinking"), 1, 64)
    >>> parts["image_tokens"], round(parts["vision"] / GIB, 2), round(parts["language"] / GIB, 2)
    (16384, 2.11, 0.38)
    """
    language = (
        VLLM_BATCHED_TOKENS * (4 * shape.hidden_size + 2 * shape.intermediate_size) * 2 / tensor_parallel
    )
    sampler = max_sequences * shape.vocab_size * 4 * 2
    vision, image_tokens = 0.0, 0
    if shape.vision is not None and shape.image_rule is not None:
        image_tokens = shape.image_rule.most_tokens
        patches = image_tokens * shape.vision.spatial_merge_size**2
        block = (
            patches
            * (4 * shape.vision.hidden_size + 2 * shape.vision.intermediate_size)
            * 2
            / tensor_parallel
        )
        embeddings = image_tokens * shape.hidden_size * 2 * (1 + shape.vision.deepstack_layers)
        vision = block + embeddings
    return {"language": language + sampler, "vision": vision, "image_tokens": image_tokens}


def vllm_engine(
    shape: ModelShape, share_gib: float, tensor_parallel: int, dtype_bytes: int = 2, max_sequences: int = 256
) -> dict:
    """A vLLM engine's memory: its share, weights per rank, profiling run, and the KV cache left (GiB, tokens)."""
    weights = shape.parameter_count() * dtype_bytes / tensor_parallel / GIB
    profile = vllm_profile_bytes(shape, tensor_parallel, max_sequences)
    profile_gib = max(profile["language"], profile["vision"]) / GIB
    kv_gib = share_gib - weights - profile_gib - VLLM_RUNTIME_GIB
    kv_per_token = shape.kv_cache_bytes_per_token(tensor_parallel)
    return {
        "share_gib": share_gib,
        "weights_gib": weights,
        "profile": profile,
        "profile_gib": profile_gib,
        "overhead_gib": profile_gib + VLLM_RUNTIME_GIB,
        "kv_gib": kv_gib,
        "kv_per_token": kv_per_token,
        "kv_tokens": int(kv_gib * GIB // kv_per_token) if kv_gib > 0 else 0,
    }


# ---------------------------------------------------------------------------------------- checks


def needed_context(recipe: Recipe, longest_prompt: int, longest_target: int | None = None) -> int:
    """Tokens one sequence needs: the longest prompt plus the completion (GRPO) or the target (SFT)."""
    if recipe.kind == "grpo":
        return longest_prompt + int(recipe["max_completion_length"])
    return longest_prompt + int(longest_target or 0)


def resolved_max_model_length(recipe: Recipe, context: int) -> int | None:
    """`vllm_max_model_length` as the engine gets it: a number, `auto` (= `context`), or `None` (unset)."""
    value = recipe["vllm_max_model_length"]
    if isinstance(value, str) and value.strip().lower() == "auto":
        return context
    return int(value) if value is not None else None


def _engine_refusal(report: Report, engine: dict, engine_context: int, need: float) -> str:
    """The sentence refusing a colocated engine that cannot hold one sequence, naming the setting that helps.

    Its share may not even hold its weights and overhead (the context does not matter then), the context may be
    unset (vLLM sizes it for the model's full context), or the KV cache left may be too small for the context.
    """
    recipe, machine = report.recipe, report.machine
    utilization = float(recipe["vllm_gpu_memory_utilization"])
    fixed = engine["weights_gib"] + engine["overhead_gib"]
    least = math.ceil(100 * (fixed + need) / machine.gpu_memory_gib) / 100
    raise_it = (
        f"raise vllm_gpu_memory_utilization to at least {least:.2f}"
        if least <= 1.0
        else "shard the engine (vllm_tensor_parallel_size) or use a GPU with more memory"
    )
    share = (
        f"vllm_gpu_memory_utilization {utilization:g} of {machine.gpu_memory_gib:g} GiB "
        f"({engine['share_gib']:.2f} GiB)"
    )
    if engine["kv_gib"] <= 0:
        return (
            f"the colocated vLLM engine cannot hold one sequence: its share, {share}, is smaller than its "
            f"{engine['weights_gib']:.2f} GiB of weights and {engine['overhead_gib']:.2f} GiB of overhead (profiling "
            f"run and runtime); {raise_it}."
        )
    head = (
        f"the colocated vLLM engine cannot hold one sequence: {engine_context:,} tokens need {need:.2f} GiB of KV "
        f"cache, and {share} leaves {engine['kv_gib']:.2f} GiB after {engine['weights_gib']:.2f} GiB of weights and "
        f"{engine['overhead_gib']:.2f} GiB of overhead"
    )
    if not report.engine_context:
        return (
            f"{head} (vllm_max_model_length is unset, so vLLM sizes the engine for the model's full context); set "
            f"vllm_max_model_length: auto ({report.needed_context:,} tokens for this data) or {raise_it}."
        )
    return f"{head}; {raise_it}."


def _steps_per_generation(recipe: Recipe, processes: int) -> int:
    """Steps per generation as TRL's GRPOConfig derives them (0 when its rules refuse the settings)."""
    per_device = int(recipe["per_device_train_batch_size"])
    if recipe["steps_per_generation"]:
        return int(recipe["steps_per_generation"])
    if recipe["generation_batch_size"]:
        generation_batch = int(recipe["generation_batch_size"])
        return (
            generation_batch // (per_device * processes)
            if generation_batch % (per_device * processes) == 0
            else 0
        )
    return int(recipe["gradient_accumulation_steps"])


def grpo_config_rules_problem(recipe: Recipe, processes: int) -> str | None:
    """What TRL's `GRPOConfig` (1.16) would refuse in the recipe's values on `processes` GPUs, by its own rules.

    The rules of `GRPOConfig.__post_init__`, for a machine without TRL (`grpo_config_problem` constructs the
    config where TRL is installed; a test checks that both agree). `None` when they all hold.

    >>> from training.recipe_file import Recipe
    >>> grpo_config_rules_problem(Recipe("grpo", None, {"generation_batch_size": 100}), 1)
    'generation_batch_size (100) must be divisible by the global batch size (8).'
    """
    per_device = int(recipe["per_device_train_batch_size"])
    generations = int(recipe["num_generations"])
    generation_batch, steps = recipe["generation_batch_size"], recipe["steps_per_generation"]
    if recipe["log_completions_hub_repo"] is not None and not recipe["log_completions"]:
        return (
            "log_completions_hub_repo is set, but log_completions is False. Enable log_completions to upload "
            "completions to the Hub, or unset log_completions_hub_repo."
        )
    if recipe["auto_find_batch_size"]:
        return (
            "auto_find_batch_size is not supported by GRPO, because the generation batch must contain full prompt "
            "groups of num_generations completions, and reducing the batch size on out-of-memory breaks this invariant. "
            "Set auto_find_batch_size=False and lower per_device_train_batch_size instead."
        )
    if generation_batch is not None and steps is not None:
        return (
            "'generation_batch_size' and 'steps_per_generation' can not be both configured at the same time"
        )
    if generation_batch is not None and int(generation_batch) % (per_device * processes):
        return (
            f"generation_batch_size ({generation_batch}) must be divisible by the global batch size "
            f"({per_device * processes})."
        )
    if generation_batch is None:
        generation_batch = per_device * processes * int(steps or recipe["gradient_accumulation_steps"])
    if str(recipe["eval_strategy"] or "no") != "no":
        eval_generations = int(recipe["num_generations_eval"] or generations)
        eval_batch = int(recipe["per_device_eval_batch_size"])
        if (eval_batch * processes) % eval_generations:
            return (
                f"The global eval batch size ({eval_batch} * {processes}) must be divisible by the number of "
                f"generations used for evaluation ({eval_generations})."
            )
    if int(generation_batch) % generations:
        return f"generation_batch_size ({generation_batch}) must be divisible by num_generations ({generations})."
    if generations < 2:
        return (
            "GRPO requires at least 2 generations per prompt to calculate the advantages. You provided "
            f"{generations}, which is less than the minimum required."
        )
    clip_min, clip_max = (
        recipe["vllm_importance_sampling_clip_min"],
        recipe["vllm_importance_sampling_clip_max"],
    )
    if recipe["vllm_importance_sampling_cap"] is not None:
        clip_max = recipe["vllm_importance_sampling_cap"]
    if clip_min is not None and clip_max is not None and float(clip_min) >= float(clip_max):
        return (
            f"vllm_importance_sampling_clip_min ({clip_min}) must be less than vllm_importance_sampling_clip_max "
            f"({clip_max})."
        )
    if (
        recipe["vllm_importance_sampling_correction"]
        and recipe["vllm_importance_sampling_mode"] in ("token_truncate", "sequence_truncate")
        and clip_min is None
        and clip_max is None
    ):
        return (
            "At least one of `vllm_importance_sampling_clip_min` or `vllm_importance_sampling_clip_max` must be set "
            "when `vllm_importance_sampling_mode` is a `*_truncate` mode."
        )
    return None


CONSTRUCTED = "TRL's GRPOConfig constructed"
BY_RULES = "GRPOConfig's rules, without TRL"
PARSED = "TRL's GRPOConfig, as the trainer parsed it"
TRL_CONFIG_NEUTRAL = {
    "bf16": False,
    "fp16": False,
    "tf32": None,
    "use_cpu": True,
    "report_to": "none",
    "push_to_hub": False,
    "deepspeed": None,
    "vllm_max_model_length": None,
}
"""Values set to construct `GRPOConfig` on any machine: precision, device and reporting settings are checked where the
run starts (`spatial-train grpo` constructs the real config there), not here."""


def trl_config_problem(recipe: Recipe, processes: int) -> str | None:
    """The error TRL's `GRPOConfig` raises for the recipe's values on `processes` GPUs, or `None` (TRL imported).

    The config is built in this one process with the per-device batch sizes multiplied by `processes`: its rules
    read them only through the global batch (per device x processes), so they see the same numbers.
    """
    import dataclasses
    import tempfile
    import warnings

    from trl import GRPOConfig

    names = {item.name for item in dataclasses.fields(GRPOConfig) if item.init}
    values: dict[str, Any] = {key: value for key, value in recipe.values.items() if key in names}
    values.update(TRL_CONFIG_NEUTRAL)
    values["per_device_train_batch_size"] = int(recipe["per_device_train_batch_size"]) * processes
    values["per_device_eval_batch_size"] = int(recipe["per_device_eval_batch_size"]) * processes
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values["output_dir"] = folder
        try:
            GRPOConfig(**values)
        except ValueError as error:
            return str(error).strip().splitlines()[0]
    return None


def grpo_config_problem(recipe: Recipe, processes: int, construct: bool = True) -> tuple[str | None, str]:
    """(what TRL's GRPOConfig refuses in the recipe on `processes` GPUs or None, how it was checked).

    Constructed with TRL where it is installed (and `construct`), else by `grpo_config_rules_problem`.
    """
    if construct and importlib.util.find_spec("trl") is not None:
        return trl_config_problem(recipe, processes), CONSTRUCTED
    return grpo_config_rules_problem(recipe, processes), BY_RULES


def _package_problems(recipe: Recipe, zero_stage: int) -> list[str]:
    from training.requirements import GPU_EXTRA_INSTALL, is_installed, recipe_problem

    problems = []
    problem = recipe_problem(recipe["attn_implementation"], bool(recipe["use_vllm"]), bool(recipe["use_cpu"]))
    if problem:
        problems.append(problem)
    if zero_stage > 0 and not is_installed("deepspeed"):
        problems.append(
            f"ZeRO-{zero_stage} needs DeepSpeed, which is not installed: install the gpu extra ({GPU_EXTRA_INSTALL})."
        )
    return problems


def _vllm_mode(recipe: Recipe) -> str | None:
    """``colocate`` or ``server`` when the recipe generates with vLLM, else ``None``."""
    return recipe["vllm_mode"] if recipe["use_vllm"] else None


def _engine_checks(report: Report, engine: dict) -> list[Check]:
    """The vLLM engine (colocated, or the server's) holds one sequence of the needed context."""
    recipe = report.recipe
    machine = report.machine
    shape = report.shape
    colocate = _vllm_mode(recipe) == "colocate"
    server = _vllm_mode(recipe) == "server"
    checks: list[Check] = []
    if colocate and engine:
        engine_context = report.engine_context or shape.max_position_embeddings
        need = engine_context * engine["kv_per_token"] / GIB
        if engine["kv_gib"] < need:
            checks.append(Check("vLLM engine", False, _engine_refusal(report, engine, engine_context, need)))
        else:
            sequences = int(engine["kv_gib"] // need)
            checks.append(
                Check(
                    "vLLM engine",
                    True,
                    f"KV cache {engine['kv_gib']:.2f} GiB holds {sequences} sequence(s) of {engine_context:,} tokens "
                    f"({need:.2f} GiB each)",
                )
            )
    elif colocate:
        checks.append(Check("vLLM engine", None, "not sized: no GPU memory given"))
    if server and machine.server_tensor_parallel_size and machine.gpu_memory_gib:
        tp = machine.server_tensor_parallel_size
        server_engine = vllm_engine(shape, VLLM_SERVE_MEMORY_UTILIZATION * machine.gpu_memory_gib, tp)
        server_context = report.engine_context or shape.max_position_embeddings
        need = server_context * server_engine["kv_per_token"] / GIB
        ok = server_engine["kv_gib"] >= need
        checks.append(
            Check(
                "vLLM server engine",
                ok,
                f"trl vllm-serve (tensor parallel {tp}, gpu_memory_utilization {VLLM_SERVE_MEMORY_UTILIZATION}) keeps "
                f"{max(server_engine['kv_gib'], 0):.2f} GiB of KV cache per GPU for {need:.2f} GiB per sequence"
                if ok
                else f"the vLLM server engine cannot hold one {server_context:,}-token sequence ({need:.2f} GiB of KV "
                f"cache per GPU, {max(server_engine['kv_gib'], 0):.2f} GiB left after its weights).",
            )
        )
    return checks


def _tensor_parallel_checks(report: Report, engine: dict) -> list[Check]:
    """The tensor parallel sizes divide the attention heads (and the training processes)."""
    recipe = report.recipe
    machine = report.machine
    shape = report.shape
    colocate = _vllm_mode(recipe) == "colocate"
    server = _vllm_mode(recipe) == "server"
    checks: list[Check] = []
    if colocate:
        tp = int(recipe["vllm_tensor_parallel_size"] or 1)
        problem = shape.tensor_parallel_problem(tp)
        if problem is None and machine.gpus % tp:
            problem = f"vllm_tensor_parallel_size {tp} does not divide the {machine.gpus} training processes"
        checks.append(
            Check(
                "tensor parallel",
                problem is None,
                problem + "." if problem else f"size {tp} divides the heads",
            )
        )
    if server and machine.server_tensor_parallel_size:
        problem = shape.tensor_parallel_problem(machine.server_tensor_parallel_size)
        checks.append(
            Check(
                "server tensor parallel",
                problem is None,
                f"trl vllm-serve --tensor_parallel_size: {problem}."
                if problem
                else f"size {machine.server_tensor_parallel_size} divides the heads",
            )
        )
    return checks


def _context_checks(report: Report, engine: dict) -> list[Check]:
    """Every context limit holds the data's longest prompt + completion."""
    recipe = report.recipe
    shape = report.shape
    context = report.needed_context
    checks: list[Check] = []
    limits = [("the model's positions", shape.max_position_embeddings)]
    if recipe["use_vllm"] and report.engine_context is not None:
        limits.append(("vllm_max_model_length", report.engine_context))
    if recipe.kind == "sft" and recipe["max_length"] is not None and recipe["max_length_policy"] != "fit":
        limits.append(("max_length", int(recipe["max_length"])))
    short = [(name, value) for name, value in limits if value and value < context]
    if short:
        name, value = short[0]
        checks.append(
            Check(
                "context",
                False,
                f"{name} {value:,} is shorter than the longest prompt + completion of the data ({context:,} tokens)"
                + ("; set vllm_max_model_length: auto." if name == "vllm_max_model_length" else "."),
            )
        )
    else:
        checks.append(
            Check(
                "context", True, f"{context:,} tokens fit " + ", ".join(f"{n} {v:,}" for n, v in limits if v)
            )
        )
    return checks


def _batch_checks(report: Report, engine: dict) -> list[Check]:
    """Batch and group sizes pass every rule of TRL's ``GRPOConfig`` (GRPO recipes)."""
    recipe = report.recipe
    machine = report.machine
    checks: list[Check] = []
    if recipe.kind == "grpo":
        problem, how = (
            (None, PARSED)
            if machine.trl_config == "parsed"
            else grpo_config_problem(recipe, machine.gpus, construct=machine.trl_config == "construct")
        )
        if problem:
            by_rules = "" if how == CONSTRUCTED else " (checked by its rules, without TRL)"
            checks.append(
                Check(
                    "batch",
                    False,
                    f"TRL's GRPOConfig refuses the recipe on {machine.gpus} GPU(s){by_rules}: {problem.rstrip('.')}.",
                )
            )
        else:
            generations = int(recipe["num_generations"])
            per_device = int(recipe["per_device_train_batch_size"])
            steps = _steps_per_generation(recipe, machine.gpus)
            generation_batch = per_device * machine.gpus * steps
            checks.append(
                Check(
                    "batch",
                    True,
                    f"generation batch {generation_batch} = {per_device} per GPU x {machine.gpus} GPUs x {steps} "
                    f"steps per generation, {generation_batch // generations} groups of {generations} ({how})",
                )
            )
    return checks


def _vision_lora_checks(report: Report, engine: dict) -> list[Check]:
    """Vision LoRA needs a vision encoder."""
    recipe = report.recipe
    shape = report.shape
    checks: list[Check] = []
    if recipe["use_peft"] and recipe["vision_lora"]:
        vision = shape.vision
        checks.append(
            Check(
                "vision LoRA",
                vision is not None,
                f"{shape.name} has a vision encoder ({vision.depth} blocks)"
                if vision is not None
                else f"vision_lora is on, but {shape.name} has no vision encoder; set vision_lora: false.",
            )
        )
    return checks


def _memory_checks(report: Report, engine: dict) -> list[Check]:
    """The estimated peak of one GPU fits its memory."""
    recipe = report.recipe
    machine = report.machine
    checks: list[Check] = []
    if machine.gpu_memory_gib:
        total = report.total_gib
        ok = total <= machine.gpu_memory_gib
        generating = report.generation_gib is not None and report.generation_gib >= report.training_gib
        if ok:
            text = f"estimated peak {total:.2f} of {machine.gpu_memory_gib:g} GiB" + (
                " (while generating)" if generating else ""
            )
        elif generating:
            text = (
                f"while generating, the awake vLLM engine's {engine['share_gib']:.2f} GiB "
                f"(vllm_gpu_memory_utilization {recipe['vllm_gpu_memory_utilization']:g}) beside the policy's "
                f"{total - engine['share_gib']:.2f} GiB (weights, trainable state, runtime) needs {total:.2f} GiB of "
                f"one GPU's {machine.gpu_memory_gib:g} GiB (vllm_enable_sleep_mode frees the engine between "
                "generations, not during them); lower vllm_gpu_memory_utilization or use ZeRO-3."
            )
        else:
            text = (
                f"the estimated peak of one GPU, {total:.2f} GiB, exceeds its {machine.gpu_memory_gib:g} GiB; "
                "lower per_device_train_batch_size (raise gradient_accumulation_steps to keep the update), "
                "vllm_gpu_memory_utilization, or use ZeRO-3."
            )
        checks.append(Check("memory", ok, text))
    else:
        checks.append(Check("memory", None, "not checked: no GPU memory given"))
    return checks


def _package_checks(report: Report, engine: dict) -> list[Check]:
    """The packages the recipe needs are installed (with ``--check-packages``)."""
    recipe = report.recipe
    machine = report.machine
    checks: list[Check] = []
    if machine.check_packages:
        problems = _package_problems(recipe, report.zero_stage)
        checks.append(
            Check(
                "packages", not problems, problems[0] if problems else "vLLM, DeepSpeed, flash-attn as needed"
            )
        )
    else:
        needed = [
            name
            for name, wanted in (
                ("vllm", recipe["use_vllm"]),
                ("deepspeed", report.zero_stage > 0),
                ("flash-attn", recipe["attn_implementation"] == "flash_attention_2"),
            )
            if wanted
        ]
        checks.append(
            Check(
                "packages",
                None,
                f"not checked here (--check-packages): needs {', '.join(needed) or 'nothing extra'}",
            )
        )
    return checks


PREFLIGHT_RULES = (
    _engine_checks,
    _tensor_parallel_checks,
    _context_checks,
    _batch_checks,
    _vision_lora_checks,
    _memory_checks,
    _package_checks,
)
"""The preflight's checks, in the order the report shows them: each rule gives its checks of a report."""


def _checks(report: Report, engine: dict) -> None:
    for rule in PREFLIGHT_RULES:
        report.checks.extend(rule(report, engine))


def _notes(report: Report) -> None:
    recipe, machine = report.recipe, report.machine
    if recipe.kind == "grpo":
        rollouts = (
            int(recipe["per_device_train_batch_size"])
            * machine.gpus
            * int(recipe["gradient_accumulation_steps"])
        )
        report.notes.append(
            f"one update sees {rollouts} rollouts = {rollouts // int(recipe['num_generations'])} prompts on "
            f"{machine.gpus} GPU{'s' if machine.gpus != 1 else ''}; scale gradient_accumulation_steps to keep the recipe's update on another GPU count"
        )
        if recipe["use_vllm"] and recipe["vllm_importance_sampling_correction"]:
            report.notes.append(
                f"vLLM importance sampling: {recipe['vllm_importance_sampling_mode']}, C_max "
                f"{recipe['vllm_importance_sampling_clip_max']} (training/recipes/README.md, 'Importance sampling')"
            )
    if report.scan is not None and not report.scan.exact:
        report.notes.append(
            "text tokens are an upper bound (no tokenizer on this machine): the real context is shorter"
        )


def run_preflight(
    recipe: Recipe,
    machine: Machine,
    data_root: str | None = None,
    prompt_tokens: int | None = None,
    scan: PromptScan | None = None,
    tokenizer=None,
) -> Report:
    """Check `recipe` on `machine`; returns the `Report` (its `format()` is what the command prints).

    Args:
        recipe: the recipe (`training.recipe_file.read_recipe`).
        machine: GPUs, their memory, ZeRO stage, server tensor-parallel size, package checks.
        data_root: storage root of the training table (default: the recipe's, else the build's).
        prompt_tokens: plan without data: the longest prompt in tokens (images included).
        scan: a prompt scan already made (skips reading the table).
        tokenizer: the model's tokenizer (default: loaded when the model is on this machine).

    Raises:
        `PreflightError`, `UnknownArchitectureError`, `MissingTableError`: when the run cannot be sized.
    """
    model = recipe["model_name_or_path"]
    if not model:
        raise PreflightError("the recipe names no model (model_name_or_path)")
    shape = load_shape(str(model))
    if scan is None and prompt_tokens is None:
        if tokenizer is None:
            tokenizer = load_tokenizer(str(model))
        scan = scan_prompts(recipe, shape, data_root, tokenizer)
    if scan is not None:
        longest = scan.longest_prompt
    else:
        assert prompt_tokens is not None  # without either, the table was scanned above
        longest = int(prompt_tokens)
    context = needed_context(recipe, longest, scan.longest_target if scan else None)
    zero_stage = machine.zero_stage if machine.zero_stage is not None else _default_zero_stage(recipe)
    engine_context = resolved_max_model_length(recipe, context) if recipe["use_vllm"] else None
    report = Report(
        recipe=recipe,
        machine=machine,
        shape=shape,
        zero_stage=zero_stage,
        scan=scan,
        needed_context=context,
        engine_context=engine_context,
    )
    image_tokens = scan.image_tokens if scan is not None else 0
    report.lines, report.engine_lines, engine = memory_budget(
        recipe, shape, machine, zero_stage, context, image_tokens
    )
    report.generation_gib = engine.get("generation_gib")
    _checks(report, engine)
    _notes(report)
    return report


# ---------------------------------------------------------------------------------------- command


def machine_from_accelerate_config(path: str | Path) -> tuple[int, int]:
    """(processes, ZeRO stage) of an accelerate config file (stage 0 without DeepSpeed)."""
    import yaml

    config = yaml.safe_load(Path(path).read_text()) or {}
    stage = 0
    if str(config.get("distributed_type")) == "DEEPSPEED":
        stage = int((config.get("deepspeed_config") or {}).get("zero_stage", 0))
    return int(config.get("num_processes", 1)), stage


def machine_here(check_packages: bool = True) -> Machine:
    """The machine this process trains on: accelerate's world size and ZeRO stage, this GPU's memory.

    Without a CUDA GPU the memory is not checked (a CPU run).
    """
    import torch

    gpus = int(os.environ.get("WORLD_SIZE", "1"))
    stage = 0
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true":
        stage = int(os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", "0") or 0)
    memory, label = None, "no GPU here"
    if torch.cuda.is_available():
        device = int(os.environ.get("LOCAL_RANK", "0"))
        properties = torch.cuda.get_device_properties(device)
        memory = math.floor(10 * properties.total_memory / GIB) / 10
        label = f"{properties.name}, this machine"
    return Machine(
        gpus=gpus,
        gpu_memory_gib=memory,
        zero_stage=stage,
        check_packages=check_packages,
        gpu_label=label,
        trl_config="parsed",
    )


def make_parser() -> argparse.ArgumentParser:
    """The options of `spatial-train preflight` (every other `--key value` is a recipe override)."""
    parser = argparse.ArgumentParser(
        prog="spatial-train preflight",
        description="Check a recipe against GPUs before booking them: memory budget per GPU, vLLM engine, "
        "tensor parallel size, context, batch, vision LoRA, packages. Other --key value flags override the recipe.",
        usage="spatial-train preflight --config RECIPE [--gpus N] [--gpu NAME | --gpu-memory-gib G] [--key value ...]",
    )
    parser.add_argument("--config", required=True, help="the recipe (training/recipes/*.yaml)")
    parser.add_argument("--gpus", type=int, default=None, help="training GPUs, all machines (default 8)")
    parser.add_argument(
        "--gpu",
        choices=sorted(GPU_MEMORY_GIB),
        default=None,
        help=f"the GPU, by name, with the memory CUDA reports for it ({', '.join(f'{name} {gib:g} GiB' for name, gib in GPU_MEMORY_GIB.items())}; "
        f"default {DEFAULT_GPU})",
    )
    parser.add_argument(
        "--gpu-memory-gib",
        type=float,
        default=None,
        help="memory of one GPU in GiB, for a GPU --gpu does not name",
    )
    parser.add_argument(
        "--zero-stage",
        type=int,
        choices=(0, 1, 2, 3),
        default=None,
        help="DeepSpeed ZeRO stage, 0 for DDP (default: 3 for full fine-tuning, 0 for LoRA)",
    )
    parser.add_argument(
        "--accelerate-config",
        default=None,
        help="read --gpus and --zero-stage from an accelerate config file",
    )
    parser.add_argument(
        "--server-tensor-parallel-size",
        type=int,
        default=None,
        help="trl vllm-serve --tensor_parallel_size (server mode)",
    )
    parser.add_argument(
        "--prompt-tokens",
        type=int,
        default=None,
        help="plan without data: the longest prompt in tokens, images included (SFT: prompt + target)",
    )
    parser.add_argument(
        "--check-packages",
        action="store_true",
        help="also fail when vLLM/DeepSpeed/flash-attn are missing here, and construct TRL's GRPOConfig from the "
        "recipe where TRL is installed (every TRL and transformers rule; imports them)",
    )
    parser.add_argument(
        "--server-gpus",
        type=int,
        default=None,
        help="GPUs of the trl vllm-serve node (server mode): the default server tensor parallel size is the "
        "largest valid one up to this",
    )
    parser.add_argument(
        "--server-args",
        action="store_true",
        help="print only the trl vllm-serve flags (--tensor_parallel_size, --data_parallel_size, --max_model_len); "
        "the report goes to stderr",
    )
    return parser


def server_flags(report: Report, server_gpus: int) -> str:
    """`trl vllm-serve` flags for the report's recipe: tensor and data parallel sizes, the context.

    >>> from training.recipe_file import Recipe
    >>> from training.architectures import published_shape
    >>> shape = published_shape("Qwen/Qwen2.5-VL-7B-Instruct")
    >>> report = Report(Recipe("grpo", None, {}), Machine(server_tensor_parallel_size=4), shape, 3, None, 2900, 2900)
    >>> server_flags(report, 8)
    '--tensor_parallel_size 4 --data_parallel_size 2 --max_model_len 2900'
    """
    tensor_parallel = report.machine.server_tensor_parallel_size or 1
    data_parallel = max(1, server_gpus // tensor_parallel)
    context = report.engine_context or report.needed_context
    return f"--tensor_parallel_size {tensor_parallel} --data_parallel_size {data_parallel} --max_model_len {context}"


def main(argv: Sequence[str] | None = None) -> int:
    """`spatial-train preflight`; returns 0 when the recipe passes, 1 with a violation, 2 for bad input."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = make_parser()
    options, rest = parser.parse_known_args(arguments)
    try:
        recipe = read_recipe(options.config, rest)
        gpus, stage = 8, options.zero_stage
        if options.accelerate_config:
            gpus, stage = machine_from_accelerate_config(options.accelerate_config)
            stage = options.zero_stage if options.zero_stage is not None else stage
        server_tensor_parallel = options.server_tensor_parallel_size
        if server_tensor_parallel is None and options.server_gpus:
            shape = load_shape(str(recipe["model_name_or_path"]))
            server_tensor_parallel = shape.valid_tensor_parallel_sizes(options.server_gpus)[-1]
        fields = {
            "gpus": options.gpus or gpus,
            "zero_stage": stage,
            "server_tensor_parallel_size": server_tensor_parallel,
            "check_packages": options.check_packages,
            "trl_config": "construct" if options.check_packages else "rules",
        }
        if options.gpu_memory_gib is not None:
            if options.gpu is not None:
                raise PreflightError("give the GPU by --gpu or its memory by --gpu-memory-gib, not both")
            machine = Machine(
                gpu_memory_gib=options.gpu_memory_gib,
                gpu_label=f"--gpu-memory-gib {options.gpu_memory_gib:g}",
                **fields,
            )
        else:
            machine = Machine.named(options.gpu or DEFAULT_GPU, **fields)
        report = run_preflight(
            recipe, machine, data_root=recipe["data_root"], prompt_tokens=options.prompt_tokens
        )
    except PREFLIGHT_INPUT_ERRORS as error:
        sys.stderr.write(f"spatial-train preflight: {error}\n")
        return 2
    (sys.stderr if options.server_args else sys.stdout).write(report.format())
    violation = report.first_violation()
    if violation:
        sys.stderr.write(f"spatial-train preflight: {violation}\n")
        return 1
    if options.server_args:
        sys.stdout.write(
            server_flags(report, options.server_gpus or machine.server_tensor_parallel_size or 1) + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
