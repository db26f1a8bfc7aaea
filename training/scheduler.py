"""Task-adaptive scheduling (SpatialEvo's DGE): train more on the task types the policy gets wrong.

`TaskScheduler` keeps, per task type, the number of scored completions and the sum of their
correctness, and weights each type by

    w_t = max(floor, 1 - (correct_t + prior * prior_weight) / (attempts_t + prior_weight))

(a smoothed accuracy with a prior of 0.35 worth 2 samples; floor 0.05), normalised to sum to 1.
It is a plain deterministic object: every rank feeds it the same gathered updates in the same order,
so every rank holds the same weights.

`TaskAdaptiveSampler` draws training rows with those weights, laid out like TRL's `RepeatSampler`
(each prompt repeated `num_generations` times, each generation batch repeated for
`steps_per_generation * num_iterations` steps), so the GRPO trainer can use it unchanged. Draw
`k` uses a generator seeded with `(seed, k)`, so the stream is identical on every rank.

Draws happen when a generation batch is about to be generated, not when the dataloader fetches it:
dataloaders fetch ahead (accelerate keeps one batch in hand, workers prefetch more), so a row drawn at
fetch time would miss the scores of the batches still in flight, and a resumed run would draw at
other moments than an uninterrupted one. The sampler therefore yields *slots* (the position of a
prompt in its generation batch) over `ScheduledSlots`, a dataset of placeholders; the trainer
resolves the slots of generation batch `k` with `rows_of_chunk(k)` once batches `0 .. k-1` are
scored. Draw `k` thus depends only on `(seed, k)` and the scores of the batches before it, and a
run resumed from a checkpoint (scheduler state and `k` restored) draws exactly what the
uninterrupted run draws.

`TaskSchedulerCallback` writes the scheduler state and the number of generation batches drawn into
each checkpoint folder (`task_scheduler.json`); `load_task_scheduler_state` reads it back on resume.

>>> scheduler = TaskScheduler(["count", "distance"])
>>> for _ in range(20):
...     scheduler.update("count", True)
...     scheduler.update("distance", False)
>>> weights = scheduler.weights()
>>> weights["distance"] > weights["count"], round(sum(weights.values()), 6)
(True, 1.0)
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from torch.utils.data import Dataset, Sampler
from transformers import TrainerCallback

logger = logging.getLogger(__name__)

SCHEDULER_STATE_FILE = "task_scheduler.json"
SLOT_KEY = "task_scheduler_slot"


class TaskScheduler:
    """Weights of task types from their smoothed online accuracy.

    Args:
        task_types (`Sequence[str]`): the task types (order kept; duplicates removed).
        floor (`float`, *optional*, defaults to `0.05`): minimum unnormalised weight of a type.
        prior (`float`, *optional*, defaults to `0.35`): prior accuracy of every type.
        prior_weight (`float`, *optional*, defaults to `2.0`): how many samples the prior is worth.

    >>> TaskScheduler(["a", "b"]).weights()
    {'a': 0.5, 'b': 0.5}
    """

    def __init__(
        self, task_types: Sequence[str], floor: float = 0.05, prior: float = 0.35, prior_weight: float = 2.0
    ):
        unique = list(dict.fromkeys(str(task_type) for task_type in task_types))
        if not unique:
            raise ValueError("TaskScheduler needs at least one task type")
        if not 0.0 < floor <= 1.0:
            raise ValueError(f"floor must be in (0, 1], got {floor}")
        if not 0.0 <= prior <= 1.0:
            raise ValueError(f"prior must be in [0, 1], got {prior}")
        if prior_weight < 0.0:
            raise ValueError(f"prior_weight must be >= 0, got {prior_weight}")
        self.task_types = unique
        self.floor = float(floor)
        self.prior = float(prior)
        self.prior_weight = float(prior_weight)
        self.attempts = dict.fromkeys(unique, 0.0)
        self.correct = dict.fromkeys(unique, 0.0)

    def update(self, task_type: str, correct: bool | float) -> None:
        """Record one scored completion of `task_type`.

        Args:
            task_type (`str`): a known task type.
            correct (`bool` or `float`): whether it was right; a float in [0, 1] counts as partial
                credit (e.g. the mean relative accuracy of a numeric answer).

        Raises:
            `KeyError`: for a task type the scheduler was not built with.
        """
        if task_type not in self.attempts:
            raise KeyError(f"unknown task type {task_type!r}; known: {', '.join(self.task_types)}")
        value = float(correct)
        if not math.isfinite(value):
            return
        self.attempts[task_type] += 1.0
        self.correct[task_type] += min(max(value, 0.0), 1.0)

    def smoothed_accuracy(self, task_type: str) -> float:
        """`(correct + prior * prior_weight) / (attempts + prior_weight)` of one type.

        >>> TaskScheduler(["a"]).smoothed_accuracy("a")
        0.35
        """
        denominator = self.attempts[task_type] + self.prior_weight
        if denominator == 0.0:
            return self.prior
        return (self.correct[task_type] + self.prior * self.prior_weight) / denominator

    def weights(self) -> dict[str, float]:
        """Sampling weight of each task type, `max(floor, 1 - smoothed accuracy)` normalised to sum 1."""
        raw = {
            task_type: max(self.floor, 1.0 - self.smoothed_accuracy(task_type))
            for task_type in self.task_types
        }
        total = sum(raw.values())
        return {task_type: value / total for task_type, value in raw.items()}

    def state_dict(self) -> dict:
        """JSON-serialisable state."""
        return {
            "task_types": list(self.task_types),
            "floor": self.floor,
            "prior": self.prior,
            "prior_weight": self.prior_weight,
            "attempts": dict(self.attempts),
            "correct": dict(self.correct),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore a state written by `state_dict` (task types must match)."""
        if list(state["task_types"]) != self.task_types:
            raise ValueError(
                f"checkpoint task types {state['task_types']} differ from the run's {self.task_types}"
            )
        self.floor = float(state["floor"])
        self.prior = float(state["prior"])
        self.prior_weight = float(state["prior_weight"])
        self.attempts = {task_type: float(state["attempts"][task_type]) for task_type in self.task_types}
        self.correct = {task_type: float(state["correct"][task_type]) for task_type in self.task_types}


class ScheduledSlots(Dataset):
    """Placeholder rows of a scheduled training set: item `i` is `{SLOT_KEY: i}`.

    The dataloader fetches these (cheap, nothing decoded) in place of real rows; the trainer swaps
    each for the row that `TaskAdaptiveSampler.rows_of_chunk` draws for its slot.

    >>> ScheduledSlots(3)[2]
    {'task_scheduler_slot': 2}
    """

    def __init__(self, num_rows: int):
        self.num_rows = int(num_rows)

    def __len__(self) -> int:
        return self.num_rows

    def __getitem__(self, index: int) -> dict:
        return {SLOT_KEY: int(index)}


def is_slot_batch(rows: Sequence) -> bool:
    """True when `rows` are `ScheduledSlots` placeholders (every row a dict with only `SLOT_KEY`)."""
    return bool(rows) and all(isinstance(row, dict) and set(row) == {SLOT_KEY} for row in rows)


class TaskAdaptiveSampler(Sampler[int]):
    """Draw dataset rows by task type with the scheduler's weights, in TRL's `RepeatSampler` layout.

    Each chunk (one generation batch) holds `batch_size` prompts: for each, a task type is drawn with
    `scheduler.weights()` at the time of drawing, then a row of that type uniformly
    (`draw_chunk`). Iterating the sampler yields the *slots* `0 .. batch_size - 1` of each chunk in
    `RepeatSampler`'s layout (every slot `mini_repeat_count` times in a row, the chunk `repeat_count`
    times), meant for `ScheduledSlots`; `rows_of_chunk(k)` gives the rows of chunk `k` when its batch
    is generated.

    Args:
        row_task_types (`Sequence[str]`): the task type of every dataset row.
        scheduler (`TaskScheduler`): shared scheduler whose weights steer the draws.
        mini_repeat_count (`int`): repeats of each prompt (GRPO's `num_generations`).
        batch_size (`int`, *optional*, defaults to `1`): prompts per chunk.
        repeat_count (`int`, *optional*, defaults to `1`): repeats of each chunk.
        seed (`int`, *optional*, defaults to `0`): seed of the draws.

    >>> sampler = TaskAdaptiveSampler(["a", "a", "b", "b"], TaskScheduler(["a", "b"]), mini_repeat_count=2,
    ...                               batch_size=2)
    >>> list(sampler)[:4], len(sampler)
    ([0, 0, 1, 1], 8)
    >>> rows = sampler.rows_of_chunk(0)
    >>> len(rows), rows == sampler.rows_of_chunk(0)
    (2, True)
    """

    def __init__(
        self,
        row_task_types: Sequence[str],
        scheduler: TaskScheduler,
        mini_repeat_count: int,
        batch_size: int = 1,
        repeat_count: int = 1,
        seed: int = 0,
    ):
        self.scheduler = scheduler
        self.mini_repeat_count = int(mini_repeat_count)
        self.batch_size = int(batch_size)
        self.repeat_count = int(repeat_count)
        self.seed = int(seed)
        self.num_rows = len(row_task_types)
        rows_by_type: dict[str, list[int]] = {}
        for row, task_type in enumerate(row_task_types):
            rows_by_type.setdefault(str(task_type), []).append(row)
        unknown = sorted(set(rows_by_type) - set(scheduler.task_types))
        if unknown:
            raise ValueError(f"rows have task types the scheduler does not know: {unknown}")
        self.rows_by_type = {task_type: np.asarray(rows) for task_type, rows in rows_by_type.items()}
        self._drawn: dict[int, list[int]] = {}

    @property
    def chunks_per_epoch(self) -> int:
        """Chunks drawn per pass (as many prompts as the dataset has rows, in whole chunks)."""
        return self.num_rows // self.batch_size

    def __len__(self) -> int:
        return self.chunks_per_epoch * self.batch_size * self.mini_repeat_count * self.repeat_count

    def draw_chunk(self, chunk_index: int) -> list[int]:
        """The `batch_size` row indices of chunk `chunk_index` under the current weights."""
        generator = np.random.default_rng([self.seed, chunk_index])
        weights = self.scheduler.weights()
        types = [task_type for task_type in self.scheduler.task_types if task_type in self.rows_by_type]
        probabilities = np.asarray([weights[task_type] for task_type in types], dtype=np.float64)
        probabilities /= probabilities.sum()
        chosen_types = generator.choice(len(types), size=self.batch_size, p=probabilities)
        rows = []
        for type_index in chosen_types:
            candidates = self.rows_by_type[types[type_index]]
            rows.append(int(candidates[generator.integers(len(candidates))]))
        return rows

    def rows_of_chunk(self, chunk_index: int) -> list[int]:
        """The rows of chunk `chunk_index`, drawn on the first call (the scheduler as it is then), kept after.

        The trainer calls this when generation batch `chunk_index` is generated, after the batches
        before it were scored; later calls for the same chunk (other slots, repeats) return the same
        rows. Only the most recent chunks are kept.
        """
        if chunk_index not in self._drawn:
            self._drawn = {index: rows for index, rows in self._drawn.items() if index >= chunk_index - 1}
            self._drawn[chunk_index] = self.draw_chunk(chunk_index)
        return self._drawn[chunk_index]

    def __iter__(self) -> Iterator[int]:
        for _ in range(self.chunks_per_epoch):
            for _ in range(self.repeat_count):
                for slot in range(self.batch_size):
                    for _ in range(self.mini_repeat_count):
                        yield slot


def write_task_scheduler_state(
    checkpoint_dir: str | Path, scheduler: TaskScheduler, chunks_consumed: int
) -> Path:
    """Write `task_scheduler.json` (scheduler state and consumed chunks) into `checkpoint_dir`."""
    path = Path(checkpoint_dir) / SCHEDULER_STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({"scheduler": scheduler.state_dict(), "chunks_consumed": int(chunks_consumed)})
    )
    return path


def load_task_scheduler_state(checkpoint_dir: str | Path, scheduler: TaskScheduler) -> int | None:
    """Restore `scheduler` from a checkpoint folder; return the consumed chunk count (None: no state)."""
    path = Path(checkpoint_dir) / SCHEDULER_STATE_FILE
    if not path.is_file():
        return None
    state = json.loads(path.read_text())
    scheduler.load_state_dict(state["scheduler"])
    return int(state["chunks_consumed"])


class TaskSchedulerCallback(TrainerCallback):
    """Save the task scheduler's state into every checkpoint the trainer writes.

    Args:
        scheduler (`TaskScheduler`): the scheduler to save.
        chunks_consumed (`Callable[[], int]`): returns how many generation batches training has drawn.
    """

    def __init__(self, scheduler: TaskScheduler, chunks_consumed):
        self.scheduler = scheduler
        self.chunks_consumed = chunks_consumed

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            checkpoint_dir = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            write_task_scheduler_state(checkpoint_dir, self.scheduler, self.chunks_consumed())
            logger.info("saved the task scheduler state to %s", checkpoint_dir)
        return control
