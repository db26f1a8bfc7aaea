"""The SpatialCORE reward curriculum: phases by training progress, rewards per phase."""

from __future__ import annotations

import pytest

from training.curriculum import CurriculumReward, curriculum_phase, spatialcore_curriculum_reward


def test_curriculum_phase_boundaries():
    assert [curriculum_phase(p, [0.1, 0.3]) for p in (0.0, 0.09, 0.1, 0.29, 0.3, 1.0)] == [0, 0, 1, 1, 2, 2]


class _State:
    def __init__(self, step, total=100):
        self.global_step, self.max_steps = step, total


def test_spatialcore_curriculum_phases():
    reward = spatialcore_curriculum_reward((0.1, 0.3))
    completion = '{"bbox_2d": [100, 100, 300, 300], "label": "red car"}\nleft</think>A'
    columns = {
        "answer": ["A"],
        "options": [["left", "right"]],
        "question": ["Where is the red car?"],
        "pseudo_gt": [[{"bbox_2d": [100, 100, 300, 300], "label": "red car", "validity": 1.0}]],
    }
    tokens = [
        '{"bbox_2d": [',
        "1",
        "0",
        "0",
        ", ",
        "1",
        "0",
        "0",
        ", ",
        "3",
        "0",
        "0",
        ", ",
        "3",
        "0",
        "0",
        '], "label": "red car"}\nleft</think>A',
    ]
    uncertain = {
        "tokens": tokens,
        "entropies": [2.302585092994046 if t.isdigit() else float("nan") for t in tokens],
    }
    phases = []
    logged = {}
    for step in (0, 20, 50):
        value = reward(
            [completion],
            trainer_state=_State(step),
            box_entropies=[uncertain],
            log_metric=logged.__setitem__,
            **columns,
        )[0]
        phases.append((logged["curriculum/phase"], value))
    assert [phase for phase, _ in phases] == [0.0, 1.0, 2.0]
    accuracy_only, grounding, full = (value for _, value in phases)
    assert accuracy_only == pytest.approx(1.0)  # the answer alone
    assert grounding > full  # uncertain boxes earn less once confidence weighting is on


def test_curriculum_rejects_bad_boundaries():
    with pytest.raises(ValueError):
        CurriculumReward([lambda completions, **kw: [0.0]] * 2, [1.5])
    with pytest.raises(ValueError):
        CurriculumReward([lambda completions, **kw: [0.0]] * 3, [0.5])
