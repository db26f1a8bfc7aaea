"""SFT cold start (SpatialCORE appendix A.4): teach the grounded output format before GRPO.

Target completions are, per training row: the pseudo-GT box lines in the model family's coordinate
convention (when pseudo-GT exists), a reasoning trace (from an LLM backend when one is given, else a
template built from the boxes), `</think>`, and the gold answer letter. `build_sft_targets` is the
pure function; the `sft_cold_start` asset wraps it (`build_sft_frame` selects the rows and adds the
`completion` column). `run_sft` trains a LoRA adapter on the language side with the vision encoder
frozen and completion-only loss (TRL's `SFTTrainer` masks the prompt tokens); that adapter
initialises GRPO (`init_adapter_path`).

Sequence length. TRL cuts every sequence (prompt, its image tokens, completion) to `max_length`
(1024 by default), from the end: the completion goes first. One 1280x960 image alone is 1,200
Qwen3-VL tokens (40 x 30 patches of 32 px after merging), so a default cut removes `</think>` and the
letter the cold start exists to teach. `sft_sequence_lengths` counts, per row, the text tokens of the
templated prompt and completion and the image tokens the processor will insert (the image resized
within the processor's `min_pixels`/`max_pixels` to multiples of patch x merge, one token per merged
patch), without processing pixels. `fit_max_length` then applies `max_length_policy`: `fit` (the
recipes' choice) sets `max_length` to the longest sequence, `error` stops when any target would be
cut, `warn` logs how many would be; every policy logs the numbers.

>>> row = {"question": "Where is the cup?", "options": ["left", "right"], "answer": "A",
...        "image_width": 640, "image_height": 480,
...        "pseudo_gt": [{"bbox_2d": [100, 200, 300, 400], "label": "cup", "validity": 0.9}]}
>>> print(build_sft_targets([row], family="qwen3_vl")[0])
{"bbox_2d": [100, 200, 300, 400], "label": "cup"}
The cup is in the upper left part of the image.
So the answer is A (left).
</think>
<BLANKLINE>
A
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from data_contracts.boxes import BoxError, ResizeRule, smart_resize, to_model_convention
from training.prompts import as_option_list, option_letters
from training.rewards.parsing import gold_option_letter

logger = logging.getLogger(__name__)

SFT_COLD_START_SAMPLES = 1000
ReasoningFunction = Callable[[dict, list[dict]], str]
MAX_LENGTH_POLICIES = ("fit", "error", "warn")


class SequenceTooLongError(ValueError):
    """SFT targets that `max_length` would cut (with `max_length_policy: error`)."""


def _region(centre: float, words: tuple[str, str, str]) -> str:
    if centre < 333:
        return words[0]
    if centre > 667:
        return words[2]
    return words[1]


def describe_position(box: Sequence[int]) -> str:
    """Where a 0..1000 grid box sits in the image, in words.

    >>> describe_position([0, 0, 100, 100]), describe_position([400, 400, 600, 600])
    ('upper left', 'centre')
    """
    x_centre, y_centre = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    vertical = _region(y_centre, ("upper", "middle", "lower"))
    horizontal = _region(x_centre, ("left", "centre", "right"))
    if vertical == "middle" and horizontal == "centre":
        return "centre"
    if vertical == "middle":
        return f"middle {horizontal}"
    return f"{vertical} {horizontal}" if horizontal != "centre" else f"{vertical} centre"


def template_reasoning(row: dict, boxes: list[dict]) -> str:
    """A short reasoning trace from the boxes' positions and the gold answer (offline default).

    Args:
        row (`dict`): the training row (`options`, `answer`).
        boxes (`list[dict]`): the pseudo-GT items kept as box lines (`bbox_2d` on the grid, `label`).
    """
    lines = [
        f"The {item['label']} is in the {describe_position(item['bbox_2d'])} part of the image."
        for item in boxes
    ]
    options = as_option_list(row.get("options"))
    letter = gold_option_letter(row.get("answer"), len(options))
    if options:
        lines.append(f"So the answer is {letter} ({options[option_letters(len(options)).index(letter)]}).")
    else:
        lines.append(f"So the answer is {letter}.")
    return "\n".join(lines)


def _valid_pseudo_gt(row: dict) -> list[dict]:
    items = row.get("pseudo_gt") or []
    if isinstance(items, str):
        items = json.loads(items)
    return [
        item
        for item in items
        if isinstance(item, dict)
        and item.get("bbox_2d") is not None
        and len(item["bbox_2d"]) == 4
        and item.get("label")
    ]


def build_sft_targets(
    rows: Sequence[dict],
    *,
    family: str = "qwen3_vl",
    reasoning_fn: ReasoningFunction | None = None,
    resize_rule: ResizeRule | None = None,
) -> list[str]:
    """Target completions of the SFT cold start, one per row.

    Each target is the pseudo-GT box lines (one JSON object per line, coordinates in `family`'s
    convention), a reasoning trace, `</think>`, a blank line and the gold letter: exactly the
    completion the SpatialCORE reward parses (the chat template has opened `<think>`).

    Args:
        rows (`Sequence[dict]`): `spatialcore_train` rows (`question`, `options`, `answer`,
            `image_width`, `image_height`, `pseudo_gt`).
        family (`str`, *optional*, defaults to `"qwen3_vl"`): model family of the coordinates.
        reasoning_fn (`Callable[[dict, list[dict]], str]`, *optional*): writes the reasoning of a row
            from the row and its kept boxes (e.g. an LLM backend); the template when omitted.
        resize_rule (`ResizeRule`, *optional*): Qwen2.5-VL's resize rule (the processor's).

    Returns:
        `list[str]`: the target completions.

    Raises:
        `ValueError`: when a row's gold answer is not an option letter.
    """
    targets = []
    for row in rows:
        width, height = int(row["image_width"]), int(row["image_height"])
        kept, lines = [], []
        for item in _valid_pseudo_gt(row):
            try:
                if resize_rule is None:
                    coordinates = to_model_convention(item["bbox_2d"], family, width, height)
                else:
                    coordinates = to_model_convention(item["bbox_2d"], family, width, height, resize_rule)
            except BoxError as error:
                logger.debug("pseudo-GT box dropped from the SFT target: %s", error)
                continue
            kept.append(item)
            lines.append(json.dumps({"bbox_2d": coordinates, "label": str(item["label"])}))
        reasoning = reasoning_fn(row, kept) if reasoning_fn is not None else template_reasoning(row, kept)
        letter = gold_option_letter(row.get("answer"), len(as_option_list(row.get("options"))))
        body = "\n".join([*lines, reasoning.strip()])
        targets.append(f"{body}\n</think>\n\n{letter}")
    return targets


def build_sft_frame(
    spatialcore_train: pl.DataFrame,
    *,
    samples: int = SFT_COLD_START_SAMPLES,
    seed: int = 0,
    family: str = "qwen3_vl",
    reasoning_fn: ReasoningFunction | None = None,
    reasoning_backend: str = "template",
    split: str | None = "train",
) -> pl.DataFrame:
    """Select `samples` training rows (seeded) and add `completion`, `model_family`, `reasoning_backend`.

    The result has the `sft_cold_start` contract's columns; `reasoning_backend` names where the
    traces came from (`"template"`, or `"<provider>/<model>"` with a `reasoning_fn`).

    Rows whose gold answer is unusable are dropped (with a warning) rather than failing the batch.

    >>> from training.testing import tiny_training_frames
    >>> build_sft_frame(tiny_training_frames(rows=4)["spatialcore_train"], samples=2).height
    2
    """
    frame = spatialcore_train
    if split is not None and "split" in frame.columns:
        frame = frame.filter(pl.col("split") == split)
    if frame.height > samples:
        frame = frame.sample(n=samples, seed=seed, shuffle=True)
    keep, completions = [], []
    for index, row in enumerate(
        frame.drop([c for c in ("image", "images") if c in frame.columns]).iter_rows(named=True)
    ):
        try:
            completions.append(build_sft_targets([row], family=family, reasoning_fn=reasoning_fn)[0])
        except ValueError as error:
            logger.warning("row %s left out of the SFT set: %s", row.get("question_id", index), error)
            continue
        keep.append(index)
    return frame[keep].with_columns(
        pl.Series("completion", completions, dtype=pl.String),
        pl.lit(family).alias("model_family"),
        pl.lit(reasoning_backend if reasoning_fn is not None else "template").alias("reasoning_backend"),
    )


@dataclass
class SpatialSFTArguments:
    """Data arguments of `spatial-train sft`.

    Args:
        data_root (`str`, *optional*): storage root of the caches (`$SPATIAL_DATA_ROOT`, else
            `$DAGSTER_HOME/spatial_data`, else `./data`).
        dataset_table (`str`, *optional*, defaults to `"sft_cold_start"`): table with a `completion`
            column; a `spatialcore_train`-like table without it gets template targets.
        dataset_split (`str`, *optional*, defaults to `"train"`): rows whose `split` equals this.
        max_train_samples (`int`, *optional*, defaults to `1000`): rows used (the paper's 1,000).
        allow_mixed_origins (`bool`, *optional*, defaults to `False`): train on a table whose `origin`
            column mixes the built-in sample world with real data (refused by default).
        model_family (`str`, *optional*): coordinate convention; read from the model config when omitted.
        max_length_policy (`str`, *optional*, defaults to `"fit"`): `fit` sets `max_length` to the longest
            prompt + image + completion sequence of the set, so no target is cut; `error` stops when the
            recipe's `max_length` would cut any target; `warn` logs how many it cuts.
    """

    data_root: str | None = field(default=None, metadata={"help": "Storage root of the Parquet caches."})
    dataset_table: str = field(
        default="sft_cold_start", metadata={"help": "SFT table (with a completion column)."}
    )
    dataset_split: str | None = field(default="train", metadata={"help": "Split to train on."})
    max_train_samples: int | None = field(default=SFT_COLD_START_SAMPLES, metadata={"help": "Rows used."})
    allow_mixed_origins: bool = field(
        default=False, metadata={"help": "Accept a table mixing sample-world and real rows (origin column)."}
    )
    model_family: str | None = field(default=None, metadata={"help": "Box convention family (auto)."})
    max_length_policy: str = field(
        default="fit",
        metadata={"help": "fit (max_length = longest sequence), error or warn when max_length cuts targets."},
    )

    def __post_init__(self) -> None:
        if self.max_length_policy not in MAX_LENGTH_POLICIES:
            raise ValueError(
                f"max_length_policy must be one of {', '.join(MAX_LENGTH_POLICIES)}, got {self.max_length_policy!r}"
            )


@dataclass
class SequenceLengths:
    """Token counts of every SFT row as TRL's collator builds it (prompt first, then the completion).

    Attributes:
        prompt_text (`list[int]`): templated prompt tokens, each image placeholder counted once.
        images (`list[int]`): image tokens the processor inserts for the row's images.
        completion (`list[int]`): templated completion tokens (the target, end of turn included).
        image_budget (`int`): the most tokens one image can take (`max_pixels / (patch * merge)^2`).
        max_pixels (`int`), factor (`int`): the processor's pixel budget and patch x merge size.
    """

    prompt_text: list[int]
    images: list[int]
    completion: list[int]
    image_budget: int
    max_pixels: int
    factor: int

    @property
    def totals(self) -> list[int]:
        """Full sequence length of every row (prompt text + image tokens + completion)."""
        return [
            prompt + images + completion
            for prompt, images, completion in zip(self.prompt_text, self.images, self.completion, strict=True)
        ]

    def cut(self, max_length: int | None) -> int:
        """How many rows `max_length` would cut (every cut takes tokens of the completion)."""
        if max_length is None:
            return 0
        return sum(total > max_length for total in self.totals)

    def describe(self) -> str:
        """One line with the longest sequence and where its tokens go."""
        totals = self.totals
        longest = max(range(len(totals)), key=totals.__getitem__)
        return (
            f"longest SFT sequence {totals[longest]} tokens (prompt text {self.prompt_text[longest]}, "
            f"image {self.images[longest]}, completion {self.completion[longest]}); image token budget "
            f"{self.image_budget} per image (max_pixels {self.max_pixels}, patch x merge {self.factor} px)"
        )


def _image_tokens(width: int, height: int, rule: ResizeRule) -> int:
    resized_height, resized_width = smart_resize(int(height), int(width), rule)
    return (resized_height // rule.factor) * (resized_width // rule.factor)


def sft_sequence_lengths(
    prompts: Sequence[list[dict]],
    completions: Sequence[list[dict]],
    image_sizes: Sequence[Sequence[tuple[int, int]]],
    processor,
) -> SequenceLengths:
    """Count the tokens TRL's SFT collator will build for each row, without processing any pixel.

    Args:
        prompts (`Sequence[list[dict]]`): conversational prompts (string contents, images not inserted).
        completions (`Sequence[list[dict]]`): the assistant messages (targets).
        image_sizes (`Sequence[Sequence[tuple[int, int]]]`): per row, `(width, height)` of each image.
        processor: the Qwen-VL processor (its tokenizer, chat template and image processor).

    Returns:
        [`SequenceLengths`]
    """
    from trl.data_utils import apply_chat_template, prepare_multimodal_messages

    from training.models import resize_rule_of

    rule = resize_rule_of(processor)
    tokenizer = processor.tokenizer
    prompt_text, images, completion = [], [], []
    for prompt, target, sizes in zip(prompts, completions, image_sizes, strict=True):
        sizes = list(sizes)
        example = {
            "prompt": prepare_multimodal_messages(prompt, images=[None] * len(sizes)),
            "completion": prepare_multimodal_messages(target),
        }
        texts = apply_chat_template(example, processor)
        prompt_text.append(len(tokenizer(texts["prompt"], add_special_tokens=False)["input_ids"]))
        completion.append(len(tokenizer(texts["completion"], add_special_tokens=False)["input_ids"]))
        # the processor replaces each image's one placeholder token by its merged patches
        images.append(sum(_image_tokens(width, height, rule) - 1 for width, height in sizes))
    return SequenceLengths(
        prompt_text=prompt_text,
        images=images,
        completion=completion,
        image_budget=rule.max_pixels // (rule.factor * rule.factor),
        max_pixels=rule.max_pixels,
        factor=rule.factor,
    )


def fit_max_length(lengths: SequenceLengths, max_length: int | None, policy: str = "fit") -> int | None:
    """The `max_length` to train with under `policy`; logs the counts, raises for `error` when targets are cut.

    >>> lengths = SequenceLengths([100, 90], [1199, 299], [60, 40], 16384, 16777216, 32)
    >>> fit_max_length(lengths, 1024)
    1359
    >>> fit_max_length(lengths, 1024, "error")
    Traceback (most recent call last):
    ...
    training.sft.SequenceTooLongError: max_length 1024 cuts the completion of 1 of 2 SFT targets (longest SFT sequence 1359 tokens (prompt text 100, image 1199, completion 60); image token budget 16384 per image (max_pixels 16777216, patch x merge 32 px)); set max_length to at least 1359, lower the image processor's max_pixels, or use max_length_policy fit
    """
    if policy not in MAX_LENGTH_POLICIES:
        raise ValueError(f"max_length_policy must be one of {', '.join(MAX_LENGTH_POLICIES)}, got {policy!r}")
    longest = max(lengths.totals)
    if policy == "fit":
        logger.info("%s; max_length set to %d: no SFT target is cut", lengths.describe(), longest)
        return longest
    cut = lengths.cut(max_length)
    if cut == 0:
        logger.info("%s; max_length %s cuts no SFT target", lengths.describe(), max_length)
        return max_length
    message = (
        f"max_length {max_length} cuts the completion of {cut} of {len(lengths.totals)} SFT targets "
        f"({lengths.describe()}); set max_length to at least {longest}, lower the image processor's "
        "max_pixels, or use max_length_policy fit"
    )
    if policy == "error":
        raise SequenceTooLongError(message)
    logger.warning("%s", message)
    return max_length


def sft_dataset(
    data_root: str | Path,
    table: str,
    family: str,
    split: str | None,
    max_samples: int | None,
    allow_mixed_origins: bool = False,
):
    """The SFT dataset: `prompt` (SpatialCORE prompt), `completion` (assistant message), `image`.

    Returns the dataset, the quarantined rows and each row's image size `(width, height)` (from the
    table's `image_width` / `image_height`).
    """
    from training.data import load_training_data

    data = load_training_data(
        data_root,
        table,
        "spatialcore",
        family,
        split=split,
        max_samples=max_samples,
        allow_mixed_origins=allow_mixed_origins,
    )
    dataset = data.dataset
    image_sizes = [
        [(int(width), int(height))]
        for width, height in zip(dataset["image_width"], dataset["image_height"], strict=True)
    ]
    if "completion" in dataset.column_names:
        texts = [str(text) for text in dataset["completion"]]
        dataset = dataset.remove_columns(["completion"])
    else:
        rows = dataset.remove_columns([c for c in ("image", "prompt") if c in dataset.column_names]).to_list()
        texts = build_sft_targets(rows, family=family)
    messages = [[{"role": "assistant", "content": text}] for text in texts]
    dataset = dataset.select_columns(
        [column for column in ("prompt", "image") if column in dataset.column_names]
    )
    return dataset.add_column("completion", messages), data.quarantine, image_sizes


def build_sft_trainer(script_args: SpatialSFTArguments, training_args, model_args):
    """TRL's `SFTTrainer` for the cold start: language-side LoRA, vision frozen, completion-only loss.

    `max_length` follows `script_args.max_length_policy` (see `fit_max_length`), counted on this data
    set with this processor before the trainer is built.
    """
    from trl import SFTTrainer

    from data_contracts.storage import default_storage_root
    from training.data import write_quarantine
    from training.models import detect_family, load_model, load_processor, prepare_policy

    if training_args.completion_only_loss is False:
        raise ValueError(
            "the SFT cold start trains on the completion only; do not set completion_only_loss: false"
        )
    training_args.completion_only_loss = True
    family = script_args.model_family or detect_family(model_args.model_name_or_path)
    data_root = script_args.data_root or default_storage_root()
    dataset, quarantine, image_sizes = sft_dataset(
        data_root,
        script_args.dataset_table,
        family,
        script_args.dataset_split,
        script_args.max_train_samples,
        script_args.allow_mixed_origins,
    )
    write_quarantine(quarantine, training_args.output_dir, script_args.dataset_table)
    processor = load_processor(model_args.model_name_or_path, family)
    lengths = sft_sequence_lengths(dataset["prompt"], dataset["completion"], image_sizes, processor)
    training_args.max_length = fit_max_length(
        lengths, training_args.max_length, script_args.max_length_policy
    )
    model, peft_config = prepare_policy(load_model(model_args), model_args)
    return SFTTrainer(
        model=model,
        args=training_args,
        train_dataset=dataset,
        processing_class=processor,
        peft_config=peft_config,
    )


def run_sft(script_args: SpatialSFTArguments, training_args, model_args) -> Path:
    """Train the cold-start adapter and save it to `output_dir` (returned)."""
    trainer = build_sft_trainer(script_args, training_args, model_args)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.save_model(training_args.output_dir)
    logger.info("saved the SFT cold-start adapter to %s", training_args.output_dir)
    return Path(training_args.output_dir)
