"""Batch mode of :class:`~model_clients.client.LLMClient`: the uncached requests of a call go through a Batch API.

:meth:`LLMClient.run_batch <model_clients.client.LLMClient.run_batch>` hands its uncached requests to a
:class:`BatchMode` when the client's ``mode`` is ``batch`` (the interface is :mod:`model_clients.modes`); each call
is one :class:`BatchRun`. The requests, their cache keys, the answers'
checks and the cache entries are those of sync mode; only the transport and the price differ. A run:

1. reads the outcomes an earlier run downloaded but did not read (a kill between the two);
2. finds the batches an earlier run created and did not collect that hold some of its requests, and polls
   them: those it recorded, and those it meant to create (an intent recorded before the create call) that
   the provider's list of recent batches shows (by the submission key in the batch's metadata on OpenAI; by
   creation time and number of requests on Anthropic, whose batches take no metadata). A resumed run never
   submits those requests again;
3. submits the other requests, split under the provider's limits (requests and bytes per batch, or the
   client's ``batch_max_requests`` / ``batch_max_bytes``), encoding one batch at a time; with
   ``batch_max_enqueued_tokens``, a batch that would put more prompt tokens in flight waits until one ends. Each batch is
   recorded as an intent (a key generated here, sent in its metadata where the provider keeps it) before the
   create call, and its id with its requests' keys right after, before the first poll. A create call that
   fails in transit (a timeout, a dropped connection) may have created the batch: before trying again, the
   provider's recent batches are searched for it;
4. polls every ``batch_poll_interval_s`` seconds all the batches in flight together, logging submitted,
   completed and failed requests and, once some are done, the expected finish; each batch that ends is
   collected at once: its outcomes go to the cache in one transaction, then each request is read like a sync
   answer (schema, ``answer_check``);
5. asks again, in a new batch, or one by one at the standard price when there are at most
   ``batch_sync_reask_max`` of them: once, the requests an expired, cancelled or failed batch never ran and
   those that failed with a retryable error (429, 5xx), and answers outside the schema (up to
   ``invalid_json_retries`` times, as in sync mode). A request the API refused (400...) is not asked again.
   Every request ends as an :class:`~model_clients.records.LLMResult`; one that still failed goes to the
   stage's quarantine with its reason.

With a budget (``max_cost_usd``), each submission (and each re-ask sent one by one) first holds its estimate
of the budget: a batch that could take the spend past it is not submitted, the batches in flight are
collected (what they answered is paid and cached), and the call raises
:class:`~model_clients.budget.BudgetExceededError`.

Batch calls that fail in transit (upload, poll, results, the list) are retried with the client's backoff;
a batch that cannot be polled after the retries stays recorded, its requests fail for this run, and the
next run polls it again.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from model_clients.answers import RequestAttempts
from model_clients.batches import (
    BATCH_BYTES_MARGIN,
    ERRORED,
    RETRYABLE,
    SUCCEEDED,
    BatchState,
    ItemOutcome,
    RemoteBatch,
)
from model_clients.budget import BudgetExceededError
from model_clients.cache import BatchIntent, BatchJob
from model_clients.modes import ModeServices, PendingWork
from model_clients.pricing import cost_usd
from model_clients.providers import (
    PermanentProviderError,
    ProviderReply,
    TransientProviderError,
    image_media_type,
)
from model_clients.records import LLMRequest, LLMResult, ResultStatus
from model_clients.schema import ResponseFormatError

if TYPE_CHECKING:
    from model_clients.batches import BatchAPI
    from model_clients.sync_mode import SyncMode

__all__ = ["BatchMode", "BatchRun", "RequestAttempts"]

logger = logging.getLogger(__name__)

PROGRESS_LOG_INTERVAL_S = 300.0
"""Batch progress is logged when it changes, and at least this often while nothing changes."""
CLOCK_SLACK_S = 600.0
"""How much earlier than an intent's recorded time its batch may show in the provider's list (clock skew)."""
_OUTCOME_ORDER = {SUCCEEDED: 0, ERRORED: 1, RETRYABLE: 2}
_T = TypeVar("_T")


@dataclass
class _Item:
    index: int
    attempts: RequestAttempts = field(default_factory=RequestAttempts)
    asked_again_after_failure: bool = False
    """A retryable failure (not run, 429, 5xx) was asked again once already: the next one is final."""


class BatchMode:
    """Batch mode: the uncached requests of each call go through the provider's Batch API.

    Args:
        services (`ModeServices`): what the client hands over.
        api (`BatchAPI`): the provider's Batch API adapter.
        sync (`SyncMode`): sends the re-asks too few for a new batch one by one.
    """

    def __init__(self, services: ModeServices, api: BatchAPI, sync: SyncMode) -> None:
        self.services = services
        self.api = api
        self.sync = sync

    def run(self, work: PendingWork) -> None:
        """Every pending request of `work` through batches (see the module docstring)."""
        BatchRun(self.services, self.api, self.sync, work).run()


class BatchRun:
    """The batch-mode work of one `run_batch` call (see the module docstring).

    Args:
        services (`ModeServices`): settings, cache, chat adapter, answer reading, budget, backoff.
        api (`BatchAPI`): the provider's Batch API adapter.
        sync (`SyncMode`): sends the re-asks too few for a new batch one by one.
        work (`PendingWork`): the call's requests, keys, pending indices, results, progress bar, label and
            counters (which receive the batches, requests, outcomes, waits and expected finish).
    """

    def __init__(self, services: ModeServices, api: BatchAPI, sync: SyncMode, work: PendingWork) -> None:
        self.services = services
        self.config = services.config
        self.api = api
        self.sync = sync
        self.work = work
        self.chat: Any = services.provider
        self.cache = services.cache
        self.log = services.log
        self.requests = work.requests
        self.keys = work.keys
        self.results = work.results
        self.bar = work.bar
        self.label = work.label
        self.counters = work.counters
        pending = work.pending
        keys = work.keys
        self.items = {keys[index]: _Item(index) for index in pending}
        self.order = [keys[index] for index in pending]
        self.unresolved = set(self.items)
        self.reserved: dict[str, float] = {}
        """The budget each batch in flight holds (its estimate), released when it is collected."""
        self.stop: str | None = None
        """Why the budget stopped this run (nothing more is submitted; raised once the batches in flight end)."""
        self.deferred: list[str] = []
        """Requests whose batch waits for room under ``batch_max_enqueued_tokens``."""
        self.enqueued: dict[str, int] = {}
        """Estimated prompt tokens of each batch in flight (for ``batch_max_enqueued_tokens``)."""
        self._last_progress: tuple[int, int, int] | None = None
        self._last_progress_at = 0.0

    # -- the loop -------------------------------------------------------------------------------------
    def run(self) -> None:
        """Ask every pending request through batches until each has a result (or the budget stops the run)."""
        to_ask = set(self._read_outcomes(self.unresolved))
        active = self._adopt_unrecorded(self.unresolved)
        for batch_id, batch_keys in self.cache.open_batches(
            self.unresolved, self.config.provider, self.config.model
        ).items():
            active.setdefault(batch_id, batch_keys & self.unresolved)
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
            covered = set().union(*active.values()) if active else set()
            asking = [
                key for key in self.order if key in to_ask and key in self.unresolved and key not in covered
            ]
            if asking and self.stop is None:
                if not first_round and len(asking) <= self.config.batch_sync_reask_max:
                    self._ask_sync(asking)
                else:
                    active.update(self._submit(asking))
            if self.deferred and self.stop is None:  # first asks that waited for room: never one by one
                waiting, self.deferred = [key for key in self.deferred if key in self.unresolved], []
                active.update(self._submit(waiting))
            first_round = False
            if not active:
                break
            ended = self._poll(active)
            to_ask = set()
            for batch_id, state in ended.items():
                batch_keys = active.pop(batch_id)
                stored = self._collect(batch_id, state, batch_keys)
                if stored is not None:
                    to_ask |= set(self._read_outcomes(stored & self.unresolved))
        if self.stop is not None:
            raise self.services.budget.exceeded(self.stop)
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
        return self.services.answers.failure(
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
                delay = self.services.backoff(failures, error.retry_after_s)
                logger.debug("batch call failed (%s); retrying in %.2fs", error.reason, delay)
                time.sleep(delay)

    # -- batches created and never recorded -------------------------------------------------------------
    def _match(
        self, intent: BatchIntent, remote: Sequence[RemoteBatch], excluded: set[str]
    ) -> RemoteBatch | None:
        """The provider's batch of an intent: its submission key (OpenAI), else the earliest batch of its size
        created since the intent (Anthropic), among the batches no record holds."""
        candidates = [batch for batch in remote if batch.batch_id not in excluded]
        if self.api.lists_intent_keys:
            matching = [batch for batch in candidates if batch.intent_key == intent.intent_key]
        else:
            matching = [
                batch
                for batch in candidates
                if batch.requests == intent.requests and batch.created_at >= intent.created_at - CLOCK_SLACK_S
            ]
        return min(matching, key=lambda batch: batch.created_at, default=None)

    def _remote_batches(self, since: float) -> tuple[list[RemoteBatch], set[str]]:
        """The provider's batches created since `since`, and the ids among them that are recorded."""
        remote = self._with_retries(self.api.recent_batches, since - CLOCK_SLACK_S)
        return remote, self.cache.known_batch_ids(batch.batch_id for batch in remote)

    def _adopt_unrecorded(self, keys: set[str]) -> dict[str, set[str]]:
        """Batches an earlier run meant to create for some of `keys` and never recorded: found and recorded
        (polled like the others), or their intents dropped when the provider holds no such batch."""
        intents = self.cache.open_intents(keys, self.config.provider, self.config.model)
        if not intents:
            return {}
        try:
            remote, known = self._remote_batches(min(intent.created_at for intent in intents))
        except (TransientProviderError, PermanentProviderError) as error:
            reason = (
                f"could not list the provider's batches to find {len(intents)} batches an earlier run created and "
                f"did not record ({error.reason}); nothing is submitted again before they are found"
            )
            self.log.error("%s: %s", self.label, reason)
            for intent_keys in intents.values():
                for key in intent_keys:
                    self._resolve(key, self._failure(ResultStatus.TRANSPORT_ERROR, reason, key))
            return {}
        adopted: dict[str, set[str]] = {}
        for intent in sorted(intents, key=lambda intent: intent.created_at):
            match = self._match(intent, remote, known)
            if match is None:
                self.cache.drop_intent(intent.intent_key)
                self.log.info(
                    "%s: the batch %s of %d requests an earlier run was creating never reached the provider",
                    self.label,
                    intent.label,
                    intent.requests,
                )
                continue
            known.add(match.batch_id)
            request_keys = self.cache.intent_keys(intent.intent_key)
            job = BatchJob(
                match.batch_id,
                self.config.provider,
                self.config.model,
                intent.label,
                intent.requests,
                match.created_at,
                None,
                None,
            )
            self.cache.record_batch(job, request_keys, intent.intent_key)
            adopted[match.batch_id] = set(request_keys) & self.unresolved
            self.log.warning(
                "%s: found batch %s (%d requests) that an earlier run created and did not record; polling it "
                "instead of submitting its requests again",
                self.label,
                match.batch_id,
                intent.requests,
            )
        return adopted

    # -- submitting -----------------------------------------------------------------------------------
    def _chunks(self, keys: Sequence[str]) -> Iterator[tuple[list[str], list[bytes]]]:
        """The requests encoded and split under the limits, one batch at a time (only one batch's lines in memory)."""
        max_requests = min(self.config.batch_max_requests or self.api.max_requests, self.api.max_requests)
        max_bytes = min(self.config.batch_max_bytes or self.api.max_bytes, self.api.max_bytes)
        max_bytes = int(max_bytes * BATCH_BYTES_MARGIN)
        chunk_keys: list[str] = []
        lines: list[bytes] = []
        size = 0
        for key in keys:
            request = self.requests[self.items[key].index]
            try:
                for image in request.images:
                    image_media_type(image)
                body = self.chat.build_body(request, self.services.effective_parameters(request))
            except ValueError as error:
                self._resolve(key, self._failure(ResultStatus.REJECTED, f"images: {error}", key))
                continue
            line = self.api.encode(key, body)
            if chunk_keys and (len(chunk_keys) >= max_requests or size + len(line) > max_bytes):
                yield chunk_keys, lines
                chunk_keys, lines, size = [], [], 0
            chunk_keys.append(key)
            lines.append(line)
            size += len(line)
        if chunk_keys:
            yield chunk_keys, lines

    def _submit(self, keys: Sequence[str]) -> dict[str, set[str]]:
        """Submit `keys` in batches (one wait for all of them); nothing when their estimate could pass the budget.

        A batch that would put more than ``batch_max_enqueued_tokens`` prompt tokens in flight waits (with the
        requests after it) until a batch in flight ends.
        """
        costs = self.services.request_costs(self.requests, [self.items[key].index for key in keys], True)
        held = sum(costs.values())
        if not self.services.budget.reserve(held):
            self.stop = self.services.budget.stop_message(
                self.label, f"a batch of {len(keys):,} requests", held
            )
            return {}
        limit = self.config.batch_max_enqueued_tokens
        position = {key: number for number, key in enumerate(keys)}
        submitted: dict[str, set[str]] = {}
        for number, (chunk_keys, lines) in enumerate(self._chunks(keys), start=1):
            tokens = self._prompt_tokens(chunk_keys) if limit else 0
            if limit and self.enqueued and sum(self.enqueued.values()) + tokens > limit:
                self.deferred = [*chunk_keys, *keys[position[chunk_keys[-1]] + 1 :]]
                self.log.info(
                    "%s: %d requests wait for batches in flight to end (batch_max_enqueued_tokens %d)",
                    self.label,
                    len(self.deferred),
                    limit,
                )
                break
            label = f"{self.label} #{number}" if number > 1 or len(chunk_keys) < len(keys) else self.label
            reserved = sum(costs.get(self.items[key].index, 0.0) for key in chunk_keys)
            held -= reserved
            batch_id = self._submit_chunk(label, chunk_keys, lines)
            if batch_id is None:
                self.services.budget.settle(reserved, 0.0)
                continue
            self.reserved[batch_id] = reserved
            self.enqueued[batch_id] = tokens
            submitted[batch_id] = set(chunk_keys)
            self.counters.batches_submitted += 1
            self.counters.batch_requests += len(chunk_keys)
            self.log.info(
                "%s: submitted batch %s (%d requests, %.1f MB)",
                label,
                batch_id,
                len(chunk_keys),
                sum(len(line) for line in lines) / 1e6,
            )
        self.services.budget.settle(
            max(held, 0.0), 0.0
        )  # what deferred requests and those refused while encoding held
        return submitted

    def _prompt_tokens(self, keys: Sequence[str]) -> int:
        """Estimated prompt tokens of some requests (what counts toward a provider's enqueued-token limit)."""
        estimator = self.services.estimator
        return sum(
            estimator.prompt_tokens(request, self.services.effective_parameters(request))
            for request in (self.requests[self.items[key].index] for key in keys)
        )

    def _submit_chunk(self, label: str, chunk_keys: list[str], lines: list[bytes]) -> str | None:
        """One batch: its intent recorded, its input prepared, the batch created and recorded; None on failure."""
        intent = BatchIntent(
            uuid.uuid4().hex, self.config.provider, self.config.model, label, len(chunk_keys), time.time()
        )
        self.cache.record_intent(intent, chunk_keys)
        try:
            prepared = self._with_retries(self.api.prepare, lines, label)
        except (PermanentProviderError, TransientProviderError) as error:
            self.cache.drop_intent(intent.intent_key)  # no create call was made
            self._fail_chunk(label, chunk_keys, error)
            return None
        try:
            batch_id = self._create(prepared, intent)
        except PermanentProviderError as error:
            self.cache.drop_intent(intent.intent_key)
            self._fail_chunk(label, chunk_keys, error)
            return None
        except TransientProviderError as error:  # the batch may exist: the intent stays for the next run
            self._fail_chunk(
                label, chunk_keys, error, " (the next run looks for the batch before submitting)"
            )
            return None
        job = BatchJob(
            batch_id, self.config.provider, self.config.model, label, len(chunk_keys), time.time(), None, None
        )
        self.cache.record_batch(job, chunk_keys, intent.intent_key)
        return batch_id

    def _create(self, prepared: Any, intent: BatchIntent) -> str:
        """The create call; one that fails in transit may have created the batch, so the provider's recent batches
        are searched for it before the call is made again."""
        failures = 0
        while True:
            try:
                return self.api.create(prepared, intent.label, intent.intent_key)
            except TransientProviderError as error:
                failures += 1
                delay = self.services.backoff(failures, error.retry_after_s)
                time.sleep(delay)  # a create the provider is still handling shows in its list after it
                remote, known = self._remote_batches(intent.created_at)
                found = self._match(intent, remote, known)
                if found is not None:
                    self.log.warning(
                        "%s: the create call failed (%s) but the provider holds batch %s: it is not created again",
                        intent.label,
                        error.reason,
                        found.batch_id,
                    )
                    return found.batch_id
                if failures > self.config.max_retries:
                    raise
                logger.debug(
                    "create call failed (%s); the batch does not exist; creating it again", error.reason
                )

    def _fail_chunk(self, label: str, chunk_keys: Sequence[str], error: Exception, note: str = "") -> None:
        reason = getattr(error, "reason", str(error))
        if isinstance(error, PermanentProviderError):
            self.log.error("%s: the batch of %d requests was refused: %s", label, len(chunk_keys), reason)
            status = ResultStatus.REJECTED
        else:
            self.log.error("%s: could not submit %d requests: %s%s", label, len(chunk_keys), reason, note)
            status = ResultStatus.TRANSPORT_ERROR
        for key in chunk_keys:
            self._resolve(key, self._failure(status, reason + note, key))

    def _ask_sync(self, keys: Sequence[str]) -> None:
        """Re-asks too few for a new batch: one by one at the standard price, continuing each request's count."""
        self.log.info("%s: asking %d requests again one by one (standard price)", self.label, len(keys))
        self.counters.batch_sync_reasks += len(keys)
        indices = [self.items[key].index for key in keys]
        attempts_of = {self.items[key].index: self.items[key].attempts for key in keys}
        costs = self.services.request_costs(self.requests, indices, False)
        try:
            self.sync.run_requests(self.work, indices, attempts_of, costs)
        except BudgetExceededError as error:  # the batches in flight are still collected
            self.stop = str(error)
        self.unresolved.difference_update(
            key for key in keys if self.results[self.items[key].index] is not None
        )

    # -- polling --------------------------------------------------------------------------------------
    def _poll(self, active: dict[str, set[str]]) -> dict[str, BatchState]:
        """Poll until at least one batch ends (or none is left to poll); returns the ended ones."""
        self.counters.batch_waits += 1
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
                    self.services.budget.settle(self.reserved.pop(batch_id, 0.0), 0.0)
                    self.enqueued.pop(batch_id, None)
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
        recorded = {batch_id: job for batch_id, job in jobs.items() if job is not None}
        total = sum(
            state.total or (recorded[batch_id].requests if batch_id in recorded else 0)
            for batch_id, state in states.items()
        )
        completed = sum(state.completed for state in states.values())
        failed = sum(state.failed for state in states.values())
        now = time.time()
        started = min(
            (state.created_at or (recorded[batch_id].submitted_at if batch_id in recorded else now))
            for batch_id, state in states.items()
        )
        done = completed + failed
        if all(state.ended for state in states.values()):
            expected = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%d %H:%M UTC")
        elif done and done < total:
            finish = now + (now - started) * (total - done) / done
            expected = datetime.fromtimestamp(finish, UTC).strftime("%Y-%m-%d %H:%M UTC")
        else:  # nothing done yet: no basis for an estimate, only the providers' deadline
            expires = [state.expires_at for state in states.values() if state.expires_at]
            deadline = (
                f" (they expire {datetime.fromtimestamp(max(expires), UTC).strftime('%Y-%m-%d %H:%M UTC')})"
                if expires
                else ""
            )
            expected = f"unknown until some requests are done{deadline}"
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
    def _collect(self, batch_id: str, state: BatchState, batch_keys: set[str]) -> set[str] | None:
        """Download an ended batch's outcomes into the cache (every request of it gets one); the keys whose
        outcomes were stored, or None when the results could not be read."""
        self.services.budget.settle(
            self.reserved.pop(batch_id, 0.0), 0.0
        )  # its answers count as they are read
        self.enqueued.pop(batch_id, None)
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
                return None
            except PermanentProviderError as error:
                state = BatchState(
                    batch_id, "lost", True, error=f"results of batch {batch_id} are gone ({error.reason})"
                )
                downloaded = []
            outcomes = {outcome.custom_id: outcome for outcome in downloaded}
        missing_reason = state.error or f"no result for the request in batch {batch_id} ({state.status})"
        recorded = self.cache.batch_keys(batch_id)
        # A batch found by its size (Anthropic) may hold other requests of this run than its intent said.
        strays = [key for key in outcomes if key in self.items and key not in set(recorded)]
        if strays:
            self.log.warning(
                "%s: batch %s answered %d requests its record does not name; they are read as its answers",
                self.label,
                batch_id,
                len(strays),
            )
        rows = []
        for key in [*recorded, *strays]:
            outcome = outcomes.get(key) or ItemOutcome(key, RETRYABLE, None, missing_reason, ran=False)
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
        return {key for key, _ in rows}

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
        """Turn one outcome into a result (True when the request is to be asked again).

        A request the provider ran counts as a call (an answer, or an error of its own); one an expired,
        cancelled or failed batch never ran does not. A retryable failure is asked again once; the second
        ends the request (transport error, quarantined by the stage with this reason).
        """
        item = self.items[key]
        request = self.requests[item.index]
        attempts = item.attempts
        if outcome.ran:
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
        if item.asked_again_after_failure:
            reason = f"{error} (asked again once after {'a failure' if outcome.ran else 'not being run'}; failed again)"
            self._resolve(key, self._failure(ResultStatus.TRANSPORT_ERROR, reason, key))
            return False
        item.asked_again_after_failure = True
        return True

    def _read_answer(self, key: str, request: LLMRequest, reply: ProviderReply) -> bool:
        attempts = self.items[key].attempts
        paid = cost_usd(reply.usage, self.services.price, batch=True)
        self.services.budget.settle(0.0, paid)
        attempts.usage = attempts.usage + reply.usage
        attempts.cost_usd += paid
        attempts.last_answer = reply
        try:
            data = self.services.answers.interpret(reply, request)
        except ResponseFormatError as invalid:
            attempts.invalid_answers += 1
            reason = str(invalid)
            if reply.finish_reason in ("length", "max_tokens", "refusal"):
                reason += f" (finish_reason={reply.finish_reason})"
            if attempts.invalid_answers <= self.config.invalid_json_retries:
                return True
            result = self._failure(ResultStatus.INVALID_RESPONSE, reason, key)
            self.services.answers.store(result, request)
            self._resolve(key, result)
            return False
        result = self.services.answers.success(data, reply, key, request, attempts)
        self.services.answers.store(result, request)
        self._resolve(key, result)
        return False
