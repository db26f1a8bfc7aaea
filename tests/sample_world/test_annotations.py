"""Boxes, relations and question answers agree with the masks and the 3D truth."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from assets.sample_world import generate_sample_world
from assets.sample_world.relations import ABOVE_GAP, DEPTH_MARGIN, LATERAL_MARGIN, NEXT_TO_GAP, SIZE_RATIO
from tests.sample_world.world_helpers import World, camera_frame, small_config


@pytest.fixture(scope="module")
def question_world(tmp_path_factory: pytest.TempPathFactory) -> World:
    """More and larger views than `small_world`, so that most question templates occur."""
    root = tmp_path_factory.mktemp("questions") / "sample_world"
    config = small_config(
        root, seed=11, num_scenes=6, views_per_scene=4, width=128, height=96, min_question_pixels=60
    )
    summary = generate_sample_world(config)
    return World(root, config, summary, json.loads((root / "truth" / "world.json").read_text()))


def _mask_extents(instance: np.ndarray, value: int) -> list[int] | None:
    rows, columns = np.nonzero(instance == value)
    if len(rows) == 0:
        return None
    return [int(columns.min()), int(rows.min()), int(columns.max()) + 1, int(rows.max()) + 1]


def test_boxes_equal_the_mask_extents(small_world: World):
    vg_boxes = {}
    for entry in json.loads((small_world.root / "visual_genome" / "objects.json").read_text()):
        for item in entry["objects"]:
            vg_boxes[item["object_id"]] = [item["x"], item["y"], item["x"] + item["w"], item["y"] + item["h"]]
    compared = 0
    for scene, view in small_world.views():
        folder = small_world.root / "scannet" / "scans" / scene["scene_id"]
        instance = np.asarray(Image.open(folder / "instance-filt" / f"{view['frame_index']}.png"))
        for record in view["objects"]:
            extents = _mask_extents(instance, record["object_id"] + 1)
            assert record["bbox_px"] == extents
            assert record["visible_pixels"] == int((instance == record["object_id"] + 1).sum())
            if record["vg_object_id"] is not None:
                assert vg_boxes[record["vg_object_id"]] == extents
                compared += 1
            else:
                assert record["visible_pixels"] < small_world.config.min_object_pixels
    assert compared > 0


def _holds(predicate: str, subject: dict, target: dict, pose: np.ndarray, boxes: tuple) -> bool:
    """The geometric meaning of each predicate, recomputed from the truth file."""
    subject_min, subject_max = np.asarray(subject["aabb"]["min"]), np.asarray(subject["aabb"]["max"])
    target_min, target_max = np.asarray(target["aabb"]["min"]), np.asarray(target["aabb"]["max"])
    overlap_xy = bool(np.all(subject_min[:2] < target_max[:2]) and np.all(target_min[:2] < subject_max[:2]))
    subject_camera, target_camera = (
        camera_frame(subject["centroid"], pose),
        camera_frame(target["centroid"], pose),
    )
    if predicate == "on":
        return subject["support_id"] == target["object_id"]
    if predicate == "under":
        return target["support_id"] == subject["object_id"]
    if predicate == "above":
        return overlap_xy and subject_min[2] >= target_max[2] + ABOVE_GAP - 1e-6
    if predicate == "below":
        return overlap_xy and target_min[2] >= subject_max[2] + ABOVE_GAP - 1e-6
    if predicate == "next to":
        gap = np.maximum(0.0, np.maximum(subject_min[:2] - target_max[:2], target_min[:2] - subject_max[:2]))
        return (
            subject["support_id"] == target["support_id"] and float(np.linalg.norm(gap)) < NEXT_TO_GAP + 1e-6
        )
    if predicate in ("left of", "right of"):
        sign = 1.0 if predicate == "left of" else -1.0
        lateral = subject_camera[0] / subject_camera[2] - target_camera[0] / target_camera[2]
        return subject_camera[2] > 0 and target_camera[2] > 0 and sign * lateral < -LATERAL_MARGIN + 1e-6
    if predicate in ("behind", "in front of"):
        sign = 1.0 if predicate == "behind" else -1.0
        horizontal_overlap = boxes[0][0] < boxes[1][2] and boxes[1][0] < boxes[0][2]
        return horizontal_overlap and sign * (subject_camera[2] - target_camera[2]) > DEPTH_MARGIN - 1e-6
    if predicate == "bigger than":
        return subject["volume"] >= SIZE_RATIO * target["volume"] * (1 - 1e-6)
    if predicate == "smaller than":
        return target["volume"] >= SIZE_RATIO * subject["volume"] * (1 - 1e-6)
    raise AssertionError(f"unknown predicate {predicate!r}")


def test_relations_agree_with_3d_positions(question_world: World):
    where = {}
    for scene, view in question_world.views():
        for record in view["objects"]:
            if record["vg_object_id"] is not None:
                where[record["vg_object_id"]] = (scene, view, record)
    predicates = set()
    for entry in json.loads((question_world.root / "visual_genome" / "relationships.json").read_text()):
        for relation in entry["relationships"]:
            scene, view, subject_record = where[relation["subject"]["object_id"]]
            _, other_view, target_record = where[relation["object"]["object_id"]]
            assert other_view is view and view["vg_image_id"] == entry["image_id"]
            predicate = relation["predicate"].lower()
            subject = scene["objects"][subject_record["object_id"]]
            target = scene["objects"][target_record["object_id"]]
            boxes = (subject_record["bbox_px"], target_record["bbox_px"])
            assert _holds(predicate, subject, target, np.asarray(view["pose"]), boxes), (
                predicate,
                subject["name"],
                target["name"],
            )
            predicates.add(predicate)
    assert {"left of", "right of"} & predicates and len(predicates) >= 5


def test_relations_in_truth_match_the_visual_genome_file(small_world: World):
    by_image = {
        entry["image_id"]: [
            (relation["subject"]["object_id"], relation["predicate"].lower(), relation["object"]["object_id"])
            for relation in entry["relationships"]
        ]
        for entry in json.loads((small_world.root / "visual_genome" / "relationships.json").read_text())
    }
    for _, view in small_world.views():
        vg_id = {record["object_id"]: record["vg_object_id"] for record in view["objects"]}
        expected = [
            (vg_id[item["subject_id"]], item["predicate"], vg_id[item["object_id"]])
            for item in view["relationships"]
        ]
        assert by_image[view["vg_image_id"]] == expected


def _names(scene: dict, ids: list[int]) -> dict[int, str]:
    return {object_id: scene["objects"][object_id]["name"] for object_id in ids}


def _expected_answer(question: dict, scene: dict, view: dict) -> str | None:
    """The answer recomputed from the truth for the templates with a one-line rule; None for the others."""
    pose = np.asarray(view["pose"])
    ids = question["object_ids"]
    objects = scene["objects"]
    distance = {i: float(np.linalg.norm(np.asarray(objects[i]["centroid"]) - pose[:3, 3])) for i in ids}
    template = question["template"]
    if template == "closest_to_camera":
        return objects[min(ids, key=distance.get)]["name"]
    if template == "farthest_from_camera":
        return objects[max(ids, key=distance.get)]["name"]
    if template == "bigger_object":
        return objects[max(ids, key=lambda i: objects[i]["volume"])]["name"]
    if template == "taller_object":
        return objects[max(ids, key=lambda i: objects[i]["extents"][2])]["name"]
    if template == "highest_top":
        return objects[max(ids, key=lambda i: objects[i]["aabb"]["max"][2])]["name"]
    if template == "closest_to_room_centre":
        centre = np.array([scene["room"]["width"] / 2, scene["room"]["depth"] / 2])
        return objects[
            min(ids, key=lambda i: np.linalg.norm(np.asarray(objects[i]["centroid"][:2]) - centre))
        ]["name"]
    if template == "left_or_right_in_view":
        first, second = (camera_frame(objects[i]["centroid"], pose) for i in ids)
        return "left" if first[0] / first[2] < second[0] / second[2] else "right"
    if template == "support_surface":
        support = objects[ids[0]]["support_id"]
        return "the floor" if support is None else f"the {objects[support]['name']}"
    if template == "count_category":
        return str(len(ids))
    if template == "top_height":
        return f"{objects[ids[0]]['aabb']['max'][2]:.1f} m"
    return None


def test_question_answers_agree_with_the_3d_truth(question_world: World):
    root = question_world.root
    omnispatial = {
        record["id"]: record for record in json.loads((root / "omnispatial" / "data.json").read_text())
    }
    spatialab = {
        record["id"]: record for record in json.loads((root / "spatialab" / "spatialab.json").read_text())
    }
    truth_questions = question_world.truth["questions"]
    assert len(truth_questions) == len(omnispatial) + len(spatialab)
    checked_templates = set()
    for question in truth_questions:
        scene = question_world.scene(question["scene_id"])
        view = scene["views"][question["frame_index"]]
        if question["dataset"] == "omnispatial":
            record = omnispatial[question["id"]]
            gold = record["options"][record["answer"]]
            assert view["omnispatial_image"] == f"{record['task_type']}/{record['id'].split('_')[0]}.png"
        else:
            record = spatialab[question["id"]]
            gold = record[f"Option_{record['Answer']}"]
            assert view["spatialab_image"] == record["Image_Filename"]
        assert gold == question["answer_text"]
        expected = _expected_answer(question, scene, view)
        if expected is not None:
            assert gold == expected, question
            checked_templates.add(question["template"])
        for object_id in question["object_ids"]:
            record = view["objects"][object_id]
            assert record["visible_pixels"] >= question_world.config.min_question_pixels
    assert len(checked_templates) >= 4, checked_templates
    assert len({question["template"] for question in truth_questions}) >= 10


def test_omnispatial_covers_every_task_type(question_world: World):
    records = json.loads((question_world.root / "omnispatial" / "data.json").read_text())
    assert {record["task_type"] for record in records} == {
        "Dynamic_Reasoning",
        "Spatial_Interaction",
        "Complex_Logic",
        "Perspective_Taking",
    }
    assert len({record["answer"] for record in records}) >= 3
