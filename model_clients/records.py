"""The values that go in and out of the LLM client layer: requests, results and token usage.

An :class:`LLMRequest` is provider-agnostic: a rendered prompt (plus an optional system prompt), the
prompt template's name and version, optional images as encoded bytes, an optional JSON schema for
structured output, and per-request sampling parameters. An :class:`LLMResult` is what comes back for
each request, in the order the requests were given, whether the answer was fresh, cached or
quarantined.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

__all__ = ["LLMRequest", "LLMResult", "ResultStatus", "TokenUsage"]


class ResultStatus:
    """The possible values of :attr:`LLMResult.status`."""

    OK = "ok"
    """The answer parsed and matched the schema (or any text, when no schema was given)."""
    INVALID_RESPONSE = "invalid_response"
    """The model answered, but not with JSON of the schema, even after the allowed re-asks."""
    TRANSPORT_ERROR = "transport_error"
    """No usable answer after the allowed retries (timeouts, 429, 5xx, broken or non-JSON bodies)."""
    REJECTED = "rejected"
    """The API refused the request outright (400, 401, 403, 404, 422...): retrying cannot help."""


RERUN_HINTS = {
    ResultStatus.INVALID_RESPONSE: "cached as quarantined: a re-run asks again only with requery_quarantined: true "
    "on the LLM resource",
    ResultStatus.TRANSPORT_ERROR: "not cached: a re-run asks again",
    ResultStatus.REJECTED: "not cached: a re-run asks again once the key, model or request is fixed",
}
"""How a failed request of each status is asked again."""


@dataclass(frozen=True)
class TokenUsage:
    """Tokens billed for one or more API calls.

    Example:
        >>> TokenUsage(10, 2) + TokenUsage(5, 1)
        TokenUsage(prompt_tokens=15, completion_tokens=3)
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens
        )

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class LLMRequest:
    """One call to a chat model, independent of the provider.

    Args:
        template_name (`str`): name of the prompt template that rendered `prompt` (e.g. `"object_phrases"`).
        template_version (`str`): its version; bump it whenever the template text or the schema changes so
            cached answers of the old prompt are not reused.
        prompt (`str`): the rendered user message.
        system (`str`, *optional*): the rendered system prompt.
        images (`Sequence[bytes]`, *optional*, defaults to `()`): encoded images (PNG, JPEG, GIF or WebP
            bytes) sent with the user message, in order, before the text.
        schema (`dict`, *optional*): a JSON schema (object at the root for the Anthropic tool mode). When
            given, the answer must be JSON of this schema and `LLMResult.data` is the parsed value; when
            `None`, any text is accepted and `LLMResult.data` is the stripped text.
        schema_name (`str`, *optional*, defaults to `"response"`): name of the schema (the OpenAI
            `json_schema.name`, the Anthropic tool name); letters, digits, `_` and `-`.
        parameters (`Mapping[str, Any]`, *optional*): per-request sampling parameters overriding the
            client's defaults: `temperature`, `max_tokens`, `top_p`, `seed`, `stop`, `image_detail`; other
            keys are sent as extra body fields (for example vLLM's `top_k`).
        sample_index (`int`, *optional*, defaults to `0`): tells apart repeated samples of the same prompt
            (pass@k answering), which would otherwise share one cache entry. Not sent to the API.
        request_id (`str`, *optional*): the caller's row id, copied onto the result; not part of the cache key.
        answer_check (`Callable[[Any], str | None]`, *optional*): a further check of an answer that parsed
            (and matched the schema): returns why the answer is unusable, or `None`. An unusable answer is
            asked again like one outside the schema and quarantined as `invalid_response` after the
            client's `invalid_json_retries` re-asks; a cached `ok` answer that fails the check is asked again
            too. Not part of the cache key (the pass@2 judge checks that a reply is one option letter).

    Example:
        >>> request = LLMRequest("object_phrases", "v1", "List the objects in: Is the cup left of the laptop?",
        ...                      schema={"type": "object", "properties": {"phrases": {"type": "array"}}})
        >>> request.image_hashes
        ()
    """

    template_name: str
    template_version: str
    prompt: str
    system: str | None = None
    images: Sequence[bytes] = ()
    schema: Mapping[str, Any] | None = None
    schema_name: str = "response"
    parameters: Mapping[str, Any] = field(default_factory=dict)
    sample_index: int = 0
    request_id: str | None = None
    answer_check: Callable[[Any], str | None] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.images, tuple):
            object.__setattr__(self, "images", tuple(self.images))
        for index, image in enumerate(self.images):
            if not isinstance(image, (bytes, bytearray, memoryview)):
                raise TypeError(f"images[{index}] must be encoded image bytes, got {type(image).__name__}")

    @cached_property
    def image_hashes(self) -> tuple[str, ...]:
        """SHA-256 hex digests of the images, part of the cache key."""
        return tuple(hashlib.sha256(image).hexdigest() for image in self.images)

    @cached_property
    def schema_json(self) -> str | None:
        """The schema as canonical JSON text (sorted keys), or `None`."""
        if self.schema is None:
            return None
        return json.dumps(self.schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class LLMResult:
    """The outcome of one :class:`LLMRequest`.

    Attributes:
        ok (`bool`): `True` when `data` holds a valid answer.
        status (`str`): one of :class:`ResultStatus`' values.
        data: the parsed JSON (schema requests) or the stripped text (plain requests); `None` unless `ok`.
        raw_text (`str` or `None`): the model's last raw answer (kept for quarantined answers too).
        error (`str` or `None`): why the request was quarantined; never contains API keys.
        cached (`bool`): served from the response cache (or from an identical request in the same batch)
            without an API call.
        usage (`TokenUsage`): tokens of every API call made for this request in this run, or the tokens of
            the original calls when `cached`.
        attempts (`int`): API calls made in this run (0 when cached).
        cost_usd (`float`): price of this run's calls (0 when cached); `original_cost_usd` is the price paid
            when the answer was first obtained.
        cache_key (`str`): the content hash that identifies the request.
        request_id (`str` or `None`): copied from the request.
    """

    ok: bool
    status: str
    data: Any
    raw_text: str | None
    error: str | None
    cached: bool
    usage: TokenUsage
    attempts: int
    cost_usd: float
    original_cost_usd: float
    cache_key: str
    request_id: str | None = None

    def rerun_hint(self, resource: str | None = None) -> str:
        """How this failed request is asked again, as a bracketed clause ("" for a good answer)."""
        hint = RERUN_HINTS.get(self.status)
        if self.ok or hint is None:
            return ""
        if resource:
            hint = hint.replace("the LLM resource", f"the {resource} resource")
        return f" ({hint})"

    @property
    def retries(self) -> int:
        """API calls beyond the first."""
        return max(self.attempts - 1, 0)

    def quarantine_row(
        self,
        source_asset: str,
        record_id: str | None = None,
        source_file: str = "",
        resource: str | None = None,
    ) -> dict:
        """A row for a `<asset>_quarantine` table: `(source_asset, record_id, source_file, reason, payload_json)`.

        Args:
            source_asset (`str`): the asset that made the request.
            record_id (`str`, *optional*): the row's id; defaults to `request_id`, then the cache key.
            source_file (`str`, *optional*): the input file behind the row, if any.
            resource (`str`, *optional*): the Dagster resource key of the client (named in the reason).

        The reason says how the request is asked again (:data:`RERUN_HINTS`; `resource` names the LLM
        resource whose ``requery_quarantined`` setting re-asks quarantined answers).

        Example:
            >>> result = LLMResult(False, "invalid_response", None, "not json", "response is not valid JSON",
            ...                    False, TokenUsage(3, 2), 2, 0.0, 0.0, "abc", "q1")
            >>> result.quarantine_row("object_phrases", resource="phrase_llm")["reason"]
            'invalid_response: response is not valid JSON (cached as quarantined: a re-run asks again only with requery_quarantined: true on the phrase_llm resource)'
        """
        payload = {
            "status": self.status,
            "raw_text": self.raw_text,
            "attempts": self.attempts,
            "cache_key": self.cache_key,
            "prompt_tokens": self.usage.prompt_tokens,
            "completion_tokens": self.usage.completion_tokens,
        }
        return {
            "source_asset": source_asset,
            "record_id": record_id or self.request_id or self.cache_key,
            "source_file": source_file,
            "reason": f"{self.status}: {self.error}{self.rerun_hint(resource)}",
            "payload_json": json.dumps(payload, ensure_ascii=False),
        }
