"""Full-vocabulary entropy of the coordinate-digit tokens of a completion, without an extra logits pass.

SpatialCORE weights each predicted box by the policy's uncertainty over the digit tokens of its
coordinates (paper Eq. 5). The entropy of a token is the Shannon entropy, in nats, of the
untempered next-token distribution of the current policy over the whole vocabulary. Three sources
deliver it, cheapest first; none ever materialises logits for every position of the batch:

* **Generation** (`GenerationEntropyRecorder`): while transformers generates, a forward hook on
  the output head computes each step's entropy from the raw logits of the last position (the
  hook, unlike a logits processor, runs before temperature and top-k/top-p warping). One
  `(batch,)` vector per step is kept; no extra pass.
* **The trainer's own log-prob pass**: when TRL already runs a no-grad pass over the completions
  before the rewards (vLLM importance-sampling correction, several iterations per batch), its fused
  output head returns the per-token entropy alongside the log-probs at no extra cost (used when the
  sampling temperature is 1, so that entropy is the untempered one).
* **Selective pass** (`selective_entropy_pass`): otherwise, one no-grad pass of the backbone, with
  the output head applied only at the coordinate-digit positions.

Confidence is a property of the policy, not of one dropout mask: TRL generates and computes log-probs
with the model in train mode, where LoRA dropout (`lora_dropout: 0.05` in the recipes) perturbs the
logits. Every source therefore runs under `dropout_disabled`, which switches the dropout modules
(LoRA's included) to eval for that pass only and restores them afterwards.

Tokens are decoded one by one (`CompletionTokenDecoder`) so that their concatenation is exactly the
completion text the rewards parse; the digit tokens of the coordinates of the valid reasoning-segment
boxes are found with the reward library's own parser (`coordinate_token_indices`), so entropies and
boxes can never drift apart.

>>> import torch
>>> round(float(token_entropy(torch.zeros(10))), 4)  # uniform over 10 tokens: ln 10
2.3026
"""

from __future__ import annotations

import bisect
import codecs
import contextlib
import logging
import math
from collections.abc import Iterator, Sequence
from itertools import accumulate
from typing import Protocol, cast

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from training.rewards.parsing import parse_spatialcore

logger = logging.getLogger(__name__)

NAN = float("nan")


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Shannon entropy (nats) of the softmax over the last dimension, computed in float32.

    Args:
        logits (`torch.Tensor`): `(..., vocab)` logits.

    Returns:
        `torch.Tensor`: `(...)` entropies.

    >>> abs(round(float(token_entropy(torch.tensor([0.0, -1e9]))), 4))
    0.0
    """
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    return -(log_probs.exp() * log_probs).sum(dim=-1)


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map used by byte-level BPE vocabularies."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    characters = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            characters.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(code) for code in characters), strict=True))


_UNICODE_TO_BYTE = {character: byte for byte, character in _bytes_to_unicode().items()}


class CompletionTokenDecoder:
    """Decode completion token ids into per-token strings whose concatenation is the decoded text.

    Byte-level BPE tokens can end in the middle of a UTF-8 character; each character is given to the
    token that completes it. Special tokens decode to `""` (as with `skip_special_tokens=True`),
    other added tokens (e.g. `</think>`) to their content. If the result does not reproduce the
    expected text (another tokenizer type), the decoder falls back to prefix decoding; callers check
    the concatenation against the text before trusting the alignment.

    Args:
        tokenizer: a `transformers` tokenizer (or a processor holding one as `.tokenizer`).

    >>> from training.testing import build_tiny_tokenizer
    >>> tokenizer = build_tiny_tokenizer()
    >>> ids = tokenizer("[12, 34]</think>B")["input_ids"]
    >>> CompletionTokenDecoder(tokenizer).decode(ids)
    ['[', '1', '2', ',', ' ', '3', '4', ']', '</think>', 'B']
    """

    def __init__(self, tokenizer):
        self.tokenizer = getattr(tokenizer, "tokenizer", tokenizer)
        self._added = dict(self.tokenizer.added_tokens_decoder.items())
        decoder = getattr(getattr(self.tokenizer, "backend_tokenizer", None), "decoder", None)
        self._byte_level = decoder is not None and type(decoder).__name__ == "ByteLevel"
        self._bytes_cache: dict[int, bytes | None] = {}

    def _reference_text(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(
            list(token_ids), skip_special_tokens=True, clean_up_tokenization_spaces=False
        )

    def _token_bytes(self, token_id: int) -> bytes | None:
        """The UTF-8 bytes a token contributes (b"" for skipped ones); `None` if not byte-level. Cached."""
        if token_id in self._bytes_cache:
            return self._bytes_cache[token_id]
        added = self._added.get(token_id)
        if added is not None and added.special:
            data = b""  # skipped entirely: the bytes on either side join, as in the byte-level decoder
        else:
            text = added.content if added is not None else self.tokenizer.convert_ids_to_tokens(token_id)
            if text is None:
                data = b""  # an id beyond the vocabulary (padded embedding rows) decodes to nothing
            elif all(character in _UNICODE_TO_BYTE for character in text):
                data = bytes(_UNICODE_TO_BYTE[character] for character in text)
            elif added is not None:
                data = text.encode("utf-8")
            else:
                data = None
        self._bytes_cache[token_id] = data
        return data

    def _decode_byte_level(self, token_ids: Sequence[int]) -> list[str] | None:
        utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        tokens: list[str] = []
        for token_id in token_ids:
            data = self._token_bytes(token_id)
            if data is None:
                return None
            tokens.append(utf8.decode(data) if data else "")
        tail = utf8.decode(b"", final=True)
        if tail and tokens:
            tokens[-1] += tail
        return tokens

    def _decode_by_prefix(self, token_ids: Sequence[int]) -> list[str]:
        tokens, previous = [], ""
        for end in range(1, len(token_ids) + 1):
            text = self._reference_text(token_ids[:end])
            if text.startswith(previous):
                tokens.append(text[len(previous) :])
                previous = text
            else:
                tokens.append("")
        return tokens

    def decode(self, token_ids: Sequence[int], expected_text: str | None = None) -> list[str]:
        """Per-token strings of `token_ids`; their concatenation equals `expected_text` when given.

        Args:
            token_ids (`Sequence[int]`): the completion's token ids.
            expected_text (`str`, *optional*): the completion text the rewards see; defaults to the
                tokenizer's decoding with special tokens skipped.

        Returns:
            `list[str]`: one string per id.
        """
        token_ids = [int(token_id) for token_id in token_ids]
        expected = self._reference_text(token_ids) if expected_text is None else expected_text
        if self._byte_level:
            tokens = self._decode_byte_level(token_ids)
            if tokens is not None and "".join(tokens) == expected:
                return tokens
        return self._decode_by_prefix(token_ids)


def coordinate_token_indices(tokens: Sequence[str]) -> list[int]:
    """Indices of the tokens that hold digits of a coordinate of a valid reasoning-segment box.

    The boxes are the ones the SpatialCORE reward scores (`parse_spatialcore(...).grounding_boxes`)
    found on the concatenated tokens; a token counts when it overlaps a coordinate's digit span.

    >>> coordinate_token_indices(['{"bbox_2d": [', '1', '0', ', ', '2', ', ', '3', '0', ', ', '4', '0',
    ...                           '], "label": "cup"}', '</think>', 'A'])
    [1, 2, 4, 6, 7, 9, 10]
    """
    texts = [token if isinstance(token, str) else "" for token in tokens]
    boxes = parse_spatialcore("".join(texts)).grounding_boxes
    if not boxes:
        return []
    ends = list(accumulate(len(text) for text in texts))
    indices: set[int] = set()
    for box in boxes:
        for start, end in box.coord_spans:
            index = bisect.bisect_right(ends, start)
            while index < len(ends) and ends[index] - len(texts[index]) < end:
                if texts[index]:
                    indices.add(index)
                index += 1
    return sorted(indices)


def scatter_entropies(length: int, positions: Sequence[int], values: Sequence[float]) -> list[float]:
    """A list of `length` NaNs with `values` written at `positions`.

    >>> scatter_entropies(4, [1, 3], [0.5, 0.25])
    [nan, 0.5, nan, 0.25]
    """
    result = [NAN] * length
    for position, value in zip(positions, values, strict=True):
        result[position] = float(value)
    return result


class _WithOutputHead(Protocol):
    """A transformers model (or a wrapper that forwards to one): it names its output head."""

    def get_output_embeddings(self) -> nn.Module | None: ...


def _output_head(model: nn.Module) -> nn.Module | None:
    """`model.get_output_embeddings()`, which transformers' models define and torch's `Module` does not declare."""
    return cast(_WithOutputHead, model).get_output_embeddings()


class GenerationEntropyRecorder:
    """Record each generation step's entropy of the untempered next-token distribution.

    A forward hook on the output head (the module returned by `get_output_embeddings()`) computes
    the entropy of the last position's logits for every row of the batch: one `(batch,)` vector per
    decoding step, the logits themselves are never kept. Use it as a context manager around
    `generate`; `entropies()` stacks the steps into `(batch, steps)`.

    Args:
        model (`nn.Module`): the model that generates (PEFT / DeepSpeed wrappers are fine as long as
            `get_output_embeddings()` reaches the head).
    """

    def __init__(self, model: nn.Module):
        head = _output_head(model)
        if head is None:
            raise ValueError("the model has no output head to record entropies from")
        self._head = head
        self._steps: list[torch.Tensor] = []
        self._handle: RemovableHandle | None = None

    def _hook(self, module: nn.Module, inputs, output) -> None:
        logits = output[0] if isinstance(output, tuple) else output
        if logits.dim() == 3:
            logits = logits[:, -1, :]
        with torch.no_grad():
            self._steps.append(token_entropy(logits.detach()))

    def __enter__(self) -> GenerationEntropyRecorder:
        self._steps = []
        self._handle = self._head.register_forward_hook(self._hook)
        return self

    def __exit__(self, *exc_info) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def entropies(self) -> torch.Tensor:
        """`(batch, steps)` float32 entropies on the CPU (`(0, 0)` when nothing was generated)."""
        if not self._steps:
            return torch.zeros(0, 0)
        return torch.stack(self._steps, dim=1).float().cpu()


DROPOUT_MODULES = (
    nn.Dropout,
    nn.Dropout1d,
    nn.Dropout2d,
    nn.Dropout3d,
    nn.AlphaDropout,
    nn.FeatureAlphaDropout,
)


@contextlib.contextmanager
def dropout_disabled(model: nn.Module) -> Iterator[int]:
    """Put every dropout module of `model` (PEFT's `lora_dropout` included) in eval mode for the block.

    Only dropout modules change: the model's own `training` flag, gradient checkpointing and the
    trainer's train/eval bookkeeping stay as they are. The modules that were training are switched
    back on exit, also when the block raises. Yields how many modules were switched.

    >>> layer = nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.5))
    >>> with dropout_disabled(layer) as switched:
    ...     switched, layer[1].training, layer.training
    (1, False, True)
    >>> layer[1].training
    True
    """
    switched = [
        module for module in model.modules() if isinstance(module, DROPOUT_MODULES) and module.training
    ]
    for module in switched:
        module.train(False)
    try:
        yield len(switched)
    finally:
        for module in switched:
            module.train(True)


def _backbone_and_head(model: nn.Module) -> tuple[nn.Module, nn.Module]:
    """The decoder backbone (hidden states, no logits) and the output head of a possibly PEFT-wrapped model."""
    get_base_model = getattr(model, "get_base_model", None)  # a PEFT model's
    base: nn.Module = get_base_model() if get_base_model is not None else model
    backbone = getattr(base, "base_model", None)
    if backbone is None or backbone is base:
        backbone = cast(nn.Module, base.model)  # transformers' models keep their decoder as `model`
    head = _output_head(base)
    if head is None:
        raise ValueError("the model has no output head to compute entropies with")
    return backbone, head


@torch.no_grad()
def selective_entropy_pass(
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    target_positions: Sequence[Sequence[int]],
    forward_kwargs: dict | None = None,
) -> list[torch.Tensor]:
    """Entropy of the tokens at `target_positions`, from one backbone pass and a selective head.

    The backbone runs once over the batch (no logits); the output head is applied only to the hidden
    states that predict the target tokens (position `t - 1` predicts token `t`).

    Args:
        model (`nn.Module`): causal (vision-)language model, possibly PEFT-wrapped.
        input_ids (`torch.Tensor`): `(batch, length)` ids (prompt and completion).
        attention_mask (`torch.Tensor`): `(batch, length)` mask.
        target_positions (`Sequence[Sequence[int]]`): per row, sequence positions (>= 1) of the
            tokens whose entropy is wanted.
        forward_kwargs (`dict`, *optional*): extra backbone inputs (`pixel_values`, `image_grid_thw`,
            `mm_token_type_ids`, ...).

    Returns:
        `list[torch.Tensor]`: per row, the float32 entropies in the order of `target_positions`.
    """
    rows = [row for row, positions in enumerate(target_positions) for _ in positions]
    positions = [position - 1 for row_positions in target_positions for position in row_positions]
    if not positions:
        return [torch.zeros(0) for _ in target_positions]
    backbone, head = _backbone_and_head(model)
    outputs = backbone(
        input_ids=input_ids, attention_mask=attention_mask, use_cache=False, **(forward_kwargs or {})
    )
    hidden = outputs.last_hidden_state
    index_rows = torch.tensor(rows, device=hidden.device)
    index_positions = torch.tensor(positions, device=hidden.device)
    selected = hidden[index_rows, index_positions].to(head.weight.device)
    entropies = token_entropy(head(selected)).cpu()
    result, offset = [], 0
    for row_positions in target_positions:
        result.append(entropies[offset : offset + len(row_positions)])
        offset += len(row_positions)
    return result


def mean_or_nan(values: Sequence[float]) -> float:
    """Mean of the finite values, NaN when there are none.

    >>> mean_or_nan([1.0, float("nan"), 3.0]), math.isnan(mean_or_nan([]))
    (2.0, True)
    """
    finite = [value for value in values if math.isfinite(value)]
    return sum(finite) / len(finite) if finite else NAN
