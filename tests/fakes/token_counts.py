"""Prompt tokens as the loopback servers report them: a model of how OpenAI and Anthropic bill a request.

The servers must report usage the way the providers do, so that the client's cost estimate
(:mod:`model_clients.estimate`) can be checked against "the server's reported usage". This module
counts independently of the client, from the request body as it arrives over HTTP:

- text: a pre-tokenizer in the style of GPT-4o's (an optional leading space or punctuation mark joined to
  a word, numbers in groups of one to three digits, punctuation runs, line breaks), then byte-pair-like
  pieces: a word of up to six letters is one token, a longer word one more per four further letters, a
  punctuation run one token per two characters;
- the chat format (3 tokens per message and 3 to prime the reply on OpenAI; 4 per message on Anthropic),
  the structured-output schema (OpenAI) or the tool definitions plus the 313-token system prompt of a
  forced tool (Anthropic);
- images from their decoded pixel size (Pillow): OpenAI's 512-pixel tiles after the 2048 / 768 resize
  (85 + 170 per tile, gpt-4o-mini 2,833 + 5,667; ``low`` detail the base only), Anthropic's
  width x height / 750 after its resize to 1,568 pixels and about 1.15 megapixels.

The text count is not a real tokenizer (no tokenizer file can be downloaded here); it is what these
servers bill, written apart from the client's estimator.
"""

from __future__ import annotations

import base64
import io
import json
import math
import re
from typing import Any

_PRETOKEN = re.compile(r"[^\r\n\w]?[^\W\d_]+|\d{1,3}| ?[^\s\w]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+|_+")


def text_tokens(text: str) -> int:
    """Tokens of a text.

    >>> text_tokens("Is the red mug left of the laptop?")
    9
    """
    tokens = 0
    for piece in _PRETOKEN.findall(text):
        core = piece.strip()
        if not core:
            tokens += 1 if "\n" in piece else 0
        elif core[0].isdigit():
            tokens += 1
        elif any(character.isalpha() for character in core):
            letters = sum(character.isalpha() for character in core)
            tokens += 1 + max(0, math.ceil((letters - 6) / 4)) + (1 if not core[0].isalpha() else 0)
        else:
            tokens += math.ceil(len(core) / 2)
    return tokens


def _image_size(data: bytes) -> tuple[int, int]:
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            return image.size
    except (OSError, ValueError, SyntaxError):  # not an image Pillow reads (test bytes)
        return 1024, 1024


def openai_image_tokens(data: bytes, detail: str, model: str) -> int:
    base, per_tile = (2833, 5667) if model.startswith("gpt-4o-mini") else (85, 170)
    if detail == "low":
        return base
    width, height = _image_size(data)
    scale = min(1.0, 2048 / max(width, height))
    width, height = width * scale, height * scale
    scale = min(1.0, 768 / min(width, height))
    return base + per_tile * math.ceil(width * scale / 512) * math.ceil(height * scale / 512)


def anthropic_image_tokens(data: bytes) -> int:
    width, height = _image_size(data)
    scale = min(1.0, 1568 / max(width, height), math.sqrt(1_150_000 / (width * height)))
    return max(1, math.ceil(int(width * scale) * int(height * scale) / 750))


def _decode_data_url(url: str) -> bytes:
    return base64.b64decode(url.split(",", 1)[1])


def openai_prompt_tokens(body: dict[str, Any]) -> int:
    """Prompt tokens of a Chat Completions body."""
    model = str(body.get("model", ""))
    messages = body.get("messages") or []
    tokens = 3 + 3 * len(messages)
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            tokens += text_tokens(content)
            continue
        for part in content or []:
            if part.get("type") == "text":
                tokens += text_tokens(part.get("text", ""))
            elif part.get("type") == "image_url":
                image = part["image_url"]
                tokens += openai_image_tokens(
                    _decode_data_url(image["url"]), image.get("detail", "auto"), model
                )
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        schema = response_format["json_schema"]
        tokens += text_tokens(json.dumps(schema.get("schema"), separators=(",", ":"), sort_keys=True))
        tokens += text_tokens(str(schema.get("name", "")))
    return tokens


def anthropic_prompt_tokens(body: dict[str, Any]) -> int:
    """Input tokens of a Messages body."""
    messages = body.get("messages") or []
    system = body.get("system") or ""
    tokens = 4 * (len(messages) + (1 if system else 0)) + text_tokens(
        system if isinstance(system, str) else ""
    )
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            tokens += text_tokens(content)
            continue
        for block in content or []:
            if block.get("type") == "text":
                tokens += text_tokens(block.get("text", ""))
            elif block.get("type") == "image":
                tokens += anthropic_image_tokens(base64.b64decode(block["source"]["data"]))
    for tool in body.get("tools") or []:
        tokens += text_tokens(json.dumps(tool.get("input_schema"), separators=(",", ":"), sort_keys=True))
        tokens += text_tokens(str(tool.get("name", ""))) + text_tokens(str(tool.get("description", "")))
    if (body.get("tool_choice") or {}).get("type") == "tool":
        tokens += 313
    return tokens
