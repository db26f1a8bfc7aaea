"""Cost before spending: the tokens and dollars of requests, estimated without calling a model.

A paid stage estimates its uncached requests before it sends any (:meth:`model_clients.client.LLMClient.run_batch`
does it for every batch, :meth:`~model_clients.client.LLMClient.estimate` for a whole stage). The estimate counts:

- **prompt tokens the way each provider counts them**:
  - text: a count of the pieces a byte-pair tokenizer of these models makes of English, code and JSON
    (letters in words of up to :data:`WORD_PIECE_LETTERS` letters, digits in groups of three, runs of
    punctuation, line breaks); no tokenizer file is needed (none can be downloaded on these machines), and
    on the prompts of this project it stays within a few per cent of a byte-pair count;
  - the chat format: :data:`OPENAI_TOKENS_PER_MESSAGE` per message plus :data:`OPENAI_REPLY_PRIMING_TOKENS`
    (OpenAI), the forced tool's system prompt (:data:`ANTHROPIC_TOOL_CHOICE_TOKENS`) and the tool
    definition (Anthropic), the JSON schema of structured output;
  - images from their pixel size, read from the PNG, JPEG, GIF or WebP header: OpenAI's tiles
    (fit in 2048 x 2048, shortest side down to 768, 512-pixel tiles; ``low`` detail is the base cost only;
    85 + 170 per tile, and gpt-4o-mini's 2,833 + 5,667 per tile, which bill at the price of gpt-4o), and
    Anthropic's width x height / 750 after its resize (long edge 1,568 pixels, about 1.15 megapixels);
- **completion tokens** from the stage's observed mean (the answers of the same prompt template and model in
  the response cache, once there are :data:`MIN_OBSERVED_ANSWERS`), else the request's budget (its
  ``max_tokens``, an upper bound);
- **dollars** at the standard or the batch price (:mod:`model_clients.pricing`).

>>> estimator = TokenEstimator("openai", "gpt-4o-mini")
>>> estimator.text_tokens("Is the red mug left of the laptop?")
9
>>> openai_image_tokens(1024, 1024, "high", "gpt-4o")
765
>>> anthropic_image_tokens(1000, 1000)
1334
"""

from __future__ import annotations

import math
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from model_clients.providers import json_instruction
from model_clients.records import LLMRequest

__all__ = [
    "ANTHROPIC_TOOL_CHOICE_TOKENS",
    "MIN_OBSERVED_ANSWERS",
    "CostEstimate",
    "TokenEstimator",
    "anthropic_image_tokens",
    "image_size",
    "openai_image_tokens",
]

MIN_OBSERVED_ANSWERS = 5
"""Answers of a prompt template in the cache before their mean completion length replaces the budget."""
WORD_PIECE_LETTERS = 7
"""A word of up to this many letters is one token; longer ones take one more token per this many letters."""
OPENAI_TOKENS_PER_MESSAGE = 3
OPENAI_REPLY_PRIMING_TOKENS = 3
ANTHROPIC_TOKENS_PER_MESSAGE = 4
ANTHROPIC_TOOL_CHOICE_TOKENS = 313
"""The system prompt Anthropic adds for a forced tool (``tool_choice`` ``tool``), Claude 4 models."""
OPENAI_IMAGE_TOKENS: Mapping[str, tuple[int, int]] = {"gpt-4o-mini": (2833, 5667), "": (85, 170)}
"""(base, per 512-pixel tile) image tokens by model-name prefix."""
UNKNOWN_IMAGE_SIZE = (1024, 1024)
"""Assumed pixel size of an image whose header cannot be read."""
ANTHROPIC_MAX_EDGE = 1568
ANTHROPIC_MAX_PIXELS = 1_150_000

_PIECES = re.compile(r"[^\W\d_]+|\d+|\n+|[^\w\s]+|_+")


def image_size(image: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG, JPEG, GIF or WebP header, or None when it cannot be read.

    Example:
        >>> import struct, zlib
        >>> header = b"\\x89PNG\\r\\n\\x1a\\n" + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", 640, 480)
        >>> image_size(header + b"\\x08\\x02\\x00\\x00\\x00")
        (640, 480)
    """
    data = bytes(image[:64]) if len(image) >= 64 else bytes(image)
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24 and data[12:16] == b"IHDR":
        return struct.unpack(">II", data[16:24])
    if data.startswith((b"GIF87a", b"GIF89a")) and len(data) >= 10:
        return struct.unpack("<HH", data[6:10])
    if data.startswith(b"RIFF") and data[8:12] == b"WEBP" and len(data) >= 30:
        return _webp_size(data)
    if data.startswith(b"\xff\xd8"):
        return _jpeg_size(bytes(image))
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X":
        width = 1 + int.from_bytes(data[24:27], "little")
        height = 1 + int.from_bytes(data[27:30], "little")
        return width, height
    if chunk == b"VP8L":
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8 ":
        width, height = struct.unpack("<HH", data[26:30])
        return width & 0x3FFF, height & 0x3FFF
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    position = 2
    while position + 9 < len(data):
        if data[position] != 0xFF:
            position += 1
            continue
        marker = data[position + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
            position += 1 if marker == 0xFF else 2
            continue
        length = int.from_bytes(data[position + 2 : position + 4], "big")
        if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
            height, width = struct.unpack(">HH", data[position + 5 : position + 9])
            return width, height
        position += 2 + length
    return None


def openai_image_tokens(width: int, height: int, detail: str, model: str) -> int:
    """Prompt tokens of one image for an OpenAI vision model at `detail` (``low``, ``high`` or ``auto``).

    ``auto`` is counted as ``high`` (an upper bound: the API picks one of the two).

    Example:
        >>> openai_image_tokens(4096, 8192, "low", "gpt-4o"), openai_image_tokens(2048, 4096, "high", "gpt-4o")
        (85, 1105)
        >>> openai_image_tokens(512, 512, "high", "gpt-4o-mini")
        8500
    """
    prefix = max((name for name in OPENAI_IMAGE_TOKENS if model.startswith(name)), key=len)
    base, per_tile = OPENAI_IMAGE_TOKENS[prefix]
    if detail == "low":
        return base
    scale = min(1.0, 2048 / max(width, height, 1))
    fitted_width, fitted_height = width * scale, height * scale
    scale = min(1.0, 768 / max(min(fitted_width, fitted_height), 1))
    fitted_width, fitted_height = fitted_width * scale, fitted_height * scale
    tiles = math.ceil(fitted_width / 512) * math.ceil(fitted_height / 512)
    return base + per_tile * tiles


def anthropic_image_tokens(width: int, height: int) -> int:
    """Prompt tokens of one image for a Claude model: width x height / 750 after Anthropic's resize.

    Example:
        >>> anthropic_image_tokens(200, 200), anthropic_image_tokens(4000, 3000)
        (54, 1532)
    """
    scale = min(
        1.0,
        ANTHROPIC_MAX_EDGE / max(width, height, 1),
        math.sqrt(ANTHROPIC_MAX_PIXELS / max(width * height, 1)),
    )
    return max(1, math.ceil(int(width * scale) * int(height * scale) / 750))


@lru_cache(maxsize=4096)
def _cached_text_tokens(text: str) -> int:
    return _count_text_tokens(text)


def _count_text_tokens(text: str) -> int:
    tokens = 0
    for piece in _PIECES.findall(text):
        first = piece[0]
        if first.isdigit():
            tokens += -(-len(piece) // 3)
        elif first == "\n":
            tokens += 1
        elif first.isalpha():
            tokens += 1 + (len(piece) - 1) // WORD_PIECE_LETTERS
        else:
            tokens += -(-len(piece) // 2)
    return tokens


@dataclass
class CostEstimate:
    """Estimated tokens and dollars of requests that are not in the response cache.

    Attributes:
        requests (`int`): uncached requests estimated (each asked once).
        cached (`int`): requests answered from the cache (no cost).
        prompt_tokens, completion_tokens (`int`): estimated tokens of the uncached requests.
        cost_usd (`float`): their estimated price, each asked once.
        batch (`bool`): priced at the batch price.
        completion_basis (`str`): where the completion tokens come from (observed mean or budget).
        later_requests (`int`): uncached requests of the stage's later rounds, at most (pass@2's second round
            for every question, the re-ask of every generation answer).
        later_cost_usd (`float`): their estimated price.
        upper_bound_usd (`float`): what the stage can spend at most: every round, and every answer asked again
            as often as the client re-asks an answer it cannot use (``invalid_json_retries``); this is what
            ``max_cost_usd`` is checked against before the first request.
        priced (`bool`): the model has a price (an unpriced model is estimated at $0).
    """

    requests: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    batch: bool = False
    completion_basis: str = ""
    bases: dict[str, str] = field(default_factory=dict, repr=False)
    later_requests: int = 0
    later_cost_usd: float = 0.0
    upper_bound_usd: float = 0.0
    priced: bool = True

    def add(self, other: CostEstimate) -> None:
        """Add another estimate's counts to this one."""
        self.requests += other.requests
        self.cached += other.cached
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_usd += other.cost_usd
        self.later_requests += other.later_requests
        self.later_cost_usd += other.later_cost_usd
        self.upper_bound_usd += other.upper_bound_usd
        self.batch = self.batch or other.batch
        self.priced = self.priced and other.priced
        self.bases.update(other.bases)
        self.completion_basis = "; ".join(f"{name}: {basis}" for name, basis in sorted(self.bases.items()))

    def describe(self) -> str:
        """One line for the log.

        >>> CostEstimate(10, 2, 12_000, 500, 0.0021, True, "budget", upper_bound_usd=0.0042).describe()
        '10 uncached requests (2 cached): about 12,000 prompt + 500 completion tokens, $0.0021 at the batch price (completion tokens: budget); at most $0.0042 with every round and re-ask'
        """
        price = "the batch price" if self.batch else "the standard price"
        later = (
            f", {self.later_requests:,} more in later rounds at most (${self.later_cost_usd:.4f})"
            if self.later_requests
            else ""
        )
        unpriced = "; the model has no price" if not self.priced else ""
        return (
            f"{self.requests:,} uncached requests ({self.cached:,} cached): about {self.prompt_tokens:,} prompt + "
            f"{self.completion_tokens:,} completion tokens, ${self.cost_usd:.4f} at {price} (completion tokens: "
            f"{self.completion_basis or 'none'}){later}; at most ${self.upper_bound_usd:.4f} with every round "
            f"and re-ask{unpriced}"
        )


class TokenEstimator:
    """Counts the prompt tokens of an :class:`LLMRequest` the way `provider` bills them.

    Args:
        provider (`str`): ``openai`` or ``anthropic``.
        model (`str`): the model (OpenAI image tokens depend on it).
        json_mode (`str`, *optional*, defaults to ``native``): where the schema goes (see :mod:`model_clients.providers`).

    Example:
        >>> request = LLMRequest("t", "v1", "Is the red mug left of the laptop?", system="Answer briefly.")
        >>> TokenEstimator("openai", "gpt-4o").prompt_tokens(request, {})
        21
    """

    def __init__(self, provider: str, model: str, json_mode: str = "native") -> None:
        self.provider = provider
        self.model = model
        self.json_mode = json_mode

    @staticmethod
    def text_tokens(text: str | None) -> int:
        """Tokens of a text (short repeated texts such as system prompts are counted once)."""
        if not text:
            return 0
        return _cached_text_tokens(text) if len(text) <= 8192 else _count_text_tokens(text)

    def image_tokens(self, image: bytes, detail: str) -> int:
        """Tokens of one image at `detail` (OpenAI) for this provider and model."""
        width, height = image_size(image) or UNKNOWN_IMAGE_SIZE
        if self.provider == "anthropic":
            return anthropic_image_tokens(width, height)
        return openai_image_tokens(width, height, detail, self.model)

    def _schema_tokens(self, request: LLMRequest) -> int:
        if request.schema is None:
            return 0
        if self.json_mode != "native":
            return self.text_tokens(json_instruction(request.schema))
        tokens = self.text_tokens(request.schema_json) + self.text_tokens(request.schema_name)
        uses_tool = self.provider == "anthropic" and request.schema.get("type", "object") == "object"
        if uses_tool:
            tokens += ANTHROPIC_TOOL_CHOICE_TOKENS + self.text_tokens(
                "Record the answer in the required structure."
            )
        elif self.provider == "anthropic":
            tokens = self.text_tokens(json_instruction(request.schema))
        return tokens

    def prompt_tokens(self, request: LLMRequest, parameters: Mapping[str, Any]) -> int:
        """Estimated prompt tokens of `request` sent with the effective `parameters`."""
        detail = str(parameters.get("image_detail", "auto"))
        tokens = (
            self.text_tokens(request.system) + self.text_tokens(request.prompt) + self._schema_tokens(request)
        )
        tokens += sum(self.image_tokens(image, detail) for image in request.images)
        if self.provider == "anthropic":
            return tokens + ANTHROPIC_TOKENS_PER_MESSAGE * (2 if request.system else 1)
        messages = 2 if request.system or (request.schema is not None and self.json_mode != "native") else 1
        return tokens + OPENAI_TOKENS_PER_MESSAGE * messages + OPENAI_REPLY_PRIMING_TOKENS
