"""What both modes of an :class:`~model_clients.client.LLMClient` do with an answer: read it, turn it into a result, cache it.

Sync mode (:mod:`model_clients.sync_mode`) and batch mode (:mod:`model_clients.batch_mode`) differ only in the
transport and the price; an answer is read the same way in both (:meth:`AnswerBook.interpret`: the schema, then
the request's ``answer_check``), a request ends as the same :class:`~model_clients.records.LLMResult`
(:meth:`AnswerBook.success`, :meth:`AnswerBook.failure`, which never holds the API key), and every answer goes
to the response cache as it arrives (:meth:`AnswerBook.store`).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any

from model_clients.cache import CachedResponse, ResponseCache
from model_clients.providers import ProviderReply, redact
from model_clients.records import LLMRequest, LLMResult, ResultStatus, TokenUsage
from model_clients.schema import ResponseFormatError, parse_json_text, validate_json

__all__ = ["AnswerBook", "RequestAttempts"]

logger = logging.getLogger(__name__)


@dataclass
class RequestAttempts:
    """Book-keeping of one request's calls (sync calls, or requests submitted in batches)."""

    calls: int = 0
    transport_failures: int = 0
    invalid_answers: int = 0
    usage: TokenUsage = field(default_factory=TokenUsage)
    cost_usd: float = 0.0
    last_answer: ProviderReply | None = None


class AnswerBook:
    """Reads answers and records results for one provider and model.

    Args:
        cache (`ResponseCache`): where answers are stored.
        provider, model (`str`): what the cache entries are filed under.
        secrets (`tuple[str, ...]`): strings redacted from every failure reason (the API key).
    """

    def __init__(self, cache: ResponseCache, provider: str, model: str, secrets: tuple[str, ...]) -> None:
        self.cache = cache
        self.provider = provider
        self.model = model
        self.secrets = secrets

    def redact(self, text: str) -> str:
        """`text` without the secrets."""
        return redact(text, self.secrets)

    @staticmethod
    def interpret(reply: ProviderReply, request: LLMRequest) -> Any:
        """The answer's data: the stripped text without a schema, else parsed and validated JSON.

        Raises:
            ResponseFormatError: the answer is not JSON of the schema, or the request's `answer_check` refuses it.
        """
        if request.schema is None:
            return AnswerBook.checked(reply.raw_text.strip(), request)
        value = reply.parsed if reply.parsed is not None else parse_json_text(reply.raw_text)
        problems = validate_json(value, request.schema)
        if problems:
            raise ResponseFormatError("response does not match the schema: " + "; ".join(problems))
        return AnswerBook.checked(value, request)

    @staticmethod
    def checked(value: Any, request: LLMRequest) -> Any:
        """The value, unless the request's `answer_check` refuses it (then `ResponseFormatError`)."""
        problem = request.answer_check(value) if request.answer_check is not None else None
        if problem:
            raise ResponseFormatError(problem)
        return value

    @staticmethod
    def success(
        data: Any, reply: ProviderReply, key: str, request: LLMRequest, attempts: RequestAttempts
    ) -> LLMResult:
        """The result of a usable answer."""
        return LLMResult(
            ok=True,
            status=ResultStatus.OK,
            data=data,
            raw_text=reply.raw_text,
            error=None,
            cached=False,
            usage=attempts.usage,
            attempts=attempts.calls,
            cost_usd=attempts.cost_usd,
            original_cost_usd=attempts.cost_usd,
            cache_key=key,
            request_id=request.request_id,
        )

    def failure(
        self,
        status: str,
        reason: str,
        key: str,
        request: LLMRequest,
        attempts: RequestAttempts,
        last_answer: ProviderReply | None,
    ) -> LLMResult:
        """The result of a request that ended without a usable answer (`reason` redacted)."""
        return LLMResult(
            ok=False,
            status=status,
            data=None,
            raw_text=None if last_answer is None else last_answer.raw_text,
            error=self.redact(reason),
            cached=False,
            usage=attempts.usage,
            attempts=attempts.calls,
            cost_usd=attempts.cost_usd,
            original_cost_usd=attempts.cost_usd,
            cache_key=key,
            request_id=request.request_id,
        )

    def store(self, result: LLMResult, request: LLMRequest) -> None:
        """Commit a result to the response cache (a cache error is logged: the result is still returned)."""
        entry = CachedResponse(
            cache_key=result.cache_key,
            provider=self.provider,
            model=self.model,
            template_name=request.template_name,
            template_version=request.template_version,
            status=result.status,
            raw_text=result.raw_text,
            data=result.data,
            error=result.error,
            usage=result.usage,
            cost_usd=result.cost_usd,
            attempts=result.attempts,
            created_at=time.time(),
        )
        try:
            self.cache.put(entry)
        except sqlite3.Error as error:
            logger.error(
                "could not store the answer of request %s in the cache: %s", result.cache_key[:12], error
            )
