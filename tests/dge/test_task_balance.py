"""DGE question balance, wording, distractors, duplicates and withholding, on built worlds and hand-made scenes.

The built-world checks use the 36-frame loop of ``long_scan_world`` (exact scans, every task type
has clear cases) and the 6-view ``sample_world``; answers are judged by the independent oracle
(``tests/dge/oracle.py``), which also fails a row when any offered distractor is true.
"""

import json
from collections import Counter

import numpy as np
import pytest

from assets.dge.geometry import build_scan_geometry
from assets.dge.tasks import (
    CameraFact,
    GenerationReport,
    ObjectFact,
    SceneFacts,
    SeenFact,
    TaskSettings,
    build_scene_tasks,
    evaluate_spec,
    format_number,
    generate_tasks,
)
from assets.dge.tasks.balance import gold_position
from assets.dge.visibility import build_frame_visibility
from tests.dge.oracle import COVERED, AccuracyTable, SceneTruth
from tests.dge.scans import read_sample_scans

BALANCE_SETTINGS = TaskSettings(max_tasks_per_type=12)
CHOICE_TYPES_WITH_FIXED_OPTIONS = {
    "depth_order": 2,
    "relative_direction_image": 2,
    "camera_camera_elevation": 2,
    "visibility_comparison": 2,
    "relative_direction_scene": 4,
    "camera_object_position": 4,
    "camera_region_position": 4,
    "camera_camera_position": 4,
}


def _build(world, settings):
    tables = read_sample_scans(world / "scannet" / "scans")
    truth = {
        scene["scene_id"]: scene
        for scene in json.loads((world / "truth" / "world.json").read_text())["scenes"]
    }
    report = GenerationReport()
    scenes = {}
    for scene in tables.scenes.iter_rows(named=True):
        geometry = build_scan_geometry(tables.frames, scene)
        visibility = build_frame_visibility(geometry, tables.frames, scene=scene)
        tasks = build_scene_tasks(geometry.to_row(), visibility, tables.frames, settings, report=report)
        scenes[scene["scene_id"]] = tasks
    return scenes, truth, report


@pytest.fixture(scope="module")
def long_scan_tasks(long_scan_world):
    """Every scene's tasks (12 per type at most) of the 36-frame loop, with the truth and the generation report."""
    return _build(long_scan_world, BALANCE_SETTINGS)


def _rows(scenes):
    return [row for tasks in scenes.values() for row in tasks.iter_rows(named=True)]


@pytest.mark.slow  # builds and measures a world (20-40 s)
def test_every_answer_and_every_distractor_agrees_with_the_oracle(long_scan_tasks):
    scenes, truth, report = long_scan_tasks
    table = AccuracyTable()
    for scene_id, tasks in scenes.items():
        table.add(tasks.iter_rows(named=True), SceneTruth.from_truth(truth[scene_id]))
    table.add_withheld(report.withheld)
    assert set(table.rows) == set(COVERED), report.missing(list(COVERED))  # all 16 types
    assert sum(table.wrong.values()) == 0, table.examples


@pytest.mark.slow  # builds and measures a world (20-40 s)
def test_gold_letters_are_spread_evenly(long_scan_tasks):
    rows = _rows(long_scan_tasks[0])
    for task_type, option_count in CHOICE_TYPES_WITH_FIXED_OPTIONS.items():
        letters = Counter(row["answer_index"] for row in rows if row["task_type"] == task_type)
        total = sum(letters.values())
        assert total >= option_count, task_type
        # One scene: its questions with n options take the letters of a permutation in turn, so counts differ by
        # at most one.
        counts = [letters.get(index, 0) for index in range(option_count)]
        assert max(counts) - min(counts) <= 1, (task_type, counts)


@pytest.mark.slow  # builds and measures a world (20-40 s)
def test_answer_values_are_spread(long_scan_tasks):
    rows = _rows(long_scan_tasks[0])
    for task_type in CHOICE_TYPES_WITH_FIXED_OPTIONS:
        values = Counter(row["options"][row["answer_index"]] for row in rows if row["task_type"] == task_type)
        total = sum(values.values())
        # Round-robin over answer values: no value takes more than half of a type's rows when others exist.
        if len(values) > 1:
            assert max(values.values()) <= max(0.5 * total, total / len(values) + 1), (task_type, values)
    motions = Counter(
        row["options"][row["answer_index"]] for row in rows if row["task_type"] == "camera_motion"
    )
    assert len(motions) >= 2, motions
    # Counts: at most max_answer_share (half) of a scene's count questions have the same count.
    counts = Counter(row["numeric_answer"] for row in rows if row["task_type"] == "object_count")
    assert counts and max(counts.values()) <= 0.5 * BALANCE_SETTINGS.max_tasks_per_type, counts


@pytest.mark.slow  # builds and measures a world (20-40 s)
def test_no_two_rows_ask_the_same_question_about_the_same_objects_and_frames(long_scan_tasks):
    keys = Counter()
    for row in _rows(long_scan_tasks[0]):
        spec = json.loads(row["facts"])["spec"]
        objects = sorted(
            json.dumps(value) for key, value in spec.items() if key not in ("frame", "frames", "options")
        )
        keys[(row["question"], tuple(sorted(row["frame_indices"])), tuple(objects))] += 1
    assert max(keys.values()) == 1, [key for key, count in keys.items() if count > 1]


@pytest.mark.slow  # builds and measures a world (20-40 s)
def test_numeric_questions_state_their_precision(long_scan_tasks):
    for row in _rows(long_scan_tasks[0]):
        if row["answer_index"] is None:
            assert (
                "decimal place" in row["question"]
                or "nearest centimetre" in row["question"]
                or ("whole number" in row["question"])
            ), row["question"]
            assert json.loads(row["facts"])["values"]["precision"], row["task_id"]


@pytest.mark.slow  # builds and measures a world (20-40 s)
def test_a_missing_task_type_is_named_with_the_reason(sample_world):
    # Six views per room are too far apart for a clear camera motion.
    _, _, report = _build(sample_world, TaskSettings())
    missing = report.missing(TaskSettings().task_types)
    assert "camera_motion" in missing
    assert "neither a clear turn nor a clear move" in missing["camera_motion"]
    assert report.withheld["camera_motion"]["neither a clear turn nor a clear move"] > 0


# Hand-made scenes.

K = np.array([[50.0, 0, 31.5], [0, 50.0, 23.5], [0, 0, 1]])


def _camera(frame, position, heading_deg):
    """OpenCV camera at ``position`` looking horizontally at ``heading_deg`` (counter-clockwise from +x), z up."""
    angle = np.radians(heading_deg)
    forward = np.array([np.cos(angle), np.sin(angle), 0.0])
    right = np.cross(forward, [0.0, 0.0, 1.0])
    down = np.cross(forward, right)
    pose = np.eye(4)
    pose[:3, :3] = np.stack([right, down, forward], axis=1)
    pose[:3, 3] = position
    return CameraFact(frame, pose, K, 64, 48)


class NoRelativeDistanceMargin(TaskSettings):
    """Distance comparisons without the relative margin (a constant of the method, overridden here)."""

    distance_margin_relative = 0.0


def _scene(objects, cameras):
    seen = {(f, o): SeenFact(1.0, 1.0, (100, 100, 200, 200)) for f in cameras for o in objects}
    return SceneFacts("scene_h", objects, cameras, seen, room_area_m2=None)


def test_camera_motion_never_offers_a_true_distractor():
    # Moved 1 m to the left while turning 12 degrees left: "turned left" is not false, so it is never offered.
    cameras = {0: _camera(0, [0, 0, 1.5], 90.0), 1: _camera(1, [-1.0, 0, 1.5], 102.0)}
    facts = _scene({}, cameras)
    answer = evaluate_spec("camera_motion", {"frames": [0, 1]}, facts, TaskSettings())
    assert answer.clear and answer.answer_option == "moved left"
    assert "turned left" not in answer.options
    assert set(answer.options) == {
        "moved left",
        "moved forward",
        "moved backward",
        "moved right",
        "turned right",
    }
    offered = evaluate_spec(
        "camera_motion",
        {"frames": [0, 1], "options": ["moved left", "turned left", "moved right"]},
        facts,
        TaskSettings(),
    )
    assert not offered.clear and offered.reason == "a distractor is not clearly false"


def test_camera_motion_near_a_half_turn_is_withheld_and_offers_no_turn():
    """Two views 175 degrees apart could come from a turn either way: not asked, and a move question there offers
    neither turn; 120 degrees is a clear turn, and the other turn a clearly false distractor."""
    cameras = {0: _camera(0, [0, 0, 1.5], 90.0), 1: _camera(1, [0.05, 0, 1.5], 265.0)}
    half = evaluate_spec("camera_motion", {"frames": [0, 1]}, _scene({}, cameras), TaskSettings())
    assert not half.clear and half.reason.startswith("the headings differ by nearly a half turn")
    assert "turned left" not in half.options and "turned right" not in half.options
    cameras = {0: _camera(0, [0, 0, 1.5], 90.0), 1: _camera(1, [0.05, 0, 1.5], 210.0)}
    turn = evaluate_spec("camera_motion", {"frames": [0, 1]}, _scene({}, cameras), TaskSettings())
    assert turn.clear and turn.answer_option == "turned left" and "turned right" in turn.options


def test_gold_letters_are_uniform_whatever_the_option_counts():
    """Over many scenes of questions with 2 to 4 options in random order, each letter of an n-option question holds
    the answer 1/n of the time (so "A" holds the mean of 1/n, no more)."""
    rng = np.random.default_rng(0)
    by_count = {count: Counter() for count in (2, 3, 4)}
    gold_a, expected_a = 0, 0.0
    for scene in range(4000):
        placed: Counter = Counter()
        for count in rng.integers(2, 5, size=4):
            count = int(count)
            position = gold_position(0, f"scene{scene:04d}_00", "relative_distance", count, placed[count])
            placed[count] += 1
            by_count[count][position] += 1
            gold_a += position == 0
            expected_a += 1 / count
    for count, letters in by_count.items():
        total = sum(letters.values())
        for letter in range(count):
            assert abs(letters[letter] / total - 1 / count) < 0.02, (count, dict(letters))
    assert abs(gold_a - expected_a) / 16000 < 0.01, (gold_a, expected_a)


def _object(object_id, label, centroid, **confidence):
    return ObjectFact(object_id, label, np.asarray(centroid, float), np.array([0.4, 0.3, 0.5]), **confidence)


def test_poorly_measured_objects_are_withheld_with_the_reason():
    cameras = {0: _camera(0, [0, -3, 1.0], 90.0)}
    one_view = _object(
        0, "chair", [0, 0, 0.5], observed_views=1, extent_coverage=1.0, size_uncertainty_m=0.01
    )
    half_seen = _object(
        1, "table", [1, 0, 0.5], observed_views=5, extent_coverage=0.5, size_uncertainty_m=0.01
    )
    vague = _object(
        2, "lamp", [-1, 0, 0.5], observed_views=5, extent_coverage=1.0, position_uncertainty_m=0.3
    )
    facts = _scene({0: one_view, 1: half_seen, 2: vague}, cameras)
    settings = TaskSettings()
    size = evaluate_spec("object_size", {"object_id": 0, "frames": [0]}, facts, settings)
    assert not size.clear and size.reason == "too few views of the object"
    size = evaluate_spec(
        "attribute_measurement", {"object_id": 1, "attribute": "height", "frames": [0]}, facts, settings
    )
    assert not size.clear and size.reason == "object's extent not covered by the frames"
    distance = evaluate_spec("camera_object_distance", {"frame": 0, "object_id": 2}, facts, settings)
    assert not distance.clear and distance.reason == "position too uncertain"
    report = GenerationReport()
    generate_tasks(facts, TaskSettings(task_types=["object_size", "camera_object_distance"]), report)
    assert report.withheld["object_size"]["too few views of the object"] == 1
    assert report.withheld["camera_object_distance"]["position too uncertain"] == 1


@pytest.mark.parametrize(
    "sigma, gap_m, clear",
    [
        (None, 0.10, False),  # no uncertainty columns: the fixed 0.15 m margin
        (0.01, 0.10, True),  # 3 x sqrt(3) x 0.01 = 0.052 m < 0.10 m
        (0.03, 0.10, False),  # 3 x sqrt(3) x 0.03 = 0.156 m > 0.10 m
        (0.001, 0.06, True),  # the 0.05 m floor < 0.06 m
        (0.001, 0.04, False),  # the 0.05 m floor > 0.04 m
    ],
)
def test_distance_margin_follows_the_objects_uncertainty(sigma, gap_m, clear):
    confidence = {} if sigma is None else {"position_uncertainty_m": sigma}
    anchor = _object(0, "chair", [0, 0, 0.5], **confidence)
    near = _object(1, "table", [2.0, 0, 0.5], **confidence)
    far = _object(2, "lamp", [0, 2.0 + gap_m, 0.5], **confidence)
    facts = _scene({0: anchor, 1: near, 2: far}, {0: _camera(0, [0, -3, 1.0], 90.0)})
    # distance_margin_relative (10% of 2 m = 0.2 m) would hide the difference: set it aside here.
    answer = evaluate_spec(
        "relative_distance",
        {"anchor": 0, "choices": [1, 2], "frames": [0]},
        facts,
        NoRelativeDistanceMargin(),
    )
    assert answer.answer_option == "table"
    assert answer.clear == clear, answer.values


def test_small_sizes_keep_a_decimal_and_say_so():
    cup = ObjectFact(0, "cup", np.zeros(3), np.array([0.0257, 0.02, 0.0257]))
    facts = _scene({0: cup}, {0: _camera(0, [0, -1, 0.5], 90.0)})
    answer = evaluate_spec("object_size", {"object_id": 0, "frames": [0]}, facts, TaskSettings())
    assert answer.numeric_answer == pytest.approx(2.6)  # 2.57 cm, not 3 cm
    assert format_number(answer.numeric_answer, "cm") == "2.6"
    assert "to 1 decimal place" in answer.question
