"""Sync mode of :class:`~model_clients.client.LLMClient`: one HTTP call per request, on a pool of threads.

Each worker takes a token from the rate limiter, holds the request's cost of the budget, and sends it through the
provider adapter; transport failures are retried with the client's backoff (a 429 pauses the whole limiter),
refusals are not; an answer outside the schema is asked again ``invalid_json_retries`` times, then quarantined.
Every answer is committed to the cache as it arrives. Batch mode uses it for re-asks too few for a new batch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor, as_completed

from model_clients.answers import RequestAttempts
from model_clients.modes import ModeServices, PendingWork
from model_clients.pricing import cost_usd
from model_clients.providers import (
    PermanentProviderError,
    ProviderReply,
    TransientProviderError,
    image_media_type,
)
from model_clients.ratelimit import TokenBucket
from model_clients.records import LLMRequest, LLMResult, ResultStatus
from model_clients.schema import ResponseFormatError

__all__ = ["SyncMode"]

logger = logging.getLogger(__name__)


class _BudgetStop(Exception):
    """Raised in a worker thread instead of sending a request that could pass the budget."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class SyncMode:
    """Sends requests one HTTP call each (see the module docstring).

    Args:
        services (`ModeServices`): what the client hands over.
        limiter (`TokenBucket`): the rate limiter every call takes a token from.
    """

    def __init__(self, services: ModeServices, limiter: TokenBucket) -> None:
        self.services = services
        self.limiter = limiter

    def run(self, work: PendingWork) -> None:
        """Every pending request of `work` on the worker pool, each holding its cost of the budget."""
        costs = self.services.request_costs(work.requests, work.pending, False)
        self.run_requests(work, work.pending, costs=costs)

    def run_requests(
        self,
        work: PendingWork,
        indices: Sequence[int],
        attempts_of: Mapping[int, RequestAttempts] | None = None,
        costs: Mapping[int, float] | None = None,
    ) -> None:
        """The requests of `work` at `indices` on a pool of worker threads.

        `attempts_of` carries on the counts of requests already tried in a batch. A request that could take the
        spend past the budget (``costs``: what each could cost at most) is not sent: no other request is started,
        the ones in flight end (their answers are cached), and
        :class:`~model_clients.budget.BudgetExceededError` is raised.
        """
        requests, keys, results = work.requests, work.keys, work.results
        workers = min(self.services.config.max_concurrency, len(indices))
        executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm")
        interrupted = threading.Event()
        attempts_of = attempts_of or {}
        costs = costs or {}

        def execute_unless_interrupted(index: int) -> LLMResult:
            if interrupted.is_set():
                raise CancelledError  # the batch was interrupted: start no new (paid) request
            try:
                return self.execute(
                    requests[index], keys[index], attempts_of.get(index), costs.get(index, 0.0), work.label
                )
            except (KeyboardInterrupt, _BudgetStop):
                interrupted.set()  # before this worker takes the next request off the queue
                raise

        completed = False
        stop: str | None = None
        try:
            futures: dict[Future, int] = {
                executor.submit(execute_unless_interrupted, index): index for index in indices
            }
            for future in as_completed(futures):
                try:
                    results[futures[future]] = future.result()
                except _BudgetStop as budget:
                    stop = stop or budget.message
                    continue
                except CancelledError:
                    if stop is None:
                        raise
                    continue
                work.bar.update(1)
            completed = True
        finally:
            # On an interrupt, start nothing new and do not wait for workers sleeping in a backoff: answers
            # already received are committed, and the next run resumes from the cache.
            if not completed:
                interrupted.set()
            executor.shutdown(wait=completed, cancel_futures=True)
        if stop is not None:
            raise self.services.budget.exceeded(stop)

    def execute(
        self,
        request: LLMRequest,
        key: str,
        attempts: RequestAttempts | None = None,
        estimated_cost: float = 0.0,
        label: str = "llm",
    ) -> LLMResult:
        """Send one request until it succeeds, is refused, or runs out of retries (worker thread).

        `attempts` carries on the count of a request already tried in a batch (batch mode's re-asks). Every
        call first holds `estimated_cost` (what it could cost at most) of the budget; :class:`_BudgetStop` instead
        of a call that could pass it.
        """
        services = self.services
        config, budget, answers = services.config, services.budget, services.answers
        parameters = services.effective_parameters(request)
        attempts = attempts or RequestAttempts()
        last_answer: ProviderReply | None = attempts.last_answer
        for position, image in enumerate(request.images):
            try:
                image_media_type(image)
            except ValueError as error:
                return answers.failure(
                    ResultStatus.REJECTED, f"images[{position}]: {error}", key, request, attempts, None
                )
        while True:
            if not budget.reserve(estimated_cost):
                raise _BudgetStop(
                    budget.stop_message(label, f"request {request.request_id or key[:12]}", estimated_cost)
                )
            self.limiter.acquire()
            attempts.calls += 1
            try:
                reply = services.provider.send(request, parameters)
            except TransientProviderError as error:
                budget.settle(estimated_cost, 0.0)
                attempts.transport_failures += 1
                reason = answers.redact(error.reason)
                if attempts.transport_failures > config.max_retries:
                    logger.warning("request %s failed after %d calls: %s", key[:12], attempts.calls, reason)
                    return answers.failure(
                        ResultStatus.TRANSPORT_ERROR,
                        f"{reason} (after {attempts.calls} calls)",
                        key,
                        request,
                        attempts,
                        last_answer,
                    )
                delay = services.backoff(attempts.transport_failures, error.retry_after_s)
                if error.status_code == 429:
                    self.limiter.hold(delay)
                logger.debug("request %s: %s; retrying in %.2fs", key[:12], reason, delay)
                time.sleep(delay)
                continue
            except PermanentProviderError as error:
                budget.settle(estimated_cost, 0.0)
                reason = answers.redact(error.reason)
                logger.warning("request %s refused: %s", key[:12], reason)
                return answers.failure(ResultStatus.REJECTED, reason, key, request, attempts, last_answer)

            paid = cost_usd(reply.usage, services.price)
            budget.settle(estimated_cost, paid)
            attempts.usage = attempts.usage + reply.usage
            attempts.cost_usd += paid
            last_answer = reply
            try:
                data = answers.interpret(reply, request)
            except ResponseFormatError as error:
                attempts.invalid_answers += 1
                reason = str(error)
                if reply.finish_reason in ("length", "max_tokens", "refusal"):
                    reason += f" (finish_reason={reply.finish_reason})"
                if attempts.invalid_answers > config.invalid_json_retries:
                    logger.warning("request %s quarantined: %s", key[:12], reason)
                    result = answers.failure(
                        ResultStatus.INVALID_RESPONSE, reason, key, request, attempts, reply
                    )
                    answers.store(result, request)
                    return result
                logger.debug("request %s: %s; asking again", key[:12], reason)
                continue
            result = answers.success(data, reply, key, request, attempts)
            answers.store(result, request)
            return result
