"""The interface between an :class:`~model_clients.client.LLMClient` and the two ways it sends requests.

The client looks its requests up in the cache and estimates them; what is left (:class:`PendingWork`) goes to
the mode it chose once, on construction, from ``mode``: :class:`~model_clients.sync_mode.SyncMode` (one HTTP
call per request, on a pool of threads) or :class:`~model_clients.batch_mode.BatchMode` (the provider's Batch
API). A mode gets what it needs explicitly in :class:`ModeServices` and fills in the work's results; it knows
nothing of the client.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from model_clients.answers import AnswerBook
from model_clients.budget import SpendingBudget
from model_clients.cache import ResponseCache
from model_clients.estimate import TokenEstimator
from model_clients.pricing import ModelPrice
from model_clients.providers import ChatProvider
from model_clients.records import LLMRequest, LLMResult

if TYPE_CHECKING:
    from tqdm import tqdm

    from model_clients.client import LLMClientConfig, UsageSummary

__all__ = ["ModeServices", "PendingWork", "RequestMode"]


@dataclass
class PendingWork:
    """The uncached requests of one `run_batch` call.

    Attributes:
        requests, keys: the call's requests and their cache keys.
        pending (`Sequence[int]`): indices of the uncached requests (one per distinct key).
        results (`list`): the call's results, filled in by the mode.
        bar (`tqdm`): the call's progress bar.
        label (`str`): the call's description (names the batches and the log lines).
        counters (`UsageSummary`): receives the batch counters (batches, requests, outcomes, waits, expected finish).
    """

    requests: Sequence[LLMRequest]
    keys: Sequence[str]
    pending: Sequence[int]
    results: list[LLMResult | None]
    bar: tqdm
    label: str
    counters: UsageSummary


@dataclass(frozen=True)
class ModeServices:
    """What a mode works with, handed over by the client.

    Attributes:
        config (`LLMClientConfig`): the settings (retries, concurrency, batch limits).
        provider (`ChatProvider`): the chat adapter (sends a request; builds and reads a batch line's body).
        cache (`ResponseCache`): the response cache (batch records and downloaded outcomes).
        answers (`AnswerBook`): reads answers, makes results, stores them.
        budget (`SpendingBudget`): the spending cap.
        estimator (`TokenEstimator`): prompt tokens of a request.
        price (`ModelPrice`, *optional*): the model's price (None for an unpriced model).
        log (`logging.Logger`): where progress and stops are logged.
        effective_parameters: the parameters sent for a request (client defaults and the request's own).
        request_costs: ``(requests, indices, batch) -> {index: cost}``, what each request could cost at most
            (empty without a budget).
        backoff: ``(retry_number, retry_after_s) -> seconds`` before a retry.
    """

    config: LLMClientConfig
    provider: ChatProvider
    cache: ResponseCache
    answers: AnswerBook
    budget: SpendingBudget
    estimator: TokenEstimator
    price: ModelPrice | None
    log: logging.Logger
    effective_parameters: Callable[[LLMRequest], dict[str, Any]]
    request_costs: Callable[[Sequence[LLMRequest], Sequence[int], bool], Mapping[int, float]]
    backoff: Callable[[int, float | None], float]


class RequestMode(Protocol):
    """Sends the pending requests of a call and fills in their results."""

    def run(self, work: PendingWork) -> None:
        """Give every pending request of `work` a result; raises only
        :class:`~model_clients.budget.BudgetExceededError` (the answers received before it are cached)."""
        ...
