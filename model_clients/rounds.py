"""Stages that ask their model in rounds, run over many shards at once: one call per round, whatever the shards.

A paid stage asks in rounds that depend on each other: pass@2 asks two tries of every question, then two more of
the questions both tries missed; generation asks one request per image, then asks again the images whose items
broke the rules. In batch mode each call of :meth:`~model_clients.client.LLMClient.run_batch` is a wait for
batches (minutes to hours), so a stage over many shards must not wait shard after shard: a stage's work per shard
is a *task*, a generator that yields each round's requests (:class:`RequestRound`) and receives their results,
and :func:`run_rounds` runs the tasks of every shard of a run together, round by round. Round ``k`` of every shard
goes out in one call (one set of batches, submitted together, polled together), so the stage waits once per round:
its number of rounds, whatever the number of shards. A task also says up front what it may ask at most
(:meth:`RoundsTask.planned_requests`), so the stage's budget is checked once, before the first request, against
every round of every shard.

>>> def task(words):
...     answers = yield RequestRound("round 1", [LLMRequest("t", "v1", word) for word in words])
...     return [answer.data for answer in answers]
>>> # run_rounds(client, {"00": Planned(task(["a"])), "01": Planned(task(["b", "c"]))}, "stage")  -> one call
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from model_clients.records import LLMRequest, LLMResult

if TYPE_CHECKING:
    from model_clients.client import LLMClient, UsageSummary

__all__ = ["RequestRound", "RoundsTask", "TaskResult", "run_offline", "run_rounds", "shard_metadata"]

logger = logging.getLogger(__name__)

STAGE_FIGURES = (
    "batches_submitted",
    "batch_requests",
    "batch_completed",
    "batch_failed",
    "batch_sync_reasks",
    "batch_waits",
    "expected_finish",
    "estimated_requests",
    "estimated_prompt_tokens",
    "estimated_completion_tokens",
    "estimated_cost_usd",
)
"""Figures of a stage run together (its batches, its estimate) that no one shard owns."""

_Value = TypeVar("_Value")
_Value_co = TypeVar("_Value_co", covariant=True)
_Key = TypeVar("_Key")


@dataclass(frozen=True)
class RequestRound:
    """The requests a task asks in one round, and the round's name for the log and the progress bar."""

    label: str
    requests: Sequence[LLMRequest]


Rounds = Generator[RequestRound, list[LLMResult], _Value]
"""A task's rounds: yields a round's requests, receives their results (in order), returns the task's value."""


class RoundsTask(Protocol[_Value_co]):
    """A shard's work in rounds, with what it may ask at most."""

    def planned_requests(self) -> tuple[Sequence[LLMRequest], Sequence[LLMRequest]]:
        """The requests of the first round, and those of the later rounds at most (for the budget)."""
        ...

    def rounds(self) -> Rounds[_Value_co]:
        """The task's rounds (see :data:`Rounds`)."""
        ...


@dataclass
class TaskResult(Generic[_Value]):
    """What a task returned, and the usage of its own requests (for its shard's metadata and failure check)."""

    value: _Value
    summary: UsageSummary
    rounds: int = 0


@dataclass
class _Running(Generic[_Value]):
    rounds: Rounds[_Value]
    summary: UsageSummary
    current: RequestRound | None = None
    asked: int = 0
    results: list[LLMResult] = field(default_factory=list)

    @property
    def asking(self) -> RequestRound:
        """The round the task asks now: set by its first step, before it is among the running tasks."""
        assert self.current is not None, "a running task has asked its first round"
        return self.current


def run_offline(rounds: Rounds[_Value]) -> _Value:
    """The value of a task that asks no model (its generator returns without yielding)."""
    try:
        asked = next(rounds)
    except StopIteration as done:
        return done.value
    raise ValueError(f"the task asked a model ({asked.label}) but no LLM client was given")


def run_rounds(
    client: LLMClient,
    tasks: Mapping[_Key, RoundsTask[_Value]],
    label: str,
    *,
    progress: bool = False,
    check_budget: bool = True,
) -> dict[_Key, TaskResult[_Value]]:
    """Run every task round by round, each round of all tasks in one ``run_batch`` call.

    Args:
        client (`LLMClient`): the stage's client (its cache, budget and mode).
        tasks (`Mapping`): the tasks by shard (or any key).
        label (`str`): the stage, as the log and a budget refusal name it.
        progress (`bool`, *optional*): progress bars.
        check_budget (`bool`, *optional*, defaults to `True`): estimate what every task may ask at most first,
            and refuse before the first request when it could pass the client's ``max_cost_usd``.

    Returns:
        `dict`: per key, the task's value and the usage of its requests.
    """
    from model_clients.client import UsageSummary

    if check_budget:
        first: list[LLMRequest] = []
        later: list[LLMRequest] = []
        for task in tasks.values():
            task_first, task_later = task.planned_requests()
            first.extend(task_first)
            later.extend(task_later)
        client.estimate(first, label=label, check_budget=True, later=later)
    provider, model, mode = client.config.provider, client.config.model, client.config.mode
    running: dict[_Key, _Running[_Value]] = {}
    finished: dict[_Key, TaskResult[_Value]] = {}

    def advance(key: _Key, state: _Running[_Value], results: list[LLMResult] | None) -> None:
        try:
            state.current = next(state.rounds) if results is None else state.rounds.send(results)
        except StopIteration as done:
            finished[key] = TaskResult(done.value, state.summary, state.asked)
            running.pop(key, None)
            return
        running[key] = state

    for key, task in tasks.items():
        advance(key, _Running(task.rounds(), UsageSummary(provider=provider, model=model, mode=mode)), None)
    number = 0
    while running:
        number += 1
        states = list(running.items())
        requests = [request for _, state in states for request in state.asking.requests]
        names = sorted({state.asking.label for _, state in states})
        description = ", ".join(names) + (f" ({len(states)} shards)" if len(states) > 1 else "")
        results = client.run_batch(requests, progress=progress, description=description) if requests else []
        logger.debug("%s: call %d, %d requests of %d tasks", label, number, len(requests), len(states))
        offset = 0
        for key, state in states:
            count = len(state.asking.requests)
            answered = results[offset : offset + count]
            offset += count
            for result in answered:
                state.summary.add(result)
            if count:
                state.asked += 1
            advance(key, state, answered)
    return finished


def shard_metadata(summary: UsageSummary, client: LLMClient) -> dict[str, int | float | str]:
    """The metadata of one shard of a stage whose shards ran together: the shard's own requests, tokens, cost and
    failures (``llm_*``), and the figures of the whole run that no one shard owns (``llm_stage_*``: its batches,
    waits and estimate, the same on every shard).
    """
    own = summary.as_metadata()
    stage = client.summary.as_metadata()
    for name in STAGE_FIGURES:
        own.pop(f"llm_{name}", None)
        if f"llm_{name}" in stage:
            own[f"llm_stage_{name}"] = stage[f"llm_{name}"]
    own["llm_stage_cost_usd"] = stage["llm_cost_usd"]
    if client.stage_estimate is not None:
        own["llm_stage_upper_bound_usd"] = round(client.stage_estimate.upper_bound_usd, 6)
    return own
