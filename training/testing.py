"""Tiny Qwen-VL models, tokenizers and processors built locally, for tests and CPU benchmarks.

Nothing is downloaded: the tokenizer is a byte-level BPE trained in milliseconds on a small
synthetic corpus with Qwen's pre-tokenizer (which splits numbers into single digits) and Qwen's
special tokens; the models are built from small configs with random weights; the processor uses
the PIL image processor, so torchvision is never needed.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as folder:
...     model_dir = build_tiny_model(folder, family="qwen3_vl")
...     sorted(p.name for p in model_dir.iterdir())[:2]
['chat_template.jinja', 'config.json']
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypedDict, cast
from unittest import mock

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import AddedToken, LogitsProcessor, LogitsProcessorList, Qwen2_5_VLConfig, Qwen3VLConfig
from transformers.generation.utils import GenerationMixin
from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX, Qwen2Tokenizer
from transformers.models.qwen2_5_vl import Qwen2_5_VLForConditionalGeneration
from transformers.models.qwen3_vl import Qwen3VLForConditionalGeneration

logger = logging.getLogger(__name__)

# Qwen's special tokens, in the order the released tokenizers number them after the BPE vocabulary.
QWEN_SPECIAL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
)
# Added but not special (they survive `skip_special_tokens=True`), as in Qwen3's tokenizers.
QWEN_TEXT_ADDED_TOKENS = ("<think>", "</think>", "<tool_call>", "</tool_call>")

QWEN3_VL_THINKING_CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['content'] is string -%}{%- set content = message['content'] -%}"
    "{%- else -%}{%- set ns = namespace(text='') -%}"
    "{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' -%}"
    "{%- set ns.text = ns.text + '<|vision_start|><|image_pad|><|vision_end|>' -%}"
    "{%- elif part['type'] == 'text' -%}{%- set ns.text = ns.text + part['text'] -%}{%- endif -%}"
    "{%- endfor -%}{%- set content = ns.text -%}{%- endif -%}"
    "{%- if message['role'] == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n<think>\\n' + content + '<|im_end|>\\n' -}}"
    "{%- else -%}{{- '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n<think>\\n' -}}{%- endif -%}"
)

QWEN2_5_VL_CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] != 'system' -%}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' -}}{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message['content'] is string -%}{%- set content = message['content'] -%}"
    "{%- else -%}{%- set ns = namespace(text='') -%}"
    "{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' -%}"
    "{%- set ns.text = ns.text + '<|vision_start|><|image_pad|><|vision_end|>' -%}"
    "{%- elif part['type'] == 'text' -%}{%- set ns.text = ns.text + part['text'] -%}{%- endif -%}"
    "{%- endfor -%}{%- set content = ns.text -%}{%- endif -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

_CORPUS_LINES = (
    '{"bbox_2d": [112, 340, 568, 902], "label": "red chair"}',
    '{"bbox_2d": [5, 17, 999, 1000], "label": "wooden table"}',
    '{"id": "lamp.1", "bbox": [41, 230, 87, 400]}',
    '<observe>A kitchen with a table.</observe><scene>{"objects": [], "relationships": []}</scene>',
    "<think>The lamp is left of the chair, so the answer is B.</think><answer>(B) left</answer>",
    "Question: Which object is closer to the camera? Options: A. the chair B. the lamp C. the cup",
    "Answer with a single letter after the reasoning. Image size: 640 x 480 pixels.",
    "How far is the sofa from the door in metres? About 2.5 meters. Count the mugs: 3.",
    "You are a helpful assistant. The person is behind the car and in front of the tree.",
    "First list the boxes of the relevant objects, then reason step by step, then answer.",
)


def _train_byte_level_bpe(vocab_size: int) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Train a byte-level BPE with Qwen's pre-tokenizer on the synthetic corpus."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
        special_tokens=[],
    )
    tokenizer.train_from_iterator(list(_CORPUS_LINES) * 4, trainer=trainer)
    model_state = json.loads(tokenizer.to_str())["model"]
    merges: list[tuple[str, str]] = []
    for merge in model_state["merges"]:
        first, second = merge.split(" ") if isinstance(merge, str) else merge
        merges.append((first, second))
    return model_state["vocab"], merges


def build_tiny_tokenizer(
    bpe_vocab_size: int = 400, thinking: bool = True, pad_vocab_to: int | None = None
) -> Qwen2Tokenizer:
    """Build a Qwen2 tokenizer (byte-level BPE, single-digit numbers) with Qwen's special tokens.

    Args:
        bpe_vocab_size (`int`, *optional*, defaults to `400`):
            Size of the trained BPE vocabulary (256 byte symbols plus merges).
        thinking (`bool`, *optional*, defaults to `True`):
            Attach the Qwen3-VL-Thinking chat template (generation prompt opens `<think>`); otherwise
            Qwen2.5-VL's template.
        pad_vocab_to (`int`, *optional*):
            Fill the BPE vocabulary with filler words (`" tok<N>"`, never produced by encoding) up to this
            size before the special tokens, so that a real-size model (Qwen's 151,643 BPE entries) can
            emit and decode any id, e.g. for GPU benchmarks with random weights.

    >>> tokenizer = build_tiny_tokenizer()
    >>> tokenizer.tokenize("[123]")
    ['[', '1', '2', '3', ']']
    >>> large = build_tiny_tokenizer(pad_vocab_to=1000)
    >>> len(large) - len(tokenizer), large.decode([999])
    (600, ' tok999')
    """
    vocab, merges = _train_byte_level_bpe(bpe_vocab_size)
    if pad_vocab_to is not None:
        vocab = dict(vocab)
        for index in range(len(vocab), pad_vocab_to):
            vocab[f"\u0120tok{index}"] = index
    tokenizer = Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,  # type: ignore[arg-type]  # the stub says list[str]; tokenizers' BPE takes (a, b) pairs
        unk_token=None,  # type: ignore[arg-type]  # the stub says str; None is a BPE without an unknown token
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        errors="replace",
        clean_up_tokenization_spaces=False,
    )
    tokenizer.add_tokens([AddedToken(token, special=True, normalized=False) for token in QWEN_SPECIAL_TOKENS])
    tokenizer.add_tokens(
        [AddedToken(token, special=False, normalized=False) for token in QWEN_TEXT_ADDED_TOKENS]
    )
    tokenizer.chat_template = QWEN3_VL_THINKING_CHAT_TEMPLATE if thinking else QWEN2_5_VL_CHAT_TEMPLATE
    tokenizer.padding_side = "left"
    return tokenizer


def build_tiny_image_processor(family: str, max_pixels: int | None = None):
    """The PIL Qwen-VL image processor (`Qwen2VLImageProcessorPil`) with a tiny pixel budget.

    `max_pixels` raises the budget (e.g. `448 * 448` for realistic image-token counts). Imported here,
    not at the top: the model and tokenizer builders also serve machines without pillow (the GPU
    benchmark's bare machine).
    """
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    if family == "qwen3_vl":
        patch_size, image_mean = 16, [0.5, 0.5, 0.5]
    else:
        patch_size, image_mean = 14, [0.48145466, 0.4578275, 0.40821073]
    factor = patch_size * 2
    return Qwen2VLImageProcessorPil(
        patch_size=patch_size,
        temporal_patch_size=2,
        merge_size=2,
        size={"shortest_edge": factor * factor, "longest_edge": max_pixels or 4 * factor * factor},
        image_mean=image_mean,
        image_std=[0.5, 0.5, 0.5] if family == "qwen3_vl" else [0.26862954, 0.26130258, 0.27577711],
    )


def _round_up(value: int, multiple: int) -> int:
    return (value + multiple - 1) // multiple * multiple


class _VisionTokenIds(TypedDict):
    """The ids of the vision special tokens, as the Qwen-VL configs take them."""

    image_token_id: int
    video_token_id: int
    vision_start_token_id: int
    vision_end_token_id: int


def _token_id(tokenizer: Qwen2Tokenizer, token: str) -> int:
    """The id of one token (`convert_tokens_to_ids` of a single token is one id)."""
    return cast(int, tokenizer.convert_tokens_to_ids(token))


def build_tiny_model_config(family: str, tokenizer: Qwen2Tokenizer) -> Qwen3VLConfig | Qwen2_5_VLConfig:
    """A 2-layer, 64-wide config of `family` whose special token ids match `tokenizer`."""
    vocab_size = _round_up(len(tokenizer), 64)
    token_ids = _VisionTokenIds(
        image_token_id=_token_id(tokenizer, "<|image_pad|>"),
        video_token_id=_token_id(tokenizer, "<|video_pad|>"),
        vision_start_token_id=_token_id(tokenizer, "<|vision_start|>"),
        vision_end_token_id=_token_id(tokenizer, "<|vision_end|>"),
    )
    eos_token_id = _token_id(tokenizer, "<|im_end|>")
    pad_token_id = _token_id(tokenizer, "<|endoftext|>")
    if family == "qwen3_vl":
        text_config = {
            "vocab_size": vocab_size,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "head_dim": 16,
            "max_position_embeddings": 4096,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 500000.0,
                "mrope_section": [2, 3, 3],
                "mrope_interleaved": True,
            },
            "eos_token_id": eos_token_id,
            "pad_token_id": pad_token_id,
        }
        vision_config = {
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "out_hidden_size": 64,
            "num_position_embeddings": 64,
            "deepstack_visual_indexes": [1],
        }
        return Qwen3VLConfig(text_config=text_config, vision_config=vision_config, **token_ids)
    if family == "qwen2_5_vl":
        text_config = {
            "vocab_size": vocab_size,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "max_position_embeddings": 4096,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]},
            "eos_token_id": eos_token_id,
            "pad_token_id": pad_token_id,
            "bos_token_id": pad_token_id,
        }
        vision_config = {
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "window_size": 56,
            "out_hidden_size": 64,
            "fullatt_block_indexes": [1],
        }
        return Qwen2_5_VLConfig(text_config=text_config, vision_config=vision_config, **token_ids)
    raise ValueError(f"no tiny model for family {family!r}; expected 'qwen3_vl' or 'qwen2_5_vl'")


def build_tiny_model(output_dir: str | Path, family: str = "qwen3_vl", seed: int = 0) -> Path:
    """Write a tiny random-weight Qwen-VL model, its tokenizer and image processor to `output_dir`.

    The folder loads with `transformers`' `from_pretrained` and with `training.models.load_processor`.

    Args:
        output_dir (`str` or `Path`):
            Folder to write (created if missing).
        family (`str`, *optional*, defaults to `"qwen3_vl"`):
            `"qwen3_vl"` (thinking chat template) or `"qwen2_5_vl"`.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the random weights.

    Returns:
        `Path`: the model folder.
    """
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tiny_tokenizer(thinking=family == "qwen3_vl")
    config = build_tiny_model_config(family, tokenizer)
    torch.manual_seed(seed)
    model_class = (
        Qwen3VLForConditionalGeneration if family == "qwen3_vl" else Qwen2_5_VLForConditionalGeneration
    )
    model = model_class(config)
    model.generation_config.eos_token_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(output_dir)
    tokenizer.save_pretrained(output_dir)
    (output_dir / "chat_template.jinja").write_text(tokenizer.chat_template)
    if importlib.util.find_spec("PIL") is not None:
        build_tiny_image_processor(family).save_pretrained(output_dir)
    else:
        logger.warning("pillow is not installed: %s has no image processor", output_dir)
    logger.info("wrote a tiny %s model to %s", family, output_dir)
    return output_dir


def _format_completion(generator: random.Random) -> str:
    """A SpatialCORE-style completion: 0-2 boxes near the tiny scenes' objects, a reasoning line, a letter."""
    lines = []
    for label, _, box in _OBJECTS[: generator.choice((0, 1, 2, 2))]:
        x1, y1, x2, y2 = (min(1000, max(0, value + generator.randint(-60, 60))) for value in box)
        lines.append(
            json.dumps(
                {
                    "bbox_2d": [min(x1, x2 - 1), min(y1, y2 - 1), max(x2, x1 + 1), max(y2, y1 + 1)],
                    "label": label,
                }
            )
        )
    reasoning = generator.choice(
        (
            "The chair is left of the lamp.",
            "The lamp is behind the chair.",
            "The cup is in front of the chair.",
        )
    )
    return "\n".join([*lines, reasoning]) + "\n</think>\n\n" + generator.choice("ABCD")


def teach_spatialcore_format(model_dir: str | Path, steps: int = 120, seed: int = 0) -> Path:
    """Fit a tiny Qwen3-VL model (in place) to answer SpatialCORE prompts in the SpatialCORE format.

    A random tiny model writes noise: every rollout of a group then gets the same reward, GRPO's
    advantages are all zero and a smoke run trains nothing. After `steps` AdamW steps (about 10 s on
    two CPU cores) on the tiny scenes' prompts (images included) with targets of 0-2 jittered boxes, a
    reasoning line, `</think>` and a random letter, sampled completions differ in boxes and answer, so
    their rewards differ too.
    """
    from torch.nn.utils.rnn import pad_sequence
    from transformers import AutoModelForImageTextToText

    from data_contracts.images import decode_image
    from training.models import load_processor
    from training.prompts import build_messages

    model_dir = Path(model_dir)
    torch.manual_seed(seed)
    generator = random.Random(seed)
    processor = load_processor(model_dir, "qwen3_vl")
    tokenizer = processor.tokenizer
    model = AutoModelForImageTextToText.from_pretrained(model_dir)
    prompts = []
    for row in tiny_training_frames(rows=8, seed=seed)["spatialcore_train"].to_dicts():
        messages = build_messages("spatialcore", row, "qwen3_vl")
        messages[1] = {
            "role": "user",
            "content": [{"type": "image"}, {"type": "text", "text": messages[1]["content"]}],
        }
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        prompts.append(processor(text=[text], images=[decode_image(row["image"])], return_tensors="pt"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        chosen = [prompts[generator.randrange(len(prompts))] for _ in range(4)]
        ids, types, labels = [], [], []
        for prompt in chosen:
            target = tokenizer(_format_completion(generator) + "<|im_end|>", add_special_tokens=False)[
                "input_ids"
            ]
            target = torch.tensor(target)
            ids.append(torch.cat([prompt["input_ids"][0], target]))
            types.append(torch.cat([prompt["mm_token_type_ids"][0], torch.zeros_like(target)]))
            labels.append(torch.cat([torch.full_like(prompt["input_ids"][0], -100), target]))
        loss = model(
            input_ids=pad_sequence(ids, batch_first=True, padding_value=tokenizer.pad_token_id),
            attention_mask=pad_sequence([torch.ones_like(row) for row in ids], batch_first=True),
            mm_token_type_ids=pad_sequence(types, batch_first=True),
            pixel_values=torch.cat([prompt["pixel_values"] for prompt in chosen]),
            image_grid_thw=torch.cat([prompt["image_grid_thw"] for prompt in chosen]),
            labels=pad_sequence(labels, batch_first=True, padding_value=-100),
        ).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.save_pretrained(model_dir)
    logger.info(
        "taught %s the SpatialCORE format (%d steps, last loss %.3f)", model_dir, steps, float(loss.detach())
    )
    return model_dir


def _scene_image(width: int, height: int, boxes: list[tuple[list[int], tuple[int, int, int]]]):
    """A small RGB image with coloured rectangles at the given 0..1000 grid boxes."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (width, height), (235, 235, 230))
    draw = ImageDraw.Draw(image)
    for (x1, y1, x2, y2), colour in boxes:
        draw.rectangle(
            [x1 * width / 1000, y1 * height / 1000, x2 * width / 1000 - 1, y2 * height / 1000 - 1],
            fill=colour,
        )
    return image


_OBJECTS = (
    ("red chair", (200, 30, 30), [80, 420, 330, 900]),
    ("blue lamp", (30, 60, 200), [560, 120, 760, 640]),
    ("green cup", (30, 160, 60), [400, 700, 520, 860]),
)


SPATIALCORE_TASK_TYPES = ("Spatial_Interaction", "Perspective_Taking")
STVQA_CATEGORIES = ("relation", "depth")
# Even rows: a multiple-choice task whose gold letter is "A"; odd rows: a numeric task (1.5 m).
DGE_TASK_TYPES = ("relative_direction_image", "absolute_distance")


def tiny_training_frames(rows: int = 8, seed: int = 0, image_size: tuple[int, int] = (64, 48)):
    """Small `spatialcore_train`, `stvqa` and `dge_tasks` frames that satisfy their contracts.

    Task types alternate by row (`SPATIALCORE_TASK_TYPES`, `STVQA_CATEGORIES`, `DGE_TASK_TYPES`).

    Returns:
        `dict[str, polars.DataFrame]`: one frame per table name.

    >>> frames = tiny_training_frames(rows=4)
    >>> sorted(frames), frames["spatialcore_train"].height
    (['dge_tasks', 'spatialcore_train', 'stvqa'], 4)
    """
    import polars as pl

    from data_contracts.dge_tasks import DgeTasks
    from data_contracts.images import encode_image, image_sha256
    from data_contracts.spatialcore_train import SpatialcoreTrain
    from data_contracts.stvqa import Stvqa

    generator = random.Random(seed)
    width, height = image_size
    spatialcore, stvqa, dge = [], [], []
    for index in range(rows):
        boxes = [(box, colour) for _, colour, box in _OBJECTS]
        image = encode_image(_scene_image(width, height, boxes), path=f"scene_{index}.png")
        spatialcore.append(_spatialcore_row(index, image, image_sha256(image), image_size, generator))
        stvqa.append(_stvqa_row(index, image, image_size))
        dge.append(_dge_row(index, image))
    return {  # typed by the contracts themselves
        "spatialcore_train": SpatialcoreTrain.cast(pl.DataFrame(spatialcore)),
        "stvqa": Stvqa.cast(pl.DataFrame(stvqa)),
        "dge_tasks": DgeTasks.cast(pl.DataFrame(dge)),
    }


def _spatialcore_row(
    index: int, image: dict, sha256: str, image_size: tuple[int, int], generator: random.Random
) -> dict:
    """Row `index` of the tiny `spatialcore_train` frame (its answer drawn from `generator`)."""
    width, height = image_size
    options = ["left of the lamp", "right of the lamp", "behind the lamp", "on the lamp"]
    answer_index = generator.randrange(len(options))
    return {
        "question_id": f"q{index}",
        "image": image,
        "image_sha256": sha256,
        "image_width": width,
        "image_height": height,
        "question": "Where is the red chair relative to the blue lamp?",
        "options": options,
        "answer_index": answer_index,
        "answer": "ABCD"[answer_index],
        "task_type": SPATIALCORE_TASK_TYPES[index % 2],
        "sub_task_type": ("Localization", "Allocentric")[index % 2],
        "pseudo_gt": [
            {"bbox_2d": box, "label": label, "validity": 0.5 + 0.1 * position}
            for position, (label, _, box) in enumerate(_OBJECTS[:2])
        ],
        "split": "train",
        "source": "tiny",
        "origin": "sample_world",
    }


def _stvqa_row(index: int, image: dict, image_size: tuple[int, int]) -> dict:
    """Row `index` of the tiny `stvqa` frame: a yes/no relation question with its scene graph."""
    width, height = image_size
    question_with_options = "Is the red chair left of the blue lamp?\nOptions:\n(A) yes\n(B) no"
    return {
        "image_id": f"img{index}",
        "images": [image],
        "problem": f"<image> Observe, write the scene graph, think, answer.\n\n"
        f"Image size: ({width} x {height})\n\nQ. {question_with_options}",
        "question_only": "Is the red chair left of the blue lamp?",
        "question_with_options": question_with_options,
        "options": ["yes", "no"],
        "answer": "A",
        "answer_only": "A",
        "answer_text": "yes",
        "answer_option_text": "(A) yes",
        "category": STVQA_CATEGORIES[index % 2],
        "level": "easy",
        "rating": 8,
        "image_width": width,
        "image_height": height,
        "gt_scene": {
            "objects": [
                {"id": "chair.1", "bbox_2d": _OBJECTS[0][2]},
                {"id": "lamp.1", "bbox_2d": _OBJECTS[1][2]},
            ],
            "relationships": [{"subject": "chair.1", "predicate": "left of", "object": "lamp.1"}],
        },
        "split": "train",
        "origin": "sample_world",
    }


def _dge_row(index: int, image: dict) -> dict:
    """Row `index` of the tiny `dge_tasks` frame: multiple choice on even rows, numeric (1.5 m) on odd rows."""
    numeric = index % 2 == 1
    return {
        "task_id": f"t{index}",
        "scene_id": "scene0000_00",
        "task_type": DGE_TASK_TYPES[index % 2],
        "images": [image, image],
        "frame_indices": [0, 10],
        "question": "How far is the chair from the lamp?" if numeric else "Is the chair left or right?",
        "options": [] if numeric else ["left", "right"],
        "answer_index": None if numeric else 0,
        "answer": "1.5" if numeric else "A",
        "numeric_answer": 1.5 if numeric else None,
        "unit": "m" if numeric else None,
        "facts": "{}",
        "geometry_source": "scanned",
        "split": "train",
        "origin": "sample_world",
        "dataset": "scannet",
    }


def write_tiny_training_tables(data_root: str | Path, rows: int = 8, **kwargs) -> Path:
    """Write `tiny_training_frames` as `<data_root>/<table>.parquet`; return `data_root`."""
    data_root = Path(data_root)
    data_root.mkdir(parents=True, exist_ok=True)
    for name, frame in tiny_training_frames(rows=rows, **kwargs).items():
        frame.write_parquet(data_root / f"{name}.parquet")
    return data_root


class ScriptedTokens(LogitsProcessor):
    """Allow only the next token of each row's scripted completion, then the end-of-turn token.

    The policy's logits are computed as usual before this mask, so the entropies recorded from them
    are those of the model's own distribution at the emitted tokens.
    """

    def __init__(self, targets: list[list[int]], prompt_length: int, eos_token_id: int):
        self.targets = targets
        self.prompt_length = prompt_length
        self.eos_token_id = eos_token_id

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        step = input_ids.shape[1] - self.prompt_length
        allowed = [
            target[step] if step < len(target) else self.eos_token_id
            for target in (self.targets[row % len(self.targets)] for row in range(scores.shape[0]))
        ]
        forced = torch.full_like(scores, float("-inf"))
        forced[
            torch.arange(scores.shape[0], device=scores.device), torch.tensor(allowed, device=scores.device)
        ] = 0.0
        return cast(torch.FloatTensor, forced)  # a float tensor like `scores`


@contextlib.contextmanager
def scripted_generation(tokenizer, completions: Sequence[str], seed: int = 0):
    """Make every `generate` call emit, per row, one of `completions` (a seeded draw per row and call).

    Used by the tests and the benchmark to get structured completions (boxes, answers) out of a
    random-weight model; yields the list of drawn token targets of each call.
    """
    generator = random.Random(seed)
    encoded = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in completions]
    eos_token_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
    original: Callable[..., Any] = GenerationMixin.generate
    calls: list[list[list[int]]] = []

    def generate(self, *args, **kwargs):
        input_ids = kwargs.get("input_ids", args[0] if args else None)
        if input_ids is None:
            raise ValueError("scripted_generation needs the prompt ids (input_ids) of each generate call")
        targets = [encoded[generator.randrange(len(encoded))] for _ in range(input_ids.shape[0])]
        calls.append(targets)
        processors = LogitsProcessorList(kwargs.pop("logits_processor", None) or [])
        processors.append(ScriptedTokens(targets, input_ids.shape[1], eos_token_id))
        return original(self, *args, logits_processor=processors, **kwargs)

    with mock.patch.object(GenerationMixin, "generate", generate):
        yield calls


SPATIALCORE_COMPLETIONS = (
    # two valid boxes close to the pseudo-GT, reasoning, the letter
    '{"bbox_2d": [80, 420, 330, 900], "label": "red chair"}\n'
    '{"bbox_2d": [560, 120, 760, 640], "label": "blue lamp"}\nThe chair is left.</think>A',
    # one valid box, another answer
    '{"bbox_2d": [100, 400, 300, 880], "label": "chair"}\nleft</think>B',
    # no box at all
    "no boxes here</think>C",
    # a valid box, a malformed box, and a box after </think> (neither of the last two is grounding)
    '{"bbox_2d": [5, 7, 60, 61], "label": "red chair"}\n{"bbox_2d": [1, 2], "label": "bad"}\n'
    '</think>{"bbox_2d": [1, 2, 3, 4], "label": "x"}D',
)
DGE_COMPLETIONS = ("x</think><answer>A</answer>",)


def main(argv: list[str] | None = None) -> int:
    """`python -m training.testing tiny-model DIR [--family F] [--random-weights]` or `tiny-tables DIR [--rows N]`."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m training.testing", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    model_parser = commands.add_parser("tiny-model", help="write a tiny random Qwen-VL model folder")
    model_parser.add_argument("output_dir")
    model_parser.add_argument("--family", default="qwen3_vl", choices=["qwen3_vl", "qwen2_5_vl"])
    model_parser.add_argument(
        "--random-weights",
        action="store_true",
        help="skip fitting the Qwen3-VL model to the SpatialCORE format (its rollouts are then noise, all of "
        "equal reward, and a smoke GRPO run makes no update)",
    )
    tables_parser = commands.add_parser(
        "tiny-tables", help="write small spatialcore_train/stvqa/dge_tasks tables"
    )
    tables_parser.add_argument("output_dir")
    tables_parser.add_argument("--rows", type=int, default=8)
    arguments = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    if arguments.command == "tiny-model":
        build_tiny_model(arguments.output_dir, family=arguments.family)
        if arguments.family == "qwen3_vl" and not arguments.random_weights:
            teach_spatialcore_format(arguments.output_dir)
    else:
        write_tiny_training_tables(arguments.output_dir, rows=arguments.rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
