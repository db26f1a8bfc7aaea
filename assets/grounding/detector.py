"""The ``grounding_dino`` backend: zero-shot boxes for object phrases, with the score as validity.

As SpatialCORE's appendix A.3 describes: for each sample with phrases, the phrases are joined into one
text prompt (``"red car. boy in orange clothes."``), Grounding DINO detects on the image, the
highest-scoring box per returned label is kept, boxes scoring under the box threshold (0.3) are
dropped, coordinates go to the 0..1000 grid, and each kept score becomes the box's ``validity``.

The model is transformers' :class:`~transformers.GroundingDinoForObjectDetection` (it loads the
IDEA-Research checkpoints from a local directory or a model id; ``groundingdino-py`` cannot share an
environment with transformers 5). Images go through in batches, on CUDA when present.

Labels are read back onto the phrases exactly (:func:`decode_detections`): the prompt's token
positions are split at the "." separators into one span per phrase; a detection's score is its
highest token probability over the phrase tokens (the original implementation's box score), and its
label is the phrase holding the most probability mass above the text threshold (the tokens the
original implementation decodes into the label). So a label is always one of the queried phrases,
even when the tokenizer splits words or a detection straddles two phrases.

>>> text_prompt(["red car", "boy in orange clothes"])
'red car. boy in orange clothes.'
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

import numpy as np
from PIL import Image
from pydantic import BaseModel, Field, model_validator

from data_contracts.boxes import BoxError, cxcywh_to_xyxy, pixels_to_grid

logger = logging.getLogger(__name__)

DEFAULT_MODEL = "IDEA-Research/grounding-dino-tiny"
"""The Swin-T checkpoint (the original repository's default `groundingdino_swint_ogc`)."""
DEFAULT_BOX_THRESHOLD = 0.3
DEFAULT_TEXT_THRESHOLD = 0.25
SEPARATOR = "."


class DetectorSettings(BaseModel):
    """Settings of the Grounding DINO backend (the ``pseudo_gt_boxes`` run config extends them).

    The fields are run configuration; ``image_backend`` is a ``ClassVar`` (the processor's image backend, picked
    automatically), not run configuration.

    >>> DetectorSettings(device="cpu").box_threshold
    0.3
    """

    model: str = Field(
        default=DEFAULT_MODEL, description="Grounding DINO checkpoint: local directory or model id."
    )
    box_threshold: float = Field(
        default=DEFAULT_BOX_THRESHOLD, description="Least detection score kept (paper: 0.3)."
    )
    text_threshold: float = Field(
        default=DEFAULT_TEXT_THRESHOLD,
        description="Least token probability that ties a detection to a phrase.",
    )
    batch_size: int = Field(default=8, description="Images per Grounding DINO forward pass.")
    device: str = Field(default="auto", description="'auto' (CUDA when present), 'cuda', 'cuda:N' or 'cpu'.")
    dtype: Literal["float32", "float16", "bfloat16"] = Field(
        default="float32", description="Model weights' dtype."
    )

    # Constant of the backend (not run configuration; a test may override it in a subclass).
    image_backend: ClassVar[str | None] = None
    """Image processor backend, 'pil' or 'torchvision' (default: torchvision when installed, else PIL)."""

    @model_validator(mode="after")
    def _check_values(self) -> Self:
        if not 0.0 <= self.box_threshold <= 1.0 or not 0.0 <= self.text_threshold <= 1.0:
            raise ValueError("box_threshold and text_threshold must lie in [0, 1]")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {self.batch_size}")
        return self


@dataclass
class Detection:
    """The pseudo-GT of one image: kept boxes, phrases without a box, detections seen."""

    pseudo_gt: list[dict] = field(default_factory=list)
    unmatched_phrases: list[str] = field(default_factory=list)
    num_candidates: int = 0


def sanitize_phrase(phrase: str) -> str:
    """A phrase without the prompt separator, in lower case (the model was trained on lower case).

    Example:
        >>> sanitize_phrase("Mr. Smith's  Car")
        "mr smith's car"
    """
    return " ".join(phrase.replace(SEPARATOR, " ").lower().split())


def text_prompt(phrases: Sequence[str]) -> str:
    """The detector's text prompt: phrases joined by ". ", ending with ".".

    Example:
        >>> text_prompt(["cup"])
        'cup.'
    """
    return ". ".join(sanitize_phrase(phrase) for phrase in phrases) + SEPARATOR


def phrase_token_spans(
    input_ids: Sequence[int], separator_ids: set[int], special_ids: set[int]
) -> list[tuple[int, int]]:
    """Token position ranges `[start, end)` of each phrase in a tokenised prompt.

    Args:
        input_ids (`Sequence[int]`): the prompt's token ids (without padding).
        separator_ids (`set[int]`): ids of the separator token(s) (".").
        special_ids (`set[int]`): ids of the tokens around the prompt ([CLS], [SEP], [PAD]); not [UNK],
            which stands for words of the phrases.

    Example:
        >>> phrase_token_spans([101, 7, 8, 5, 9, 5, 102], {5}, {101, 102})
        [(1, 3), (4, 5)]
    """
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for position, token in enumerate(input_ids):
        boundary = token in separator_ids or token in special_ids
        if boundary:
            if start is not None:
                spans.append((start, position))
                start = None
        elif start is None:
            start = position
    if start is not None:
        spans.append((start, len(input_ids)))
    return spans


def decode_detections(
    probabilities: np.ndarray,
    boxes_cxcywh: np.ndarray,
    spans: Sequence[tuple[int, int]],
    phrases: Sequence[str],
    width: int,
    height: int,
    box_threshold: float = DEFAULT_BOX_THRESHOLD,
    text_threshold: float = DEFAULT_TEXT_THRESHOLD,
) -> Detection:
    """Turn one image's raw detector output into pseudo-GT: one box per phrase, score as validity.

    Args:
        probabilities (`np.ndarray`): `(num_queries, num_tokens)` sigmoid of the logits.
        boxes_cxcywh (`np.ndarray`): `(num_queries, 4)` normalised centre boxes.
        spans (`Sequence[tuple[int, int]]`): token range of each phrase (see :func:`phrase_token_spans`);
            phrases past the last span (a truncated prompt) get no box.
        phrases (`Sequence[str]`): the phrases, in prompt order (the labels).
        width, height (`int`): the image size in pixels.
        box_threshold (`float`): least score kept.
        text_threshold (`float`): least token probability that counts towards a phrase.

    Returns:
        [`Detection`]: items `{bbox_2d, label, validity}` in phrase order.

    Example:
        >>> probabilities = np.array([[0.9, 0.8, 0.1], [0.2, 0.1, 0.6], [0.1, 0.1, 0.2]])
        >>> boxes = np.array([[0.25, 0.25, 0.5, 0.5], [0.75, 0.75, 0.5, 0.5], [0.5, 0.5, 1.0, 1.0]])
        >>> result = decode_detections(probabilities, boxes, [(0, 2), (2, 3)], ["red car", "dog"], 640, 480)
        >>> [(item["label"], item["bbox_2d"], round(item["validity"], 2)) for item in result.pseudo_gt]
        [('red car', [0, 0, 500, 500], 0.9), ('dog', [500, 500, 1000, 1000], 0.6)]
    """
    usable = min(len(spans), len(phrases))
    result = Detection()
    if usable == 0 or probabilities.size == 0:
        result.unmatched_phrases = [f"{phrase}: not in the text prompt" for phrase in phrases]
        return result
    masses = np.zeros((probabilities.shape[0], usable))
    peaks = np.zeros((probabilities.shape[0], usable))
    for index, (start, end) in enumerate(spans[:usable]):
        span = probabilities[:, start:end]
        peaks[:, index] = span.max(axis=1)
        masses[:, index] = np.where(span > text_threshold, span, 0.0).sum(axis=1)
    scores = peaks.max(axis=1)
    best: dict[int, tuple[float, int]] = {}
    for query in np.flatnonzero((scores >= box_threshold) & (masses.max(axis=1) > 0.0)):
        result.num_candidates += 1
        label = int(np.argmax(masses[query]))
        score = float(scores[query])
        if label not in best or score > best[label][0]:
            best[label] = (score, int(query))
    for index, phrase in enumerate(phrases):
        if index >= usable:
            result.unmatched_phrases.append(f"{phrase}: cut from the text prompt (too many tokens)")
            continue
        if index not in best:
            result.unmatched_phrases.append(f"{phrase}: no detection at or above {box_threshold:g}")
            continue
        score, best_query = best[index]
        x1, y1, x2, y2 = cxcywh_to_xyxy(boxes_cxcywh[best_query].tolist())
        try:
            box = pixels_to_grid([x1 * width, y1 * height, x2 * width, y2 * height], width, height)
        except BoxError as error:
            result.unmatched_phrases.append(f"{phrase}: detection has no area in the image ({error})")
            continue
        result.pseudo_gt.append({"bbox_2d": box, "label": phrase, "validity": min(max(score, 0.0), 1.0)})
    return result


def resolve_device(device: str) -> str:
    """`"auto"` becomes `"cuda"` when a GPU is visible, else `"cpu"`; other values pass through.

    Example:
        >>> resolve_device("cpu")
        'cpu'
    """
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def load_grounding_dino(
    model: str, device: str = "auto", dtype: str = "float32", image_backend: str | None = None
):
    """Load a Grounding DINO model and processor from a local directory or a model id.

    Returns:
        `tuple[GroundingDinoForObjectDetection, GroundingDinoProcessor, str]`: model (in eval mode, on the
        device), processor, and the device used.
    """
    import torch
    from transformers import (
        AutoImageProcessor,
        AutoTokenizer,
        GroundingDinoForObjectDetection,
        GroundingDinoProcessor,
    )

    resolved = resolve_device(device)
    torch_dtype = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
    backend_arguments = {"backend": image_backend} if image_backend else {}
    image_processor = AutoImageProcessor.from_pretrained(model, **backend_arguments)
    tokenizer = AutoTokenizer.from_pretrained(model)
    processor = GroundingDinoProcessor(image_processor=image_processor, tokenizer=tokenizer)
    network = GroundingDinoForObjectDetection.from_pretrained(model, dtype=torch_dtype)
    # transformers types the wrapped `to` as taking the model again; it takes a device (its documented use)
    network = network.to(resolved).eval()  # type: ignore[arg-type]
    logger.info("Grounding DINO %s on %s (%s)", model, resolved, dtype)
    return network, processor, resolved


class GroundingDinoDetector:
    """Batched Grounding DINO inference that returns pseudo-GT per image.

    Args:
        settings (`DetectorSettings`): model, thresholds, batch size, device.
        model, processor (*optional*): an already loaded model and processor (tests, benchmarks).

    Example:
        >>> detector = GroundingDinoDetector(DetectorSettings(model="path/to/grounding-dino"))  # doctest: +SKIP
        >>> detector.detect([image], [["red car", "dog"]])[0].pseudo_gt  # doctest: +SKIP
    """

    def __init__(self, settings: DetectorSettings, model: Any = None, processor: Any = None) -> None:
        self.settings = settings
        if model is None or processor is None:
            model, processor, device = load_grounding_dino(
                settings.model, settings.device, settings.dtype, settings.image_backend
            )
        else:
            device = resolve_device(settings.device)
            model = model.to(device).eval()
        self.model = model
        self.processor = processor
        self.device = device
        tokenizer = processor.tokenizer
        self._separator_ids = {tokenizer.convert_tokens_to_ids(SEPARATOR)}
        self._special_ids = {
            token
            for token in (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id)
            if token is not None
        }
        self._max_text_len = int(getattr(model.config, "max_text_len", 256))
        self.forward_passes = 0

    def detect(self, images: Sequence[Image.Image], phrase_lists: Sequence[Sequence[str]]) -> list[Detection]:
        """Detect the phrases of each image; images without phrases are not run.

        Args:
            images (`Sequence[PIL.Image.Image]`): the images.
            phrase_lists (`Sequence[Sequence[str]]`): each image's phrases (the labels).

        Returns:
            `list[Detection]`: one per image, in order.
        """
        if len(images) != len(phrase_lists):
            raise ValueError(f"{len(images)} images but {len(phrase_lists)} phrase lists")
        results: list[Detection] = [Detection() for _ in images]
        runnable = [index for index, phrases in enumerate(phrase_lists) if phrases]
        size = self.settings.batch_size
        for offset in range(0, len(runnable), size):
            chunk = runnable[offset : offset + size]
            for index, detection in zip(
                chunk,
                self._run_batch([images[i] for i in chunk], [phrase_lists[i] for i in chunk]),
                strict=True,
            ):
                results[index] = detection
        return results

    def _run_batch(self, images: list[Image.Image], phrase_lists: list[Sequence[str]]) -> list[Detection]:
        import torch

        try:
            return self._forward(images, phrase_lists)
        except torch.cuda.OutOfMemoryError:
            if len(images) == 1:
                raise
            torch.cuda.empty_cache()
            half = math.ceil(len(images) / 2)
            logger.warning("out of GPU memory with %d images per batch; splitting the batch", len(images))
            return self._run_batch(images[:half], phrase_lists[:half]) + self._run_batch(
                images[half:], phrase_lists[half:]
            )

    def _forward(self, images: list[Image.Image], phrase_lists: list[Sequence[str]]) -> list[Detection]:
        import torch

        rgb = [image.convert("RGB") for image in images]
        prompts = [text_prompt(phrases) for phrases in phrase_lists]
        inputs = self.processor(
            images=rgb,
            text=prompts,
            return_tensors="pt",
            padding="longest",
            truncation=True,
            max_length=self._max_text_len,
        )
        dtype = next(self.model.parameters()).dtype
        inputs = {
            name: value.to(self.device, dtype=dtype if value.is_floating_point() else None)
            for name, value in inputs.items()
        }
        with torch.inference_mode():
            outputs = self.model(**inputs)
        self.forward_passes += 1
        probabilities = outputs.logits.float().sigmoid().cpu().numpy()
        boxes = outputs.pred_boxes.float().cpu().numpy()
        input_ids = inputs["input_ids"].cpu().numpy()
        attention = inputs["attention_mask"].cpu().numpy()
        detections = []
        for index, image in enumerate(rgb):
            length = int(attention[index].sum())
            ids = input_ids[index, :length].tolist()
            spans = phrase_token_spans(ids, self._separator_ids, self._special_ids)
            token_count = min(length, probabilities.shape[2])
            detections.append(
                decode_detections(
                    probabilities[index, :, :token_count],
                    boxes[index],
                    spans,
                    list(phrase_lists[index]),
                    image.width,
                    image.height,
                    self.settings.box_threshold,
                    self.settings.text_threshold,
                )
            )
        return detections


# --------------------------------------------------------------------------------------------------
# A tiny model with random weights, built locally (tests and CPU benchmarks)
# --------------------------------------------------------------------------------------------------
_TINY_WORDS = (
    "[PAD] [UNK] [CLS] [SEP] [MASK] . , a an the of in with on red green blue yellow orange purple "
    "pink brown black white gray teal box chair table sofa lamp shelf cabinet ball bottle mug plant "
    "trash can monitor book vase car boy girl man woman person dog cat cup bus vehicle clothes hat"
)
TINY_VOCABULARY = tuple(_TINY_WORDS.split())
"""Words of the tiny tokenizer, in id order (specials first); other words become [UNK]."""


def tiny_grounding_dino_config(vocab_size: int, full_size: bool = False):
    """A Grounding DINO config: tiny for tests (a few hundred thousand weights), or the Swin-T size.

    Args:
        vocab_size (`int`): the tokenizer's vocabulary size.
        full_size (`bool`, *optional*, defaults to `False`): the architecture of
            `IDEA-Research/grounding-dino-tiny` (Swin-T backbone, BERT-base text encoder, 900 queries).
    """
    from transformers import BertConfig, GroundingDinoConfig, SwinConfig

    if full_size:
        return GroundingDinoConfig(
            # transformers types the backbone settings as `_out_features`/`_out_indices`; the documented keywords
            # (accepted at run time) are these
            backbone_config=SwinConfig(  # type: ignore[call-arg]
                embed_dim=96,
                depths=[2, 2, 6, 2],
                num_heads=[3, 6, 12, 24],
                window_size=7,
                out_features=["stage2", "stage3", "stage4"],
                out_indices=[2, 3, 4],
            ),
            text_config=BertConfig(vocab_size=vocab_size),
            disable_custom_kernels=True,
        )
    return GroundingDinoConfig(
        backbone_config=SwinConfig(  # type: ignore[call-arg]  # out_features/out_indices, as above
            embed_dim=8,
            depths=[1, 1, 1, 1],
            num_heads=[1, 1, 1, 1],
            window_size=2,
            image_size=64,
            out_features=["stage2", "stage3", "stage4"],
            out_indices=[2, 3, 4],
        ),
        text_config=BertConfig(
            vocab_size=vocab_size,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=64,
        ),
        d_model=32,
        encoder_layers=1,
        decoder_layers=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        num_queries=20,
        max_text_len=32,
        encoder_n_points=2,
        decoder_n_points=2,
        disable_custom_kernels=True,
    )


def build_tiny_grounding_dino(
    directory: str | Path,
    *,
    seed: int = 0,
    vocabulary: Sequence[str] = TINY_VOCABULARY,
    image_size: tuple[int, int] = (64, 96),
    full_size: bool = False,
    score_scale: float = 0.1,
) -> Path:
    """Save a Grounding DINO with random weights, its tokenizer and its image processor to ``directory``.

    Nothing is downloaded: the tokenizer is a `BertTokenizer` (the fast one) over ``vocabulary`` (words outside it
    become [UNK]), the image processor the PIL one resizing to ``image_size`` (shortest, longest edge).
    The directory then loads like a released checkpoint (:func:`load_grounding_dino`).

    Args:
        directory (`str` or `Path`): where to write.
        seed (`int`, *optional*, defaults to `0`): seed of the random weights.
        vocabulary (`Sequence[str]`): tokenizer words; must hold [PAD], [UNK], [CLS], [SEP], [MASK] and ".".
        image_size (`tuple[int, int]`, *optional*, defaults to `(64, 96)`): resize target.
        full_size (`bool`, *optional*, defaults to `False`): the real Swin-T architecture (for GPU
            throughput figures) instead of the tiny one.
        score_scale (`float`, *optional*, defaults to `0.1`): factor on the decoder's output norm. Random
            weights otherwise give logits so large that every score is 1.0; scaled, the scores spread
            over (0, 1) and thresholds have something to cut.

    Returns:
        `Path`: the directory.
    """
    import torch
    from transformers import BertTokenizer, GroundingDinoForObjectDetection, GroundingDinoProcessor
    from transformers.models.grounding_dino.image_processing_pil_grounding_dino import (
        GroundingDinoImageProcessorPil,
    )

    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    tokenizer = BertTokenizer(vocab={word: index for index, word in enumerate(vocabulary)})
    image_processor = GroundingDinoImageProcessorPil(
        size={"shortest_edge": image_size[0], "longest_edge": image_size[1]}
    )
    torch.manual_seed(seed)
    model = GroundingDinoForObjectDetection(
        tiny_grounding_dino_config(len(vocabulary), full_size=full_size)
    ).eval()
    with torch.no_grad():
        model.model.decoder.layer_norm.weight.mul_(score_scale)
        model.model.decoder.layer_norm.bias.mul_(score_scale)
    model.save_pretrained(target)
    GroundingDinoProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(target)
    return target
