"""The template generator and the scene-graph solver on the sample world: right by construction.

Answers are checked three ways: the solver (reading the question text back) agrees with every
template's gold; metric answers (depth, distance) agree with the exact 3D truth of ``world.json``,
recomputed here independently of the geometry module; relation, count and existence answers agree
with the view's true relations and objects.
"""

import json
from collections import Counter

import numpy as np
import pytest

from assets.stvqa.scene import build_scene
from assets.stvqa.templates import TEMPLATES, GenerationContext, generate_template_questions, solve_question
from assets.stvqa.vocabulary import CATEGORIES, INVERSE_PREDICATES

VG_OBJECT_ID_STRIDE = 100  # the sample world's Visual Genome object id = image_id * 100 + object id


@pytest.fixture(scope="module")
def world_views(small_world):
    """Per Visual Genome image id: (scene truth, view truth) from world.json."""
    document = json.loads((small_world / "truth" / "world.json").read_text())
    return {
        str(view["vg_image_id"]): (scene, view) for scene in document["scenes"] for view in scene["views"]
    }


@pytest.fixture(scope="module")
def all_questions(sample_scene_graphs, sample_geometry):
    """Every question every template proposes for every sample image, with its scene."""
    context = GenerationContext(seed=3)
    result = []
    for row in sample_scene_graphs.iter_rows(named=True):
        scene = build_scene(row, sample_geometry.get(row["image_id"]))
        result.extend((scene, question) for question in generate_template_questions(scene, context))
    return result


def test_every_category_is_asked(all_questions):
    categories = Counter(question.category for _, question in all_questions)
    assert set(categories) == set(CATEGORIES)
    assert {question.level for _, question in all_questions} == {"easy", "medium", "hard"}
    assert {question.template for _, question in all_questions} == {template.name for template in TEMPLATES}


def test_solver_answers_every_template_question(all_questions):
    wrong = [
        (question.template, question.question, question.options, question.answer_letter, answer)
        for scene, question in all_questions
        if (answer := solve_question(scene, question.question, list(question.options))).letter
        != question.answer_letter
    ]
    assert wrong == []


def test_questions_are_well_formed(all_questions):
    for _, question in all_questions:
        assert 2 <= len(question.options) <= 4
        assert len(set(question.options)) == len(question.options)
        assert 1 <= question.rating <= 10
        assert question.options[question.answer_index] == question.facts["gold"]


def _camera_distance(view, world_object):
    pose = np.asarray(view["pose"])
    centre = np.asarray(world_object["centroid"])
    return float(np.linalg.norm(pose[:3, :3].T @ (centre - pose[:3, 3])))


def _box_centre(world_object):
    return (np.asarray(world_object["aabb"]["min"]) + np.asarray(world_object["aabb"]["max"])) / 2


def _world_object(scene_truth, image_id, object_id):
    local_id = int(object_id) - int(image_id) * VG_OBJECT_ID_STRIDE
    return next(obj for obj in scene_truth["objects"] if obj["object_id"] == local_id)


def test_depth_answers_match_the_3d_truth(all_questions, world_views):
    checked = 0
    for scene, question in all_questions:
        if question.template != "depth.compare" or not scene.has_geometry:
            continue
        scene_truth, view = world_views[scene.image_id]
        first, second = (scene.get(object_id) for object_id in question.about)
        distances = {
            obj.object_id: _camera_distance(view, _world_object(scene_truth, scene.image_id, obj.object_id))
            for obj in (first, second)
        }
        gold = scene.resolve(question.options[question.answer_index])
        other = second if gold.object_id == first.object_id else first
        assert distances[gold.object_id] < distances[other.object_id], question.question
        checked += 1
    assert checked > 0


def test_distance_answers_match_the_3d_truth(all_questions, world_views):
    checked = 0
    for scene, question in all_questions:
        if question.template != "distance.compare":
            continue
        scene_truth, _ = world_views[scene.image_id]
        reference, first, second = (scene.get(object_id) for object_id in question.about)
        centre = {
            obj.object_id: _box_centre(_world_object(scene_truth, scene.image_id, obj.object_id))
            for obj in (reference, first, second)
        }
        gold = scene.resolve(question.options[question.answer_index])
        other = second if gold.object_id == first.object_id else first
        to_gold = np.linalg.norm(centre[gold.object_id] - centre[reference.object_id])
        to_other = np.linalg.norm(centre[other.object_id] - centre[reference.object_id])
        assert to_gold < to_other, question.question
        checked += 1
    assert checked > 0


def test_relation_counts_and_existence_match_the_view(all_questions, world_views):
    for scene, question in all_questions:
        scene_truth, view = world_views[scene.image_id]
        categories = [
            _world_object(scene_truth, scene.image_id, obj.object_id)["category"] for obj in scene.objects
        ]
        if question.template == "relation.where":
            true = {(r["subject_id"], r["predicate"], r["object_id"]) for r in view["relationships"]}
            gold = question.options[question.answer_index]
            s, o = (int(i) - int(scene.image_id) * VG_OBJECT_ID_STRIDE for i in question.about)
            assert (s, gold, o) in true or (o, INVERSE_PREDICATES[gold], s) in true, question.question
        elif question.template == "count.how_many":
            assert int(question.options[question.answer_index]) == categories.count(question.about[0])
        elif question.template == "existence.verify":
            exists = question.options[question.answer_index] == "yes"
            assert exists == (question.about[0] in categories)


def test_generation_is_deterministic(sample_scene_graphs, sample_geometry):
    row = sample_scene_graphs.row(3, named=True)
    scene = build_scene(row, sample_geometry.get(row["image_id"]))
    first = generate_template_questions(scene, GenerationContext(seed=1))
    again = generate_template_questions(
        build_scene(row, sample_geometry.get(row["image_id"])), GenerationContext(seed=1)
    )
    assert first == again
    reseeded = generate_template_questions(scene, GenerationContext(seed=2))
    assert [q.options for q in reseeded] != [
        q.options for q in first
    ]  # the seed moves options and distractors


def test_solver_abstains_on_foreign_questions(all_questions):
    scene, _ = all_questions[0]
    answer = solve_question(scene, "What colour is the sky?", ["blue", "green"])
    assert answer.letter is None and answer.template is None
    unsettled = solve_question(scene, "Is the dragon left of the unicorn?", ["yes", "no"])
    assert unsettled.letter is None and unsettled.template == "relation.verify"
