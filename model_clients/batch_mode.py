"""Batch mode of :class:`~model_clients.client.LLMClient`: the uncached requests of a call go through a Batch API.

:meth:`LLMClient.run_batch <model_clients.client.LLMClient.run_batch>` hands its uncached requests to a
:class:`BatchRun` when the client's ``mode`` is ``batch``. The requests, their cache keys, the answers'
checks and the cache entries are those of sync mode; only the transport and the price differ. A run:

1. reads the outcomes an earlier run downloaded but did not read (a kill between the two);
2. finds the batches an earlier run submitted and did not collect that hold some of its requests, and
   polls them: a resumed run never submits those requests again;
3. submits the other requests, split under the provider's limits (requests and bytes per batch, or the
   client's ``batch_max_requests`` / ``batch_max_bytes``); each batch id is committed to the response
   cache with its requests' keys before the first poll;
4. polls every ``batch_poll_interval_s`` seconds, logging submitted, completed and failed requests and
   the expected finish; each batch that ends is collected: its outcomes go to the cache in one
   transaction, then each request is read like a sync answer (schema, ``answer_check``);
5. asks again, in a new batch, or one by one at the standard price when there are at most
   ``batch_sync_reask_max`` of them: the requests an expired or cancelled batch never ran and those that
   failed with a retryable error (429, 5xx; up to ``max_retries`` times), and answers outside the schema
   (up to ``invalid_json_retries`` times). A request the API refused (400...) is not asked again. Every
   request ends as an :class:`~model_clients.records.LLMResult`, and the failed ones go to the stage's
   quarantine with their reason.

Batch calls that fail in transit (upload, create, poll, results) are retried with the client's backoff;
a batch that cannot be polled after the retries stays recorded, its requests fail for this run, and the
next run polls it again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from model_clients.batches import BATCH_BYTES_MARGIN, ERRORED, RETRYABLE, SUCCEEDED, BatchState, ItemOutcome
from model_clients.cache import BatchJob
from model_clients.pricing import cost_usd
from model_clients.providers import (
    PermanentProviderError,
    ProviderReply,
    TransientProviderError,
    image_media_type,
)
from model_clients.records import LLMRequest, LLMResult, ResultStatus, TokenUsage
from model_clients.schema import ResponseFormatError

if TYPE_CHECKING:
    from tqdm import tqdm

    from model_clients.batches import BatchAPI
    from model_clients.client import LLMClient, UsageSummary

__all__ = ["BatchRun", "RequestAttempts"]

logger = logging.getLogger(__name__)

PROGRESS_LOG_INTERVAL_S = 300.0
"""Batch progress is logged when it changes, and at least this often while nothing changes."""
_OUTCOME_ORDER = {SUCCEEDED: 0, ERRORED: 1, RETRYABLE: 2}
_T = TypeVar("_T")


@dataclass
class RequestAttempts:
    """Book-keeping of one request's calls (sync calls, or requests submitted in batches)."""

    calls: int = 0
    transport_failures: int = 0
    invalid_answers: int = 0
    usage: TokenUsage = field(default_factory=TokenUsage)
    cost_usd: float = 0.0
    last_answer: ProviderReply | None = None


@dataclass
class _Item:
    index: int
    attempts: RequestAttempts = field(default_factory=RequestAttempts)


class BatchRun:
    """The batch-mode work of one `run_batch` call (see the module docstring).

    Args:
        client (`LLMClient`): the client (settings, cache, chat and batch adapters, answer checks).
        requests, keys: the call's requests and their cache keys.
        pending (`Sequence[int]`): indices of the uncached requests (one per distinct key).
        results (`list`): the call's results, filled in here.
        bar (`tqdm`): the call's progress bar.
        label (`str`): the call's description (names the batches and the log lines).
        counters (`UsageSummary`): receives the batch counters (batches, requests, outcomes, expected finish).
    """

    def __init__(
        self,
        client: LLMClient,
        requests: Sequence[LLMRequest],
        keys: Sequence[str],
        pending: Sequence[int],
        results: list[LLMResult | None],
        bar: tqdm,
        label: str,
        counters: UsageSummary,
    ) -> None:
        if client._batch_api is None:
            raise ValueError("batch mode needs a batch adapter")
        self.client = client
        self.config = client.config
        self.api: BatchAPI = client._batch_api
        self.chat: Any = client._provider
        self.cache = client._cache
        self.log = client._log
        self.requests = requests
        self.keys = keys
        self.results = results
        self.bar = bar
        self.label = label
        self.counters = counters
        self.items = {keys[index]: _Item(index) for index in pending}
        self.order = [keys[index] for index in pending]
        self.unresolved = set(self.items)
        self._last_progress: tuple[int, int, int] | None = None
        self._last_progress_at = 0.0

    # -- the loop -------------------------------------------------------------------------------------
    def run(self) -> None:
        """Ask every pending request through batches until each has a result."""
        to_ask = set(self._read_outcomes(self.unresolved))
        active = {
            batch_id: batch_keys & self.unresolved
            for batch_id, batch_keys in self.cache.open_batches(
                self.unresolved, self.config.provider, self.config.model
            ).items()
        }
        covered = set().union(*active.values()) if active else set()
        if active:
            self.log.info(
                "%s: polling %d batches submitted earlier (%d of these requests); they are not submitted again",
                self.label,
                len(active),
                len(covered),
            )
        to_ask |= {key for key in self.unresolved if key not in covered}
        first_round = True
        while True:
            asking = [key for key in self.order if key in to_ask and key in self.unresolved]
            if asking:
                if not first_round and len(asking) <= self.config.batch_sync_reask_max:
                    self._ask_sync(asking)
                else:
                    active.update(self._submit(asking))
            first_round = False
            if not active:
                break
            ended = self._poll(active)
            to_ask = set()
            for batch_id, state in ended.items():
                batch_keys = active.pop(batch_id)
                if self._collect(batch_id, state, batch_keys):
                    to_ask |= set(self._read_outcomes(batch_keys & self.unresolved))
        for key in list(self.unresolved):  # defensive: every request ends with a result
            self._resolve(
                key, self._failure(ResultStatus.TRANSPORT_ERROR, "no outcome from the batches", key)
            )

    # -- results --------------------------------------------------------------------------------------
    def _resolve(self, key: str, result: LLMResult) -> None:
        if key not in self.unresolved:
            return
        self.unresolved.discard(key)
        self.results[self.items[key].index] = result
        self.bar.update(1)

    def _failure(self, status: str, reason: str, key: str) -> LLMResult:
        item = self.items[key]
        attempts = item.attempts
        return self.client._failure(
            status, reason, key, self.requests[item.index], attempts, attempts.last_answer
        )

    def _with_retries(self, function: Callable[..., _T], *args: Any) -> _T:
        failures = 0
        while True:
            try:
                return function(*args)
            except TransientProviderError as error:
                failures += 1
                if failures > self.config.max_retries:
                    raise
                delay = self.client._backoff(failures, error.retry_after_s)
                logger.debug("batch call failed (%s); retrying in %.2fs", error.reason, delay)
                time.sleep(delay)

    # -- submitting -----------------------------------------------------------------------------------
    def _encoded(self, keys: Sequence[str]) -> list[tuple[str, bytes]]:
        lines = []
        for key in keys:
            request = self.requests[self.items[key].index]
            try:
                for image in request.images:
                    image_media_type(image)
                body = self.chat.build_body(request, self.client.effective_parameters(request))
            except ValueError as error:
                self._resolve(key, self._failure(ResultStatus.REJECTED, f"images: {error}", key))
                continue
            lines.append((key, self.api.encode(key, body)))
        return lines

    def _chunks(self, lines: Sequence[tuple[str, bytes]]) -> list[list[tuple[str, bytes]]]:
        max_requests = min(self.config.batch_max_requests or self.api.max_requests, self.api.max_requests)
        max_bytes = min(self.config.batch_max_bytes or self.api.max_bytes, self.api.max_bytes)
        max_bytes = int(max_bytes * BATCH_BYTES_MARGIN)
        chunks: list[list[tuple[str, bytes]]] = []
        size = 0
        for key, line in lines:
            if not chunks or len(chunks[-1]) >= max_requests or (chunks[-1] and size + len(line) > max_bytes):
                chunks.append([])
                size = 0
            chunks[-1].append((key, line))
            size += len(line)
        return chunks

    def _submit(self, keys: Sequence[str]) -> dict[str, set[str]]:
        chunks = self._chunks(self._encoded(keys))
        submitted: dict[str, set[str]] = {}
        for number, chunk in enumerate(chunks, start=1):
            label = f"{self.label} {number}/{len(chunks)}" if len(chunks) > 1 else self.label
            chunk_keys = [key for key, _ in chunk]
            try:
                batch_id = self._with_retries(self.api.submit, [line for _, line in chunk], label)
            except PermanentProviderError as error:
                self.log.error(
                    "%s: the batch of %d requests was refused: %s", label, len(chunk), error.reason
                )
                for key in chunk_keys:
                    self._resolve(key, self._failure(ResultStatus.REJECTED, error.reason, key))
                continue
            except TransientProviderError as error:
                self.log.error("%s: could not submit %d requests: %s", label, len(chunk), error.reason)
                for key in chunk_keys:
                    self._resolve(key, self._failure(ResultStatus.TRANSPORT_ERROR, error.reason, key))
                continue
            job = BatchJob(
                batch_id, self.config.provider, self.config.model, label, len(chunk), time.time(), None, None
            )
            self.cache.record_batch(job, chunk_keys)
            submitted[batch_id] = set(chunk_keys)
            self.counters.batches_submitted += 1
            self.counters.batch_requests += len(chunk)
            self.log.info(
                "%s: submitted batch %s (%d requests, %.1f MB)",
                label,
                batch_id,
                len(chunk),
                sum(len(line) for _, line in chunk) / 1e6,
            )
        return submitted

    def _ask_sync(self, keys: Sequence[str]) -> None:
        """Re-asks too few for a new batch: one by one at the standard price, continuing each request's count."""
        self.log.info("%s: asking %d requests again one by one (standard price)", self.label, len(keys))
        self.counters.batch_sync_reasks += len(keys)
        indices = [self.items[key].index for key in keys]
        attempts_of = {self.items[key].index: self.items[key].attempts for key in keys}
        self.client._run_pending(self.requests, self.keys, indices, self.results, self.bar, attempts_of)
        self.unresolved.difference_update(keys)

    # -- polling --------------------------------------------------------------------------------------
    def _poll(self, active: dict[str, set[str]]) -> dict[str, BatchState]:
        """Poll until at least one batch ends (or none is left to poll); returns the ended ones."""
        while True:
            ended: dict[str, BatchState] = {}
            states: dict[str, BatchState] = {}
            for batch_id in list(active):
                try:
                    state = self._with_retries(self.api.poll, batch_id)
                except TransientProviderError as error:
                    reason = (
                        f"could not poll batch {batch_id}: {error.reason}; it stays recorded in the response cache "
                        "and the next run polls it again"
                    )
                    self.log.error("%s: %s", self.label, reason)
                    for key in active.pop(batch_id):
                        self._resolve(key, self._failure(ResultStatus.TRANSPORT_ERROR, reason, key))
                    continue
                except PermanentProviderError as error:
                    state = BatchState(
                        batch_id, "lost", True, error=f"batch {batch_id} is lost ({error.reason})"
                    )
                states[batch_id] = state
                if state.ended:
                    ended[batch_id] = state
            self._report_progress(states)
            if ended or not active:
                return ended
            time.sleep(self.config.batch_poll_interval_s)

    def _report_progress(self, states: Mapping[str, BatchState]) -> None:
        if not states:
            return
        jobs = {batch_id: self.cache.batch_job(batch_id) for batch_id in states}
        total = sum(
            state.total or (jobs[batch_id].requests if jobs[batch_id] else 0)
            for batch_id, state in states.items()
        )
        completed = sum(state.completed for state in states.values())
        failed = sum(state.failed for state in states.values())
        now = time.time()
        started = min(
            (state.created_at or (jobs[batch_id].submitted_at if jobs[batch_id] else now))
            for batch_id, state in states.items()
        )
        done = completed + failed
        if all(state.ended for state in states.values()):
            finish = now
        elif done and done < total:
            finish = now + (now - started) * (total - done) / done
        else:
            finish = max((state.expires_at or now) for state in states.values())
        expected = datetime.fromtimestamp(finish, UTC).strftime("%Y-%m-%d %H:%M UTC")
        self.counters.expected_finish = expected
        snapshot = (total, completed, failed)
        if snapshot != self._last_progress or now - self._last_progress_at >= PROGRESS_LOG_INTERVAL_S:
            self._last_progress, self._last_progress_at = snapshot, now
            self.log.info(
                "%s: %d batches in flight, %d requests submitted, %d completed, %d failed; expected finish %s",
                self.label,
                len(states),
                total,
                completed,
                failed,
                expected,
            )

    # -- collecting -----------------------------------------------------------------------------------
    def _collect(self, batch_id: str, state: BatchState, batch_keys: set[str]) -> bool:
        """Download an ended batch's outcomes into the cache (every request of it gets one); False on failure."""
        outcomes: dict[str, ItemOutcome] = {}
        if state.status != "lost":
            try:
                downloaded = self._with_retries(lambda: list(self.api.results(batch_id, state)))
            except TransientProviderError as error:
                reason = (
                    f"could not read the results of batch {batch_id}: {error.reason}; the next run reads them"
                )
                self.log.error("%s: %s", self.label, reason)
                for key in batch_keys:
                    self._resolve(key, self._failure(ResultStatus.TRANSPORT_ERROR, reason, key))
                return False
            except PermanentProviderError as error:
                state = BatchState(
                    batch_id, "lost", True, error=f"results of batch {batch_id} are gone ({error.reason})"
                )
                downloaded = []
            outcomes = {outcome.custom_id: outcome for outcome in downloaded}
        missing_reason = state.error or f"no result for the request in batch {batch_id} ({state.status})"
        rows = []
        for key in self.cache.batch_keys(batch_id):
            outcome = outcomes.get(key) or ItemOutcome(key, RETRYABLE, None, missing_reason)
            rows.append((key, outcome.to_json()))
        self.cache.store_outcomes(batch_id, rows, state.status)
        succeeded = sum(1 for outcome in outcomes.values() if outcome.kind == SUCCEEDED)
        self.log.info(
            "%s: batch %s %s: %d answers, %d errors or requests not run",
            self.label,
            batch_id,
            state.status,
            succeeded,
            len(rows) - succeeded,
        )
        return True

    def _read_outcomes(self, keys: set[str]) -> list[str]:
        """Read the downloaded outcomes of `keys` like sync answers; returns the keys to ask again."""
        found = self.cache.outcomes(key for key in self.order if key in keys)
        reask: list[str] = []
        for key, entries in found.items():
            if key not in self.unresolved:
                continue
            outcome = min(
                (ItemOutcome.from_json(key, text) for _, text in entries),
                key=lambda candidate: _OUTCOME_ORDER.get(candidate.kind, 3),
            )
            if self._read_one(key, outcome):
                reask.append(key)
        self.cache.delete_outcomes(found)
        return reask

    def _read_one(self, key: str, outcome: ItemOutcome) -> bool:
        """Turn one outcome into a result (True when the request is to be asked again)."""
        item = self.items[key]
        request = self.requests[item.index]
        attempts = item.attempts
        attempts.calls += 1
        error = outcome.error
        if outcome.kind == SUCCEEDED:
            self.counters.batch_completed += 1
            try:
                reply = self.chat.read_body(outcome.body, request)
            except TransientProviderError as unreadable:
                error = unreadable.reason
            else:
                return self._read_answer(key, request, reply)
        else:
            self.counters.batch_failed += 1
        if outcome.kind == ERRORED:
            self._resolve(key, self._failure(ResultStatus.REJECTED, error or "refused", key))
            return False
        attempts.transport_failures += 1
        if attempts.transport_failures > self.config.max_retries:
            reason = f"{error} (after {attempts.calls} calls)"
            self._resolve(key, self._failure(ResultStatus.TRANSPORT_ERROR, reason, key))
            return False
        return True

    def _read_answer(self, key: str, request: LLMRequest, reply: ProviderReply) -> bool:
        attempts = self.items[key].attempts
        attempts.usage = attempts.usage + reply.usage
        attempts.cost_usd += cost_usd(reply.usage, self.client._price, batch=True)
        attempts.last_answer = reply
        try:
            data = self.client._interpret(reply, request)
        except ResponseFormatError as invalid:
            attempts.invalid_answers += 1
            reason = str(invalid)
            if reply.finish_reason in ("length", "max_tokens", "refusal"):
                reason += f" (finish_reason={reply.finish_reason})"
            if attempts.invalid_answers <= self.config.invalid_json_retries:
                return True
            result = self._failure(ResultStatus.INVALID_RESPONSE, reason, key)
            self.client._store(result, request)
            self._resolve(key, result)
            return False
        result = self.client._success(data, reply, key, request, attempts)
        self.client._store(result, request)
        self._resolve(key, result)
        return False
