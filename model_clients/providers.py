"""Provider adapters: turn an :class:`LLMRequest` into one API call with the official SDK clients.

Two adapters share one small interface (`send(request, parameters) -> ProviderReply`):

- :class:`OpenAIChatProvider`: the `openai` SDK's Chat Completions API, for OpenAI itself or any
  OpenAI-compatible server (vLLM, llama.cpp, a gateway) through `base_url`. Structured output uses
  `response_format={"type": "json_schema", ...}`; images go as `data:` URLs with a `detail` level.
- :class:`AnthropicMessagesProvider`: the `anthropic` SDK's Messages API. Structured output is a forced
  tool call whose `input_schema` is the request's schema; images go as base64 content blocks.

Each adapter builds the request's JSON body once (`build_body`, the same body a batch request carries)
and reads a reply body (`read_body`, also for the answers of a batch). A sync call posts the body through
the SDK client's own `post` (its authentication, base URL, timeout, connection pool and error types)
and reads the reply as bytes: the SDK's per-call parameter transformation and response models cost
several times the CPU of the HTTP exchange itself against a local server (`benchmarks/bench_llm.py`).

Both SDK clients are built with `max_retries=0`: retries, backoff and rate limiting belong to
:class:`model_clients.client.LLMClient`. Adapters translate every failure into
:class:`TransientProviderError` (worth retrying: timeouts, connection drops, truncated or non-JSON
bodies, 408/409/425/429/5xx with the `Retry-After` hint) or :class:`PermanentProviderError` (the API
refused the request). Error messages are passed through :func:`redact` so API keys never reach logs,
results or the cache.

JSON modes (`json_mode`): `"native"` (the provider's structured output: JSON schema / forced tool),
`"json_object"` (OpenAI JSON mode plus the schema in the system prompt), `"prompt"` (only an
instruction with the schema; the answer is parsed from text). Use the last two for servers without
schema-guided decoding.
"""

from __future__ import annotations

import base64
import email.utils
import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from model_clients.records import LLMRequest, TokenUsage

__all__ = [
    "JSON_MODES",
    "PROVIDERS",
    "AnthropicMessagesProvider",
    "ChatProvider",
    "OpenAIChatProvider",
    "PermanentProviderError",
    "ProviderReply",
    "TransientProviderError",
    "build_provider",
    "image_media_type",
    "json_instruction",
    "parse_retry_after",
    "redact",
]

logger = logging.getLogger(__name__)

PROVIDERS = ("openai", "anthropic")
JSON_MODES = ("native", "json_object", "prompt")
RETRYABLE_STATUS_CODES = frozenset({408, 409, 425, 429})
PLACEHOLDER_API_KEY = "no-key"
"""Sent when no key is configured (local OpenAI-compatible servers that do not check keys)."""

_SECRET_PATTERN = re.compile(r"\b(sk-[A-Za-z0-9_\-*]{6,}|Bearer\s+[A-Za-z0-9_\-.=*]{6,})")
_MAX_REASON_CHARS = 400


class TransientProviderError(Exception):
    """A failure worth retrying; `retry_after_s` carries the server's `Retry-After` hint if any."""

    def __init__(self, reason: str, status_code: int | None = None, retry_after_s: float | None = None):
        super().__init__(reason)
        self.reason = reason
        self.status_code = status_code
        self.retry_after_s = retry_after_s


class PermanentProviderError(Exception):
    """The API refused the request (bad request, authentication, permission, unknown model...)."""

    def __init__(self, reason: str, status_code: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.status_code = status_code


@dataclass(frozen=True)
class ProviderReply:
    """What one successful API call returned.

    Attributes:
        raw_text (`str`): the answer's text (for a tool call, its input as JSON text).
        parsed: the already-structured answer when the API returned one (Anthropic tool input), else `None`.
        usage (`TokenUsage`): billed tokens.
        finish_reason (`str` or `None`): why generation stopped (`"stop"`, `"length"`, `"tool_use"`...).
    """

    raw_text: str
    parsed: Any
    usage: TokenUsage
    finish_reason: str | None


class ChatProvider(Protocol):
    """The interface of a provider adapter."""

    name: str
    model: str

    def send(self, request: LLMRequest, parameters: Mapping[str, Any]) -> ProviderReply:
        """Make one API call; raise `TransientProviderError` or `PermanentProviderError` on failure."""
        ...

    def close(self) -> None:
        """Release the HTTP connections."""
        ...


def redact(text: str, secrets: Sequence[str] = ()) -> str:
    """Remove secrets from `text`: each given secret, plus anything shaped like an API key or bearer token.

    Example:
        >>> redact("Incorrect API key provided: sk-live-abcdef123456", ["sk-live-abcdef123456"])
        'Incorrect API key provided: [REDACTED]'
        >>> redact("Authorization: Bearer abc.def-ghi_jkl")
        'Authorization: [REDACTED]'
    """
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[REDACTED]")
    return _SECRET_PATTERN.sub("[REDACTED]", text)


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms`, or `retry-after` in seconds or as an HTTP date.

    Example:
        >>> parse_retry_after({"retry-after": "2"})
        2.0
        >>> parse_retry_after({"retry-after-ms": "1500"})
        1.5
        >>> parse_retry_after({}) is None
        True
    """
    if not headers:
        return None
    lowered = {str(name).lower(): str(value) for name, value in headers.items()}
    if "retry-after-ms" in lowered:
        try:
            return max(float(lowered["retry-after-ms"]) / 1000.0, 0.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(moment.timestamp() - (time.time() if now is None else now), 0.0)


def image_media_type(image: bytes) -> str:
    """The MIME type of encoded image bytes, from their signature (PNG, JPEG, GIF, WebP).

    Example:
        >>> image_media_type(b"\\x89PNG\\r\\n\\x1a\\n....")
        'image/png'
    """
    head = bytes(image[:12])
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image/webp"
    raise ValueError("unsupported image encoding: expected PNG, JPEG, GIF or WebP bytes")


def json_instruction(schema: Mapping[str, Any] | None) -> str:
    """The instruction appended to the system prompt in the `"json_object"` and `"prompt"` modes.

    Example:
        >>> json_instruction({"type": "object"}).splitlines()[0]
        'Answer with one JSON document that matches this JSON schema, and nothing else:'
    """
    if schema is None:
        return "Answer with one JSON document and nothing else."
    return "Answer with one JSON document that matches this JSON schema, and nothing else:\n" + json.dumps(
        schema, ensure_ascii=False, sort_keys=True
    )


def _error_message(error: object) -> str:
    """The provider's own error text (`error.type: error.message` from the JSON body) when there is one."""
    body = getattr(error, "body", None)
    details = body.get("error") if isinstance(body, Mapping) else None
    if isinstance(details, Mapping) and details.get("message"):
        kind = details.get("type")
        return f"{kind}: {details['message']}" if kind else str(details["message"])
    if isinstance(body, Mapping) and body.get("message"):
        return str(body["message"])
    return str(getattr(error, "message", "") or type(error).__name__)


def _status_reason(status_code: int, message: str, secrets: Sequence[str]) -> str:
    cleaned = redact(" ".join(str(message).split()), secrets)
    if len(cleaned) > _MAX_REASON_CHARS:
        cleaned = cleaned[:_MAX_REASON_CHARS] + "..."
    return f"HTTP {status_code}: {cleaned}"


def sdk_call(sdk: Any, secrets: Sequence[str], function: Any, *args: Any, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)`` with the SDK's errors (``sdk``: the ``openai`` or ``anthropic`` module, whose
    error classes have the same names) translated by :func:`_translate_sdk_error`."""
    try:
        return function(*args, **kwargs)
    except (sdk.APIStatusError, sdk.APIConnectionError, sdk.APIResponseValidationError) as error:
        raise _translate_sdk_error(error, sdk, secrets) from None


def _translate_sdk_error(error: Exception, sdk: Any, secrets: Sequence[str]) -> Exception:
    """Map an SDK exception to a transient or permanent provider error with a redacted reason."""
    status_error, timeout_error = sdk.APIStatusError, sdk.APITimeoutError
    connection_error, validation_error = sdk.APIConnectionError, sdk.APIResponseValidationError
    if isinstance(error, status_error):
        status_code = int(getattr(error, "status_code", 0) or 0)
        response = getattr(error, "response", None)
        headers = dict(response.headers) if response is not None else {}
        reason = _status_reason(status_code, _error_message(error), secrets)
        if status_code in RETRYABLE_STATUS_CODES or status_code >= 500:
            return TransientProviderError(reason, status_code, parse_retry_after(headers))
        return PermanentProviderError(reason, status_code)
    if isinstance(error, timeout_error):
        return TransientProviderError("request timed out")
    if isinstance(error, connection_error):
        cause = error.__cause__ or error.__context__
        detail = f": {type(cause).__name__}" if cause is not None else ""
        return TransientProviderError(redact(f"connection failed{detail}", secrets))
    if isinstance(error, validation_error):
        return TransientProviderError("malformed response body")
    raise TypeError(f"unexpected error type {type(error).__name__}") from error


def _split_parameters(
    parameters: Mapping[str, Any], known: Sequence[str], dropped: Sequence[str] = ()
) -> tuple[dict[str, Any], dict[str, Any]]:
    known_values = {name: value for name, value in parameters.items() if name in known}
    extra = {
        name: value
        for name, value in parameters.items()
        if name not in known and name not in dropped and name != "image_detail"
    }
    return known_values, extra


def _json_document(content: bytes | str) -> Any:
    """The JSON value of a response body; a body that is not JSON is a transient failure (a proxy's error page)."""
    try:
        return json.loads(content)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise TransientProviderError("response body is not JSON") from None


class OpenAIChatProvider:
    """Chat Completions through the `openai` SDK (OpenAI or any OpenAI-compatible `base_url`).

    Args:
        model (`str`): model name, e.g. `"gpt-4o-mini"`.
        api_key (`str`, *optional*): the key; when `None` a placeholder is sent (local servers).
        base_url (`str`, *optional*): e.g. `"http://localhost:8000/v1"` for vLLM; `None` for OpenAI.
        timeout_s (`float`, *optional*, defaults to `60.0`): per-call timeout.
        json_mode (`str`, *optional*, defaults to `"native"`): see the module docstring.
        strict_schema (`bool`, *optional*, defaults to `True`): OpenAI's `strict` structured outputs (the
            schema must then list every property as required and set `additionalProperties: false`).

    Attributes:
        secrets (`tuple[str, ...]`): the strings redacted from every error reason (the API key).
    """

    name = "openai"

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 60.0,
        json_mode: str = "native",
        strict_schema: bool = True,
    ) -> None:
        if json_mode not in JSON_MODES:
            raise ValueError(f"json_mode must be one of {JSON_MODES}, got {json_mode!r}")
        self.model = model
        self.json_mode = json_mode
        self.strict_schema = strict_schema
        self.secrets = (api_key,) if api_key else ()
        import openai  # imported on first use: the SDKs take seconds to import

        self._client = openai.OpenAI(
            api_key=api_key or PLACEHOLDER_API_KEY, base_url=base_url, timeout=timeout_s, max_retries=0
        )

    @property
    def sdk(self) -> Any:
        """The SDK client (its batch and file APIs are used by :mod:`model_clients.batches`)."""
        return self._client

    def close(self) -> None:
        self._client.close()

    def build_messages(self, request: LLMRequest, image_detail: str) -> list[dict[str, Any]]:
        """The `messages` list: system (plus the JSON instruction in the text modes), then the user turn."""
        system = request.system or ""
        if request.schema is not None and self.json_mode != "native":
            system = (system + "\n\n" + json_instruction(request.schema)).strip()
        messages: list[dict[str, Any]] = []
        if system:
            messages.append({"role": "system", "content": system})
        if not request.images:
            messages.append({"role": "user", "content": request.prompt})
            return messages
        content: list[dict[str, Any]] = []
        for image in request.images:
            data_url = f"data:{image_media_type(image)};base64,{base64.b64encode(image).decode('ascii')}"
            content.append({"type": "image_url", "image_url": {"url": data_url, "detail": image_detail}})
        content.append({"type": "text", "text": request.prompt})
        messages.append({"role": "user", "content": content})
        return messages

    def build_response_format(self, request: LLMRequest) -> dict[str, Any] | None:
        """The `response_format` argument for the request's schema and the JSON mode."""
        if request.schema is None or self.json_mode == "prompt":
            return None
        if self.json_mode == "json_object":
            return {"type": "json_object"}
        return {
            "type": "json_schema",
            "json_schema": {
                "name": request.schema_name,
                "schema": dict(request.schema),
                "strict": self.strict_schema,
            },
        }

    def build_body(self, request: LLMRequest, parameters: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON body of the Chat Completions call (the same in a sync call and in a batch line)."""
        known, extra = _split_parameters(parameters, ("temperature", "max_tokens", "top_p", "seed", "stop"))
        body: dict[str, Any] = {
            "model": self.model,
            "messages": self.build_messages(request, str(parameters.get("image_detail", "auto"))),
        }
        if "max_tokens" in known:
            body["max_completion_tokens"] = known.pop("max_tokens")
        body.update(known)
        response_format = self.build_response_format(request)
        if response_format is not None:
            body["response_format"] = response_format
        body.update(extra)
        return body

    def send(self, request: LLMRequest, parameters: Mapping[str, Any]) -> ProviderReply:
        """One Chat Completions call.

        The body is built here as plain JSON and posted through the SDK client's own `post` (its auth,
        base URL, timeout, connection pool and error types), reading the reply as bytes: the SDK's
        per-call parameter transformation and response models cost more CPU than the HTTP call itself
        against a local server.
        """
        import openai

        content = sdk_call(
            openai,
            self.secrets,
            self._client.post,
            "/chat/completions",
            body=self.build_body(request, parameters),
            cast_to=bytes,
        )
        return self.read_body(_json_document(content), request)

    def read_body(self, document: Any, request: LLMRequest) -> ProviderReply:
        """The reply in a chat completion's JSON (a sync answer or a batch output line's body)."""
        if not isinstance(document, Mapping):
            raise TransientProviderError("response body is not a chat completion")
        choices = document.get("choices")
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], Mapping):
            raise TransientProviderError("response has no choices")
        choice = choices[0]
        message = choice.get("message")
        message = message if isinstance(message, Mapping) else {}
        refusal = message.get("refusal")
        text = message.get("content")
        if text is None and refusal:
            text = ""
        if text is None:
            raise TransientProviderError("response message has no content")
        usage = document.get("usage")
        usage = usage if isinstance(usage, Mapping) else {}
        tokens = TokenUsage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))
        finish_reason = choice.get("finish_reason")
        if refusal:
            finish_reason = "refusal"
        return ProviderReply(raw_text=str(text), parsed=None, usage=tokens, finish_reason=finish_reason)


class AnthropicMessagesProvider:
    """Messages API through the `anthropic` SDK.

    In the `"native"` JSON mode the schema becomes a tool (`input_schema`) that the model is forced to
    call, and the tool's input is the answer; the schema's root must then be an object.

    Args:
        model (`str`): model name, e.g. `"claude-sonnet-4-20250514"`.
        api_key (`str`, *optional*): the key; when `None` a placeholder is sent.
        base_url (`str`, *optional*): API root without `/v1`; `None` for Anthropic.
        timeout_s (`float`, *optional*, defaults to `60.0`): per-call timeout.
        json_mode (`str`, *optional*, defaults to `"native"`): `"native"` (forced tool) or `"prompt"`.

    Attributes:
        secrets (`tuple[str, ...]`): the strings redacted from every error reason (the API key).
    """

    name = "anthropic"

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 60.0,
        json_mode: str = "native",
    ) -> None:
        if json_mode not in ("native", "prompt"):
            raise ValueError(f"json_mode for anthropic must be 'native' or 'prompt', got {json_mode!r}")
        self.model = model
        self.json_mode = json_mode
        self.secrets = (api_key,) if api_key else ()
        import anthropic  # imported on first use: the SDKs take seconds to import

        self._client = anthropic.Anthropic(
            api_key=api_key or PLACEHOLDER_API_KEY,
            base_url=base_url,
            timeout=timeout_s,
            max_retries=0,
            open_telemetry=False,
        )

    @property
    def sdk(self) -> Any:
        """The SDK client (its batch and file APIs are used by :mod:`model_clients.batches`)."""
        return self._client

    def close(self) -> None:
        self._client.close()

    def uses_tool(self, request: LLMRequest) -> bool:
        """Whether the answer is requested as a forced tool call."""
        return (
            request.schema is not None
            and self.json_mode == "native"
            and request.schema.get("type", "object") == "object"
        )

    def build_system(self, request: LLMRequest) -> str:
        system = request.system or ""
        if request.schema is not None and not self.uses_tool(request):
            system = (system + "\n\n" + json_instruction(request.schema)).strip()
        return system

    def build_messages(self, request: LLMRequest) -> list[dict[str, Any]]:
        """One user turn: image blocks (base64), then the text."""
        content: list[dict[str, Any]] = [
            {
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": image_media_type(image),
                    "data": base64.b64encode(image).decode("ascii"),
                },
            }
            for image in request.images
        ]
        content.append({"type": "text", "text": request.prompt})
        return [{"role": "user", "content": content}]

    def build_body(self, request: LLMRequest, parameters: Mapping[str, Any]) -> dict[str, Any]:
        """The JSON body of the Messages call (the same in a sync call and in a batch request's `params`).

        The sampling parameters (temperature, top_p, top_k) and any other extra field go in the body as
        they are; `seed` has no Anthropic counterpart and is not sent.
        """
        known, extra = _split_parameters(parameters, ("max_tokens", "stop"), dropped=("seed",))
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": int(known.pop("max_tokens", 1024)),
            "messages": self.build_messages(request),
        }
        if "stop" in known:
            stop = known.pop("stop")
            body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
        body.update(known)
        system = self.build_system(request)
        if system:
            body["system"] = system
        if self.uses_tool(request):
            assert request.schema is not None  # only a request with a schema is answered by a tool call
            body["tools"] = [
                {
                    "name": request.schema_name,
                    "description": "Record the answer in the required structure.",
                    "input_schema": dict(request.schema),
                }
            ]
            body["tool_choice"] = {"type": "tool", "name": request.schema_name}
        body.update(extra)
        return body

    def send(self, request: LLMRequest, parameters: Mapping[str, Any]) -> ProviderReply:
        """One Messages call, posted as plain JSON through the SDK client's `post` (see the OpenAI adapter)."""
        import anthropic

        content = sdk_call(
            anthropic,
            self.secrets,
            self._client.post,
            "/v1/messages",
            body=self.build_body(request, parameters),
            cast_to=bytes,
        )
        return self.read_body(_json_document(content), request)

    def read_body(self, document: Any, request: LLMRequest) -> ProviderReply:
        """The reply in a message's JSON (a sync answer or a batch result's `message`)."""
        if not isinstance(document, Mapping):
            raise TransientProviderError("response body is not a message")
        blocks = document.get("content")
        if not isinstance(blocks, list):
            raise TransientProviderError("response message has no content")
        usage = document.get("usage")
        usage = usage if isinstance(usage, Mapping) else {}
        prompt_tokens = sum(
            int(usage.get(name) or 0)
            for name in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        tokens = TokenUsage(prompt_tokens, int(usage.get("output_tokens") or 0))
        finish_reason = document.get("stop_reason")
        blocks = [block for block in blocks if isinstance(block, Mapping)]
        if self.uses_tool(request):
            for block in blocks:
                if block.get("type") == "tool_use" and block.get("name") == request.schema_name:
                    tool_input = block.get("input")
                    return ProviderReply(
                        raw_text=json.dumps(tool_input, ensure_ascii=False),
                        parsed=tool_input,
                        usage=tokens,
                        finish_reason=finish_reason,
                    )
        text = "".join(str(block.get("text") or "") for block in blocks if block.get("type") == "text")
        return ProviderReply(raw_text=text, parsed=None, usage=tokens, finish_reason=finish_reason)


def build_provider(
    provider: str,
    model: str,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout_s: float = 60.0,
    json_mode: str = "native",
    strict_schema: bool = True,
) -> ChatProvider:
    """Construct the adapter for `provider` (`"openai"` or `"anthropic"`).

    Example:
        >>> adapter = build_provider("openai", "gpt-4o-mini", base_url="http://127.0.0.1:9/v1")
        >>> adapter.name
        'openai'
        >>> adapter.close()
    """
    if provider == "openai":
        return OpenAIChatProvider(model, api_key, base_url, timeout_s, json_mode, strict_schema)
    if provider == "anthropic":
        return AnthropicMessagesProvider(model, api_key, base_url, timeout_s, json_mode)
    raise ValueError(f"provider must be one of {PROVIDERS}, got {provider!r}")
