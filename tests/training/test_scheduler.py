"""The DGE task scheduler, its sampler and the checkpoint state."""

from __future__ import annotations

from collections import Counter

import pytest

from training.scheduler import (
    SCHEDULER_STATE_FILE,
    SLOT_KEY,
    ScheduledSlots,
    TaskAdaptiveSampler,
    TaskScheduler,
    TaskSchedulerCallback,
    load_task_scheduler_state,
    write_task_scheduler_state,
)


class TestTaskScheduler:
    def test_starts_uniform(self):
        assert TaskScheduler(["a", "b", "c"]).weights() == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})

    def test_weight_formula(self):
        scheduler = TaskScheduler(["a", "b"])
        for correct in (True, True, False):
            scheduler.update("a", correct)
        # a: (2 + 0.35 * 2) / (3 + 2) = 0.54 -> 0.46; b: prior 0.35 -> 0.65
        assert scheduler.smoothed_accuracy("a") == pytest.approx(0.54)
        assert scheduler.weights() == pytest.approx({"a": 0.46 / 1.11, "b": 0.65 / 1.11})

    def test_weight_shifts_to_the_task_that_keeps_failing(self):
        scheduler = TaskScheduler(["count", "distance", "direction"])
        history = []
        for _ in range(30):
            scheduler.update("count", True)
            scheduler.update("direction", True)
            scheduler.update("distance", False)
            history.append(scheduler.weights()["distance"])
        assert history == sorted(history)
        assert scheduler.weights()["distance"] > 0.8

    def test_floor_keeps_solved_tasks_alive(self):
        scheduler = TaskScheduler(["easy", "hard"])
        for _ in range(1000):
            scheduler.update("easy", True)
        weights = scheduler.weights()
        assert weights["easy"] == pytest.approx(0.05 / (0.05 + 0.65))

    def test_partial_credit_and_nan(self):
        scheduler = TaskScheduler(["numeric"])
        scheduler.update("numeric", 0.5)
        scheduler.update("numeric", float("nan"))  # unscorable: ignored
        assert scheduler.attempts["numeric"] == 1.0 and scheduler.correct["numeric"] == 0.5

    def test_unknown_task_type_raises(self):
        with pytest.raises(KeyError, match="unknown task type"):
            TaskScheduler(["a"]).update("b", True)

    def test_state_round_trip(self):
        scheduler = TaskScheduler(["a", "b"], floor=0.1)
        scheduler.update("a", False)
        restored = TaskScheduler(["a", "b"])
        restored.load_state_dict(scheduler.state_dict())
        assert restored.weights() == scheduler.weights() and restored.floor == 0.1

    def test_state_with_other_task_types_is_refused(self):
        with pytest.raises(ValueError, match="task types"):
            TaskScheduler(["a"]).load_state_dict(TaskScheduler(["b"]).state_dict())


class TestTaskAdaptiveSampler:
    ROWS = ["a"] * 10 + ["b"] * 10

    def test_layout_matches_trl_repeat_sampler(self):
        sampler = TaskAdaptiveSampler(
            self.ROWS, TaskScheduler(["a", "b"]), mini_repeat_count=2, batch_size=3, repeat_count=2
        )
        slots = list(sampler)
        assert len(slots) == len(sampler) == (20 // 3) * 3 * 2 * 2
        # slots of a generation batch: each prompt twice in a row, the chunk repeated, every chunk alike
        assert slots[:12] == [0, 0, 1, 1, 2, 2] * 2
        assert slots == slots[:12] * (20 // 3)

    def test_iterating_draws_nothing(self):
        """The dataloader fetches ahead; only `rows_of_chunk` (at generation time) may draw."""
        scheduler = TaskScheduler(["a", "b"])
        sampler = TaskAdaptiveSampler(self.ROWS, scheduler, mini_repeat_count=1, batch_size=4, seed=3)
        fetched_ahead = list(sampler)
        draws = []
        for chunk in range(3):
            draws.append(sampler.rows_of_chunk(chunk))
            scheduler.update("b", False)
        # the same as drawing chunk by chunk after each update, whatever was fetched before
        scheduler_again = TaskScheduler(["a", "b"])
        again = TaskAdaptiveSampler(self.ROWS, scheduler_again, mini_repeat_count=1, batch_size=4, seed=3)
        expected = []
        for chunk in range(3):
            expected.append(again.draw_chunk(chunk))
            scheduler_again.update("b", False)
        assert draws == expected and fetched_ahead == [0, 1, 2, 3] * 5

    def test_rows_of_a_chunk_are_drawn_once(self):
        scheduler = TaskScheduler(["a", "b"])
        sampler = TaskAdaptiveSampler(self.ROWS, scheduler, mini_repeat_count=1, batch_size=8, seed=1)
        first = sampler.rows_of_chunk(0)
        for _ in range(50):
            scheduler.update("a", True)
        assert sampler.rows_of_chunk(0) == first  # other slots of the same batch: same rows

    def test_slots_dataset(self):
        slots = ScheduledSlots(5)
        assert len(slots) == 5 and slots[3] == {SLOT_KEY: 3}

    def test_identical_on_every_rank(self):
        draws = []
        for _ in range(2):
            scheduler = TaskScheduler(["a", "b"])
            sampler = TaskAdaptiveSampler(self.ROWS, scheduler, mini_repeat_count=1, batch_size=4, seed=7)
            stream = []
            for chunk in range(5):
                stream += sampler.draw_chunk(chunk)
                scheduler.update("b", False)
            draws.append(stream)
        assert draws[0] == draws[1]

    def test_draws_follow_the_weights(self):
        scheduler = TaskScheduler(["a", "b"])
        for _ in range(200):
            scheduler.update("a", True)
            scheduler.update("b", False)
        sampler = TaskAdaptiveSampler(self.ROWS, scheduler, mini_repeat_count=1, batch_size=20)
        types = Counter(self.ROWS[row] for chunk in range(20) for row in sampler.draw_chunk(chunk))
        assert types["b"] > 10 * types["a"]

    def test_resume_continues_the_stream(self):
        scheduler = TaskScheduler(["a", "b"])
        sampler = TaskAdaptiveSampler(self.ROWS, scheduler, mini_repeat_count=1, batch_size=4, seed=3)
        full = [sampler.rows_of_chunk(chunk) for chunk in range(4)]
        resumed = TaskAdaptiveSampler(self.ROWS, scheduler, mini_repeat_count=1, batch_size=4, seed=3)
        assert [resumed.rows_of_chunk(chunk) for chunk in (2, 3)] == full[2:]

    def test_rows_of_unknown_type_are_refused(self):
        with pytest.raises(ValueError, match="does not know"):
            TaskAdaptiveSampler(["a", "z"], TaskScheduler(["a"]), mini_repeat_count=1)


def test_checkpoint_state_round_trip(tmp_path):
    scheduler = TaskScheduler(["a", "b"])
    scheduler.update("a", True)
    write_task_scheduler_state(tmp_path, scheduler, chunks_consumed=5)
    restored = TaskScheduler(["a", "b"])
    assert load_task_scheduler_state(tmp_path, restored) == 5
    assert restored.state_dict() == scheduler.state_dict()
    assert load_task_scheduler_state(tmp_path / "missing", restored) is None


def test_callback_writes_into_the_checkpoint_folder(tmp_path):
    class Args:
        output_dir = str(tmp_path)

    class State:
        is_world_process_zero = True
        global_step = 7

    callback = TaskSchedulerCallback(TaskScheduler(["a"]), lambda: 3)
    callback.on_save(Args(), State(), control=None)
    assert (tmp_path / "checkpoint-7" / SCHEDULER_STATE_FILE).is_file()
