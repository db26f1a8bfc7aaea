"""Loading Qwen-VL policies by family: model, a processor that needs no torchvision, and LoRA.

The families are the ones whose box convention `data_contracts.boxes` knows (`qwen2_vl`,
`qwen2_5_vl`, `qwen3_vl`); any other model type stops with a clear error, since its boxes could
not be scored. The processor is assembled from the tokenizer and the PIL image processor
(`Qwen2VLImageProcessorPil`) with a processor subclass that has no video processor, so neither
torchvision nor a video backend is imported.

LoRA follows the SpatialCORE paper: every linear layer of the language model (r 32, alpha 64,
dropout 0.05) and, separately switchable, every linear layer of the vision encoder (r 4, alpha 8),
expressed as one `LoraConfig` whose `rank_pattern` / `alpha_pattern` give the vision layers their
own rank.

>>> family_of_model_type("qwen3_vl_moe")
'qwen3_vl'
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model, set_peft_model_state_dict
from peft.utils import load_peft_weights
from transformers import AutoConfig, AutoModelForImageTextToText, AutoTokenizer, PreTrainedModel
from transformers.models.qwen2_5_vl.processing_qwen2_5_vl import Qwen2_5_VLProcessor
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.models.qwen2_vl.processing_qwen2_vl import Qwen2VLProcessor
from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor
from trl import ModelConfig

from data_contracts.boxes import ResizeRule, UnknownModelFamilyError
from training.architectures import MODEL_TYPE_TO_FAMILY

logger = logging.getLogger(__name__)

TRAINABLE_FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl")


class Qwen2VLProcessorWithoutVideo(Qwen2VLProcessor):
    """Qwen2-VL processor made of the image processor and the tokenizer only (no torchvision)."""

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)


class Qwen2_5_VLProcessorWithoutVideo(Qwen2_5_VLProcessor):
    """Qwen2.5-VL processor made of the image processor and the tokenizer only (no torchvision)."""

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)


class Qwen3VLProcessorWithoutVideo(Qwen3VLProcessor):
    """Qwen3-VL processor made of the image processor and the tokenizer only (no torchvision)."""

    def __init__(self, image_processor=None, tokenizer=None, chat_template=None, **kwargs):
        super().__init__(image_processor, tokenizer, None, chat_template=chat_template, **kwargs)


PROCESSOR_CLASSES = {
    "qwen2_vl": Qwen2VLProcessorWithoutVideo,
    "qwen2_5_vl": Qwen2_5_VLProcessorWithoutVideo,
    "qwen3_vl": Qwen3VLProcessorWithoutVideo,
}


@dataclass
class SpatialModelConfig(ModelConfig):
    """TRL's `ModelConfig` plus the switches of the paper's LoRA set-up.

    Args:
        language_lora (`bool`, *optional*, defaults to `True`):
            Put LoRA adapters (`lora_r`, `lora_alpha`, `lora_dropout`) on every linear layer of the language
            model (with `use_peft`).
        vision_lora (`bool`, *optional*, defaults to `True`):
            Also adapt every linear layer of the vision encoder, with rank `vision_lora_r` and alpha
            `vision_lora_alpha` (the "w/o vision LoRA" ablation turns this off).
        vision_lora_r (`int`, *optional*, defaults to `4`):
            LoRA rank of the vision layers.
        vision_lora_alpha (`int`, *optional*, defaults to `8`):
            LoRA alpha of the vision layers.
        freeze_vision (`bool`, *optional*, defaults to `False`):
            For full fine-tuning (no PEFT): keep the vision encoder's weights fixed.
        init_adapter_path (`str`, *optional*):
            A LoRA adapter (e.g. the SFT cold start) that initialises the policy; it keeps training.
    """

    language_lora: bool = field(
        default=True, metadata={"help": "LoRA on the language model's linear layers."}
    )
    vision_lora: bool = field(default=True, metadata={"help": "LoRA on the vision encoder's linear layers."})
    vision_lora_r: int = field(default=4, metadata={"help": "LoRA rank of the vision layers."})
    vision_lora_alpha: int = field(default=8, metadata={"help": "LoRA alpha of the vision layers."})
    freeze_vision: bool = field(
        default=False, metadata={"help": "Full fine-tuning: freeze the vision encoder."}
    )
    init_adapter_path: str | None = field(
        default=None, metadata={"help": "LoRA adapter that initialises the policy (e.g. the SFT cold start)."}
    )


def family_of_model_type(model_type: str) -> str:
    """Map a `config.model_type` to its box-convention family, or raise `UnknownModelFamilyError`.

    >>> family_of_model_type("qwen2_5_vl")
    'qwen2_5_vl'
    """
    family = MODEL_TYPE_TO_FAMILY.get(model_type)
    if family is None:
        raise UnknownModelFamilyError(model_type)
    return family


def detect_family(model_name_or_path: str | Path) -> str:
    """Read the model's config (local folder or cache) and return its box-convention family."""
    config = AutoConfig.from_pretrained(str(model_name_or_path))
    return family_of_model_type(config.model_type)


def load_processor(model_name_or_path: str | Path, family: str):
    """Assemble the family's processor from the tokenizer and the PIL image processor.

    The tokenizer pads on the left (as generation needs) and the chat template comes from the
    tokenizer or from `chat_template.jinja` in the model folder.
    """
    if family not in PROCESSOR_CLASSES:
        raise UnknownModelFamilyError(family)
    tokenizer = AutoTokenizer.from_pretrained(str(model_name_or_path))
    tokenizer.padding_side = "left"
    for attribute in ("response_template", "response_schema"):
        if getattr(tokenizer, attribute, None) is not None:
            # The rewards parse the raw completion text (boxes, </think>, answer tags): no response parsing.
            logger.info("switching off the tokenizer's %s: the rewards read the raw completion", attribute)
            setattr(tokenizer, attribute, None)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    image_processor = Qwen2VLImageProcessorPil.from_pretrained(str(model_name_or_path))
    chat_template = tokenizer.chat_template
    template_file = Path(model_name_or_path) / "chat_template.jinja"
    if chat_template is None and template_file.is_file():
        chat_template = template_file.read_text()
    processor = PROCESSOR_CLASSES[family](
        image_processor=image_processor, tokenizer=tokenizer, chat_template=chat_template
    )
    return processor


def resize_rule_of(processor) -> ResizeRule:
    """The `smart_resize` rule (factor, pixel budget) of a processor's image processor."""
    image_processor = processor.image_processor
    factor = int(image_processor.patch_size) * int(image_processor.merge_size)
    size = image_processor.size
    min_pixels = size.get("shortest_edge") if hasattr(size, "get") else getattr(size, "shortest_edge", None)
    max_pixels = size.get("longest_edge") if hasattr(size, "get") else getattr(size, "longest_edge", None)
    default = ResizeRule()
    return ResizeRule(
        factor=factor,
        min_pixels=int(min_pixels) if min_pixels else default.min_pixels,
        max_pixels=int(max_pixels) if max_pixels else default.max_pixels,
    )


def load_model(model_args: ModelConfig) -> PreTrainedModel:
    """Load the image-text-to-text model named by `model_args` with its dtype and attention implementation."""
    dtype = model_args.dtype
    if dtype not in (None, "auto"):
        dtype = getattr(torch, dtype)
    kwargs = {"dtype": dtype, "revision": model_args.model_revision}
    if model_args.attn_implementation is not None:
        kwargs["attn_implementation"] = model_args.attn_implementation
    if model_args.model_name_or_path is None:
        raise ValueError("the recipe names no model (model_name_or_path)")
    return AutoModelForImageTextToText.from_pretrained(model_args.model_name_or_path, **kwargs)


def _is_vision_module(name: str) -> bool:
    return ".visual." in f".{name}." or name.startswith("visual") or ".vision_tower." in f".{name}."


def linear_layer_patterns(model: torch.nn.Module) -> tuple[list[str], list[str]]:
    """Regex patterns of the language and the vision linear layers (the output head excluded).

    Layer indices are generalised (`layers.\\d+.mlp.up_proj`) unless the generalised pattern would
    also catch a module that is not linear (Qwen2.5-VL's merger `mlp.0` / `mlp.1` GELU / `mlp.2`),
    in which case the names are kept exact.
    """
    modules = dict(model.named_modules())
    linear = [
        name
        for name, module in modules.items()
        if isinstance(module, torch.nn.Linear) and not name.endswith("lm_head")
    ]
    language: set[str] = set()
    vision: set[str] = set()
    only_linear: dict[str, bool] = {}
    for name in linear:
        pattern = r"\.".join(r"\d+" if part.isdigit() else re.escape(part) for part in name.split("."))
        if pattern not in only_linear:
            compiled = re.compile(pattern)
            only_linear[pattern] = all(
                isinstance(module, torch.nn.Linear)
                for other, module in modules.items()
                if compiled.fullmatch(other)
            )
        (vision if _is_vision_module(name) else language).add(
            pattern if only_linear[pattern] else re.escape(name)
        )
    return sorted(language), sorted(vision)


def build_lora_config(model: torch.nn.Module, model_args: SpatialModelConfig) -> LoraConfig | None:
    """The paper's LoRA set-up for `model`: language layers at `lora_r`, vision layers at `vision_lora_r`.

    Returns `None` when `use_peft` is off (full fine-tuning).
    """
    if not model_args.use_peft:
        return None
    language_patterns, vision_patterns = linear_layer_patterns(model)
    selected = []
    if model_args.language_lora:
        selected += language_patterns
    if model_args.vision_lora:
        selected += vision_patterns
    if model_args.lora_target_modules:
        selected = list(model_args.lora_target_modules)
    if not selected:
        raise ValueError("use_peft is set but both language_lora and vision_lora are off: nothing to adapt")
    rank_pattern, alpha_pattern = {}, {}
    if model_args.vision_lora and vision_patterns and not model_args.lora_target_modules:
        vision_regex = "|".join(vision_patterns)
        rank_pattern[f"(?:{vision_regex})"] = model_args.vision_lora_r
        alpha_pattern[f"(?:{vision_regex})"] = model_args.vision_lora_alpha
    target = selected if model_args.lora_target_modules else "^(?:" + "|".join(selected) + ")$"
    return LoraConfig(
        task_type=model_args.lora_task_type,
        r=model_args.lora_r,
        lora_alpha=model_args.lora_alpha,
        lora_dropout=model_args.lora_dropout,
        target_modules=target,
        rank_pattern=rank_pattern,
        alpha_pattern=alpha_pattern,
        bias="none",
        use_rslora=model_args.use_rslora,
        use_dora=model_args.use_dora,
    )


def prepare_policy(
    model: PreTrainedModel, model_args: SpatialModelConfig
) -> tuple[PreTrainedModel | PeftModel, LoraConfig | None]:
    """Build the policy: LoRA config for the trainer, or a PEFT model initialised from an adapter.

    With `init_adapter_path` (the SFT cold start), the run's full LoRA set-up is created (language
    and, if enabled, vision layers) and the adapter's weights are loaded into it: the language
    layers start from the cold start, the vision layers (absent from a language-only cold start)
    start at zero as LoRA does. Without PEFT and with `freeze_vision`, the vision encoder is frozen.

    Returns:
        The model (a `PeftModel` when an initial adapter is given) and the `LoraConfig` to hand to the
        trainer (`None` when the adapter is already attached or when fine-tuning fully).

    Raises:
        `ValueError`: when the initial adapter does not fit the run's LoRA set-up.
    """
    if model_args.init_adapter_path:
        if not model_args.use_peft:
            raise ValueError("init_adapter_path needs use_peft: the adapter is trained further as LoRA")
        lora_config = build_lora_config(model, model_args)
        assert lora_config is not None  # use_peft is on
        peft_model = get_peft_model(model, lora_config)
        adapter_weights = load_peft_weights(model_args.init_adapter_path)
        try:
            result = set_peft_model_state_dict(peft_model, adapter_weights)
        except RuntimeError as error:
            raise ValueError(
                f"adapter {model_args.init_adapter_path} does not fit the run's LoRA set-up "
                f"(lora_r {model_args.lora_r}, lora_alpha {model_args.lora_alpha}): {error}"
            ) from error
        unexpected = list(getattr(result, "unexpected_keys", []) or [])
        loaded = len(adapter_weights) - len(unexpected)
        if loaded <= 0:
            raise ValueError(
                f"adapter {model_args.init_adapter_path} matches no layer of {model_args.model_name_or_path}"
            )
        if unexpected:
            logger.warning(
                "%d adapter tensors of %s were not used", len(unexpected), model_args.init_adapter_path
            )
        logger.info("initialised %d LoRA tensors from %s", loaded, model_args.init_adapter_path)
        return peft_model, None
    if not model_args.use_peft and model_args.freeze_vision:
        frozen = 0
        for name, parameter in model.named_parameters():
            if _is_vision_module(name):
                parameter.requires_grad_(False)
                frozen += parameter.numel()
        logger.info("froze %d vision-encoder parameters", frozen)
    return model, build_lora_config(model, model_args)
