"""Model shapes for planning GPU runs: the recipe models' published architectures, and parameter counts.

`spatial-train preflight` needs, without a GPU and without downloading anything, the numbers that size
a run: parameters (weights, LoRA, optimizer state), the KV cache per token, the attention heads a
tensor-parallel size must divide, the context the model supports, and how many tokens an image
becomes. They come from the model's `config.json` and `preprocessor_config.json` when the model is a
local folder (or in the Hugging Face cache), and otherwise from `PUBLISHED_CONFIGS`: the fields of the
four recipe models' published `config.json` files that the arithmetic reads, each model with the
address of its file. Parameter counts are computed from the shapes with the same layer layout as
transformers' modelling code (tested against a model built on the meta device), not copied from a
model card.

Nothing here imports torch or transformers.

>>> shape = published_shape("Qwen/Qwen3-VL-8B-Thinking")
>>> shape.kv_cache_bytes_per_token()  # 36 layers x 8 KV heads x head dim 128 x (K, V) x 2 bytes
147456
>>> round(shape.parameter_count() / 1e9, 2)
8.77
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

# The fields of each recipe model's published config.json (and preprocessor_config.json) that the
# preflight reads. Qwen3-VL-8B/4B-Thinking share their architecture with the Instruct models.
PUBLISHED_CONFIGS: dict[str, dict] = {
    "Qwen/Qwen3-VL-8B-Thinking": {
        "source": "https://huggingface.co/Qwen/Qwen3-VL-8B-Thinking/blob/main/config.json",
        "preprocessor_source": "https://huggingface.co/Qwen/Qwen3-VL-8B-Thinking/blob/main/preprocessor_config.json",
        "model_type": "qwen3_vl",
        "tie_word_embeddings": False,
        "text_config": {
            "hidden_size": 4096,
            "intermediate_size": 12288,
            "num_hidden_layers": 36,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 151936,
            "max_position_embeddings": 262144,
        },
        "vision_config": {
            "depth": 27,
            "hidden_size": 1152,
            "intermediate_size": 4304,
            "num_heads": 16,
            "out_hidden_size": 4096,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "num_position_embeddings": 2304,
            "deepstack_visual_indexes": [8, 16, 24],
        },
        "preprocessor": {"patch_size": 16, "merge_size": 2, "min_pixels": 65536, "max_pixels": 16777216},
    },
    "Qwen/Qwen3-VL-4B-Thinking": {
        "source": "https://huggingface.co/Qwen/Qwen3-VL-4B-Thinking/blob/main/config.json",
        "preprocessor_source": "https://huggingface.co/Qwen/Qwen3-VL-4B-Thinking/blob/main/preprocessor_config.json",
        "model_type": "qwen3_vl",
        "tie_word_embeddings": True,
        "text_config": {
            "hidden_size": 2560,
            "intermediate_size": 9728,
            "num_hidden_layers": 36,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "head_dim": 128,
            "vocab_size": 151936,
            "max_position_embeddings": 262144,
        },
        "vision_config": {
            "depth": 24,
            "hidden_size": 1024,
            "intermediate_size": 4096,
            "num_heads": 16,
            "out_hidden_size": 2560,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "num_position_embeddings": 2304,
            "deepstack_visual_indexes": [5, 11, 17],
        },
        "preprocessor": {"patch_size": 16, "merge_size": 2, "min_pixels": 65536, "max_pixels": 16777216},
    },
    "Qwen/Qwen2.5-VL-7B-Instruct": {
        "source": "https://huggingface.co/Qwen/Qwen2.5-VL-7B-Instruct/blob/main/config.json",
        "preprocessor_source": "https://huggingface.co/Qwen/Qwen2.5-VL-7B-Instruct/blob/main/preprocessor_config.json",
        "model_type": "qwen2_5_vl",
        "tie_word_embeddings": False,
        "text_config": {
            "hidden_size": 3584,
            "intermediate_size": 18944,
            "num_hidden_layers": 28,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "vocab_size": 152064,
            "max_position_embeddings": 128000,
        },
        "vision_config": {
            "depth": 32,
            "hidden_size": 1280,
            "intermediate_size": 3420,
            "num_heads": 16,
            "out_hidden_size": 3584,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
        "preprocessor": {"patch_size": 14, "merge_size": 2, "min_pixels": 3136, "max_pixels": 12845056},
    },
    "Qwen/Qwen2.5-VL-3B-Instruct": {
        "source": "https://huggingface.co/Qwen/Qwen2.5-VL-3B-Instruct/blob/main/config.json",
        "preprocessor_source": "https://huggingface.co/Qwen/Qwen2.5-VL-3B-Instruct/blob/main/preprocessor_config.json",
        "model_type": "qwen2_5_vl",
        "tie_word_embeddings": True,
        "text_config": {
            "hidden_size": 2048,
            "intermediate_size": 11008,
            "num_hidden_layers": 36,
            "num_attention_heads": 16,
            "num_key_value_heads": 2,
            "vocab_size": 151936,
            "max_position_embeddings": 128000,
        },
        "vision_config": {
            "depth": 32,
            "hidden_size": 1280,
            "intermediate_size": 3420,
            "num_heads": 16,
            "out_hidden_size": 2048,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
        "preprocessor": {"patch_size": 14, "merge_size": 2, "min_pixels": 3136, "max_pixels": 12845056},
    },
}

# The published Qwen2.5-VL configs keep the text fields at the top level; Qwen3-VL nests them in
# `text_config`. Both layouts are read.
_TEXT_FIELDS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
    "max_position_embeddings",
)
# `config.model_type` -> box-convention family (`training.models` loads these families).
MODEL_TYPE_TO_FAMILY = {
    "qwen2_vl": "qwen2_vl",
    "qwen2_5_vl": "qwen2_5_vl",
    "qwen3_vl": "qwen3_vl",
    "qwen3_vl_moe": "qwen3_vl",
}


class UnknownArchitectureError(ValueError):
    """A model whose shape the preflight cannot read (no config, or a layout it does not know)."""


@dataclass(frozen=True)
class VisionShape:
    """The vision encoder of a Qwen-VL model (the fields of `vision_config` the arithmetic reads)."""

    depth: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    out_hidden_size: int
    patch_size: int
    spatial_merge_size: int
    temporal_patch_size: int
    num_position_embeddings: int = 0  # Qwen3-VL's learned position embedding
    deepstack_layers: int = 0  # Qwen3-VL: one extra patch merger per DeepStack layer


@dataclass(frozen=True)
class ImageRule:
    """How the image processor resizes: sides rounded to multiples of `factor` within a pixel budget."""

    factor: int
    min_pixels: int
    max_pixels: int

    def tokens(self, width: int, height: int) -> int:
        """LLM tokens one `width` x `height` image becomes (one per merged patch), as Qwen's `smart_resize`.

        >>> ImageRule(32, 65536, 16777216).tokens(1280, 960)
        1200
        """
        from data_contracts.boxes import ResizeRule, smart_resize

        resized_height, resized_width = smart_resize(
            int(height), int(width), ResizeRule(self.factor, self.min_pixels, self.max_pixels)
        )
        return (resized_height // self.factor) * (resized_width // self.factor)

    @property
    def most_tokens(self) -> int:
        """The most tokens one image can take (`max_pixels / factor^2`)."""
        return self.max_pixels // (self.factor * self.factor)


@dataclass(frozen=True)
class ModelShape:
    """What the preflight needs to know about a model.

    Attributes:
        name: the model's name or folder.
        model_type: `qwen3_vl`, `qwen2_5_vl`, `qwen2_vl` (or another transformers model type).
        source: where the facts come from (a config file, or the published config's address).
        vision: the vision encoder, `None` for a text-only model.
        image_rule: the image processor's resize rule, `None` without one.
    """

    name: str
    model_type: str
    source: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool
    vision: VisionShape | None = None
    image_rule: ImageRule | None = None

    # ------------------------------------------------------------------ counts

    @property
    def attention_bias(self) -> bool:
        """Qwen2-VL and Qwen2.5-VL have biases on q, k, v; Qwen3-VL has none (and q/k norms instead)."""
        return self.model_type in ("qwen2_vl", "qwen2_5_vl")

    def language_linear_shapes(self) -> list[tuple[int, int]]:
        """`(in, out)` of every linear layer of one decoder layer (q, k, v, o, gate, up, down)."""
        h, q, kv, i = (
            self.hidden_size,
            self.num_heads * self.head_dim,
            self.num_kv_heads * self.head_dim,
            self.intermediate_size,
        )
        return [(h, q), (h, kv), (h, kv), (q, h), (h, i), (h, i), (i, h)]

    def language_layer_parameters(self) -> int:
        """Parameters of one decoder layer: the linear layers, q/k/v biases or q/k norms, two RMSNorms."""
        linear = sum(fan_in * fan_out for fan_in, fan_out in self.language_linear_shapes())
        q, kv = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        extra = q + 2 * kv if self.attention_bias else 2 * self.head_dim
        return linear + extra + 2 * self.hidden_size

    def language_parameters(self) -> int:
        """The language model: embedding, layers, final norm and (when not tied) the output head."""
        embedding = self.vocab_size * self.hidden_size
        head = 0 if self.tie_word_embeddings else embedding
        return embedding + self.num_layers * self.language_layer_parameters() + self.hidden_size + head

    def vision_linear_shapes(self) -> list[tuple[int, int]]:
        """`(in, out)` of every linear layer of the vision encoder (blocks, patch mergers)."""
        vision = self.vision
        if vision is None:
            return []
        hv, iv = vision.hidden_size, vision.intermediate_size
        merged = hv * vision.spatial_merge_size**2
        if self.model_type == "qwen3_vl":
            block = [(hv, 3 * hv), (hv, hv), (hv, iv), (iv, hv)]
        else:
            block = [(hv, 3 * hv), (hv, hv), (hv, iv), (hv, iv), (iv, hv)]
        merger = [(merged, merged), (merged, vision.out_hidden_size)]
        return block * vision.depth + merger * (1 + vision.deepstack_layers)

    def vision_parameters(self) -> int:
        """The vision encoder: patch embedding, position embedding, blocks with norms, patch mergers."""
        vision = self.vision
        if vision is None:
            return 0
        hv = vision.hidden_size
        merged = hv * vision.spatial_merge_size**2
        linear = sum(fan_in * fan_out + fan_out for fan_in, fan_out in self.vision_linear_shapes())
        patch = 3 * vision.temporal_patch_size * vision.patch_size**2 * hv
        if self.model_type == "qwen3_vl":
            # Conv3d with bias, learned position embedding, LayerNorms (weight and bias); each DeepStack
            # merger normalises after the shuffle (width hv * merge^2), the main merger before it (hv).
            patch += hv
            norms = vision.depth * 2 * 2 * hv + 2 * hv + vision.deepstack_layers * 2 * merged
            return patch + vision.num_position_embeddings * hv + norms + linear
        # Qwen2-VL / Qwen2.5-VL: Conv3d without bias, RMSNorms (weight only), no position embedding.
        norms = vision.depth * 2 * hv + hv
        return patch + norms + linear

    def parameter_count(self) -> int:
        """Every parameter of the model (language model and vision encoder)."""
        return self.language_parameters() + self.vision_parameters()

    def lora_parameters(self, language_rank: int | None, vision_rank: int | None) -> int:
        """LoRA parameters on every linear layer (the output head excluded): r x (in + out) each.

        `None` for a side leaves it without adapters (e.g. `vision_lora: false`).
        """
        count = 0
        if language_rank:
            count += (
                self.num_layers
                * language_rank
                * sum(fan_in + fan_out for fan_in, fan_out in self.language_linear_shapes())
            )
        if vision_rank:
            count += vision_rank * sum(fan_in + fan_out for fan_in, fan_out in self.vision_linear_shapes())
        return count

    def kv_cache_bytes_per_token(self, tensor_parallel_size: int = 1, dtype_bytes: int = 2) -> int:
        """KV-cache bytes of one token on one tensor-parallel rank (keys and values of every layer).

        With more ranks than KV heads, vLLM replicates the heads: each rank keeps at least one.
        """
        heads_per_rank = max(1, math.ceil(self.num_kv_heads / tensor_parallel_size))
        return 2 * self.num_layers * heads_per_rank * self.head_dim * dtype_bytes

    def tensor_parallel_problem(self, size: int) -> str | None:
        """Why vLLM cannot shard this model over `size` ranks, or `None`.

        vLLM splits the attention heads (language and vision) evenly over the ranks, and the KV heads
        too (or replicates them when there are fewer KV heads than ranks, which needs `size` to be a
        multiple of them).

        >>> published_shape("Qwen/Qwen2.5-VL-7B-Instruct").tensor_parallel_problem(8)
        'tensor parallel size 8 does not divide the 28 attention heads of Qwen/Qwen2.5-VL-7B-Instruct (valid: 1, 2, 4)'
        """
        problems = []
        if self.num_heads % size:
            problems.append(f"the {self.num_heads} attention heads")
        elif self.num_kv_heads % size and size % self.num_kv_heads:
            problems.append(f"the {self.num_kv_heads} KV heads")
        elif self.vision is not None and self.vision.num_heads % size:
            problems.append(f"the {self.vision.num_heads} vision attention heads")
        if not problems:
            return None
        valid = ", ".join(str(value) for value in self.valid_tensor_parallel_sizes(max(8, size)))
        return f"tensor parallel size {size} does not divide {problems[0]} of {self.name} (valid: {valid})"

    def valid_tensor_parallel_sizes(self, most: int = 8) -> list[int]:
        """The tensor-parallel sizes up to `most` vLLM can use for this model."""
        sizes = []
        for size in range(1, most + 1):
            if (
                self.num_heads % size == 0
                and (self.num_kv_heads % size == 0 or size % self.num_kv_heads == 0)
                and (self.vision is None or self.vision.num_heads % size == 0)
            ):
                sizes.append(size)
        return sizes

    def largest_layer_parameters(self) -> int:
        """The largest single gathered unit under ZeRO-3 (the embedding or one decoder layer)."""
        return max(self.vocab_size * self.hidden_size, self.language_layer_parameters())


def _get(config: dict, key: str, default=None):
    text = config.get("text_config") or {}
    if key in text:
        return text[key]
    return config.get(key, default)


def shape_from_config(config: dict, name: str, source: str, preprocessor: dict | None = None) -> ModelShape:
    """A `ModelShape` from a `config.json` dictionary (and a `preprocessor_config.json` one).

    Raises:
        `UnknownModelFamilyError`: for a model type whose boxes the project cannot score.
        `UnknownArchitectureError`: when a field the arithmetic needs is missing.
    """
    model_type = str(config.get("model_type") or "")
    if model_type not in MODEL_TYPE_TO_FAMILY:
        from data_contracts.boxes import UnknownModelFamilyError

        raise UnknownModelFamilyError(model_type)
    missing = [
        key
        for key in (
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "vocab_size",
        )
        if _get(config, key) is None
    ]
    if missing:
        raise UnknownArchitectureError(
            f"{source} lacks {', '.join(missing)}: the preflight cannot size model {name}"
        )
    hidden = int(_get(config, "hidden_size"))
    heads = int(_get(config, "num_attention_heads"))
    tie = config.get("tie_word_embeddings")
    if tie is None:
        tie = (config.get("text_config") or {}).get("tie_word_embeddings", False)
    vision_config = config.get("vision_config")
    vision = None
    if vision_config:
        vision = VisionShape(
            depth=int(vision_config["depth"]),
            hidden_size=int(vision_config.get("hidden_size") or vision_config.get("embed_dim")),
            intermediate_size=int(vision_config.get("intermediate_size") or 0),
            num_heads=int(vision_config["num_heads"]),
            out_hidden_size=int(vision_config.get("out_hidden_size") or hidden),
            patch_size=int(vision_config.get("patch_size", 14)),
            spatial_merge_size=int(vision_config.get("spatial_merge_size", 2)),
            temporal_patch_size=int(vision_config.get("temporal_patch_size", 2)),
            num_position_embeddings=int(vision_config.get("num_position_embeddings") or 0),
            deepstack_layers=len(vision_config.get("deepstack_visual_indexes") or []),
        )
    image_rule = None
    if preprocessor:
        image_rule = image_rule_from_preprocessor(preprocessor)
    elif vision is not None:
        image_rule = default_image_rule(model_type, vision)
    return ModelShape(
        name=name,
        model_type=model_type,
        source=source,
        hidden_size=hidden,
        intermediate_size=int(_get(config, "intermediate_size")),
        num_layers=int(_get(config, "num_hidden_layers")),
        num_heads=heads,
        num_kv_heads=int(_get(config, "num_key_value_heads") or heads),
        head_dim=int(_get(config, "head_dim") or hidden // heads),
        vocab_size=int(_get(config, "vocab_size")),
        max_position_embeddings=int(_get(config, "max_position_embeddings") or 0),
        tie_word_embeddings=bool(tie),
        vision=vision,
        image_rule=image_rule,
    )


def image_rule_from_preprocessor(preprocessor: dict) -> ImageRule:
    """The resize rule of a Qwen-VL `preprocessor_config.json` (`size` edges or `min/max_pixels`).

    Raises:
        `UnknownArchitectureError`: when the config gives no pixel budget (`max_pixels` or `size.longest_edge`).
    """
    size = preprocessor.get("size") or {}
    min_pixels = preprocessor.get("min_pixels") or size.get("shortest_edge")
    max_pixels = preprocessor.get("max_pixels") or size.get("longest_edge")
    if max_pixels is None:
        raise UnknownArchitectureError(
            "the preprocessor config gives no max_pixels or size.longest_edge: the preflight cannot size its images"
        )
    factor = int(preprocessor.get("patch_size", 14)) * int(preprocessor.get("merge_size", 2))
    return ImageRule(factor=factor, min_pixels=int(min_pixels or factor * factor), max_pixels=int(max_pixels))


def default_image_rule(model_type: str, vision: VisionShape) -> ImageRule:
    """The family's published processor budget when the model folder has no preprocessor config."""
    factor = vision.patch_size * vision.spatial_merge_size
    if model_type == "qwen3_vl":
        return ImageRule(factor, 65536, 16777216)
    return ImageRule(factor, 3136, 12845056)


def published_shape(name: str) -> ModelShape:
    """The shape of one of the recipe models from `PUBLISHED_CONFIGS`.

    Raises:
        `UnknownArchitectureError`: for a model the table does not hold.
    """
    if name not in PUBLISHED_CONFIGS:
        raise UnknownArchitectureError(
            f"model {name} is not a local folder, not in the Hugging Face cache, and not one of the recipe "
            f"models whose architecture the preflight knows ({', '.join(PUBLISHED_CONFIGS)})"
        )
    facts = PUBLISHED_CONFIGS[name]
    return shape_from_config(facts, name, facts["source"], facts["preprocessor"])


def local_model_folder(name: str) -> Path | None:
    """The folder holding `name`'s `config.json`: the local folder, or its Hugging Face cache snapshot.

    Nothing is downloaded; `None` when neither exists.
    """
    folder = Path(name).expanduser()
    if (folder / "config.json").is_file():
        return folder
    if folder.exists() or not is_hub_id(name):
        return None
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(name, "config.json")
    if isinstance(cached, str):
        return Path(cached).parent
    return None


def is_hub_id(name: str) -> bool:
    """Whether `name` has the form of a Hugging Face model id (`owner/name`, no path syntax).

    >>> is_hub_id("Qwen/Qwen3-VL-8B-Thinking"), is_hub_id("./outputs/tiny"), is_hub_id("a/b/c")
    (True, False, False)
    """
    import re

    return re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", name) is not None and ".." not in name


def load_shape(name: str) -> ModelShape:
    """The shape of model `name`: its local (or cached) config files, else the published table.

    Raises:
        `UnknownArchitectureError`: when neither has it.
    """
    folder = local_model_folder(name)
    if folder is None:
        return published_shape(name)
    config = json.loads((folder / "config.json").read_text())
    preprocessor_file = folder / "preprocessor_config.json"
    preprocessor = json.loads(preprocessor_file.read_text()) if preprocessor_file.is_file() else None
    return shape_from_config(config, name, str(folder / "config.json"), preprocessor)
