"""Task types on a hand-made scene whose answers are worked out by hand."""

import json

import numpy as np
import pytest
from PIL import Image

from assets.dge.tasks import (
    REGISTRY,
    BalanceRule,
    CameraFact,
    ObjectFact,
    SceneFacts,
    SeenFact,
    TaskSettings,
    evaluate_spec,
    format_number,
    generate_tasks,
    nameable_objects,
    shuffled_options,
    tasks_to_frame,
)
from assets.dge.tasks.balance import NumericAnswer
from data_contracts.dge_tasks import TASK_TYPES, DgeTasks
from data_contracts.images import decode_image
from data_contracts.stable_hash import stable_split
from data_contracts.validation import check_frame

K = np.array([[50.0, 0, 31.5], [0, 50.0, 23.5], [0, 0, 1]])


def _camera(frame, position, look):
    """OpenCV camera at ``position`` looking along ``look`` (horizontal), z up."""
    forward = np.asarray(look, dtype=float) / np.linalg.norm(look)
    right = np.cross(forward, [0.0, 0.0, 1.0])
    down = np.cross(forward, right)
    pose = np.eye(4)
    pose[:3, :3] = np.stack([right, down, forward], axis=1)
    pose[:3, 3] = position
    return CameraFact(frame, pose, K, 64, 48)


def _object(object_id, label, centroid, extents):
    return ObjectFact(object_id, label, np.asarray(centroid, float), np.asarray(extents, float))


@pytest.fixture
def facts():
    objects = {
        0: _object(0, "chair", [0, 0, 0.5], [0.5, 0.45, 0.9]),
        1: _object(1, "table", [2, 0, 0.4], [1.2, 0.8, 0.75]),
        2: _object(2, "lamp", [0, 2, 0.8], [0.3, 0.3, 1.6]),
        3: _object(3, "sofa", [-2, -1, 0.4], [2.0, 0.9, 0.8]),
        4: _object(4, "cup", [2, 0.2, 0.8], [0.1, 0.08, 0.1]),
        5: _object(5, "cup", [2, -0.2, 0.8], [0.1, 0.08, 0.1]),
    }
    cameras = {
        0: _camera(0, [0, -3, 1.5], [0, 1, 0]),
        1: _camera(1, [0, -3, 1.0], [0, 1, 0]),  # half a metre lower
        2: _camera(2, [2, -3, 1.5], [0, 1, 0]),  # two metres to the right
        3: _camera(3, [0, -3, 1.5], [1, 0, 0]),  # turned 90 degrees to the right
    }
    seen = {(f, o): SeenFact(1.0, 1.0, (100, 100, 200, 200)) for f in (0, 1, 2) for o in objects}
    seen[(1, 0)] = SeenFact(0.4, 1.0, (100, 100, 200, 200))
    seen[(0, 0)] = SeenFact(
        1.0, 1.0, (400, 700, 600, 950)
    )  # visible box centred at (0.5, 0.825) of the image
    return SceneFacts("scene_x", objects, cameras, seen, room_area_m2=20.0)


CASES = [
    ("object_count", {"label": "cup", "frames": [0]}, 2.0),  # two cups
    ("object_size", {"object_id": 0, "frames": [0]}, 90.0),  # the chair is 0.9 m tall
    ("attribute_measurement", {"object_id": 1, "attribute": "height", "frames": [0]}, 75.0),  # table height
    (
        "attribute_measurement",
        {"object_id": 1, "attribute": "width", "frames": [0]},
        80.0,
    ),  # table's shorter side
    ("camera_object_distance", {"frame": 0, "object_id": 0}, 3.16),  # sqrt(3^2 + 1^2)
    ("absolute_distance", {"objects": [0, 1], "frames": [0]}, 2.0),  # sqrt(2^2 + 0.1^2) = 2.0025
    ("room_size", {"frames": [0, 1]}, 20.0),  # as measured
    ("depth_order", {"frame": 0, "objects": [2, 0]}, "chair"),  # depths 5 m and 3 m
    ("relative_direction_image", {"frame": 0, "objects": [1, 0]}, "right"),  # the table is at x = 2
    (
        "relative_direction_scene",
        {"standing": 3, "facing": 0, "target": 2, "frames": [0]},
        "front-left",
    ),  # 29.7 deg left
    ("relative_distance", {"anchor": 0, "choices": [2, 3], "frames": [0]}, "lamp"),  # 2.02 m vs 2.24 m
    ("camera_camera_position", {"frames": [0, 2]}, "to the right"),  # moved 2 m along +x while facing +y
    ("camera_camera_elevation", {"frames": [0, 1]}, "lower"),  # 0.5 m lower
    (
        "camera_object_position",
        {"object_id": 2, "frames": [0, 3]},
        "to the left",
    ),  # facing +x, the lamp is at +y
    (
        "camera_motion",
        {"frames": [0, 3], "options": ["moved forward", "turned left", "turned right", "moved left"]},
        "turned right",
    ),  # same place, heading +y -> +x
    ("visibility_comparison", {"object_id": 0, "frames": [0, 1]}, "image 1"),  # 1.0 vs 0.4
    (
        "camera_region_position",
        {"frame": 0, "object_id": 0, "options": ["bottom centre", "top left", "middle centre", "top right"]},
        "bottom centre",
    ),  # the visible box's centre is at (0.5, 0.825): bottom row, centre column
]


@pytest.mark.parametrize("task_type, spec, expected", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_answers(facts, task_type, spec, expected):
    answer = evaluate_spec(task_type, spec, facts, TaskSettings())
    assert answer.clear, answer.reason
    if isinstance(expected, str):
        assert answer.answer_option == expected
        assert expected in answer.options
    else:
        assert answer.numeric_answer == pytest.approx(expected)


def test_cases_cover_every_task_type():
    assert {case[0] for case in CASES} == set(TASK_TYPES)


def test_registry_has_one_complete_entry_per_contract_task_type():
    assert list(REGISTRY) == TASK_TYPES  # exactly the contract's 16 types, in its order
    settings = TaskSettings()
    for name, entry in REGISTRY.items():
        assert entry.name == name
        assert callable(entry.sampler) and callable(entry.evaluator) and callable(entry.wording), name
        assert isinstance(entry.balance, BalanceRule), name
        assert all(hasattr(settings, margin) for margin in entry.margins), name


@pytest.mark.parametrize("task_type, spec, expected", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_every_entry_words_its_question_and_balances_its_kind_of_answer(facts, task_type, spec, expected):
    answer = evaluate_spec(task_type, spec, facts, TaskSettings())
    assert answer.question.endswith(("?", "."))  # a whole sentence, worded by the entry
    # Numbers have nothing to balance; every multiple-choice type spreads its gold letters.
    assert isinstance(REGISTRY[task_type].balance, NumericAnswer) == (answer.numeric_answer is not None)


@pytest.mark.parametrize(
    "task_type, spec",
    [
        ("relative_distance", {"anchor": 0, "choices": [1, 2], "frames": [0]}),  # 2.00 m vs 2.02 m
        (
            "relative_direction_scene",
            {"standing": 0, "facing": 2, "target": 1, "frames": [0]},
        ),  # exactly 90 degrees
        ("camera_camera_elevation", {"frames": [0, 2]}),  # same height
        ("depth_order", {"frame": 0, "objects": [0, 1]}),  # chair and table side by side, both 3 m deep
        ("visibility_comparison", {"object_id": 1, "frames": [0, 2]}),  # equally visible
        ("object_count", {"label": "cup", "frames": [3]}),  # frame 3 shows no cup
    ],
)
def test_ambiguous_questions_are_not_clear(facts, task_type, spec):
    assert not evaluate_spec(task_type, spec, facts, TaskSettings()).clear


def test_duplicate_labels_are_not_named(facts):
    assert nameable_objects(facts, TaskSettings()) == [0, 1, 2, 3]


def test_generation_is_deterministic_and_clear(facts, tmp_path):
    for camera in list(facts.cameras.values()):
        path = tmp_path / f"{camera.frame_index}.jpg"
        Image.new("RGB", (64, 48), "gray").save(path)
        facts.cameras[camera.frame_index] = CameraFact(camera.frame_index, camera.pose, K, 64, 48, str(path))
    first = generate_tasks(facts, TaskSettings(max_tasks_per_type=2))
    second = generate_tasks(facts, TaskSettings(max_tasks_per_type=2))
    assert [t.task_id for t in first] == [t.task_id for t in second]
    assert all(t.answer.clear for t in first)
    frame = tasks_to_frame(first, facts, TaskSettings())
    assert check_frame(frame, DgeTasks).passed
    # (camera_camera_elevation gives no question here: its clear candidates all say "lower", over max_answer_share)
    row = frame.filter(frame["task_type"] == "camera_camera_position").row(0, named=True)
    assert row["answer"] == "ABCD"[row["answer_index"]]
    assert json.loads(row["facts"])["spec"]["frames"] == row["frame_indices"]
    assert row["images"][0]["path"] == f"scene_x/{row['frame_indices'][0]}.jpg"
    small = tasks_to_frame(first[:1], facts, TaskSettings(image_max_side=32))
    assert decode_image(small["images"][0][0]).size == (32, 24)  # re-encoded within 32 px


def test_stable_helpers():
    assert shuffled_options("a/b/c", ["x", "y", "z"]) == shuffled_options("a/b/c", ["x", "y", "z"])
    splits = [stable_split(f"scene{i:04d}_00", 0.25) for i in range(400)]
    assert 0.18 < splits.count("test") / 400 < 0.32
    assert format_number(0.999, "m") == "1.00"


def test_unknown_task_type_is_rejected():
    with pytest.raises(ValueError, match="unknown DGE task types"):
        TaskSettings(task_types=["object_count", "object_colour"])
