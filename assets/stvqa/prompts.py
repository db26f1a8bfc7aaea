"""Prompts and schemas of the STVQA model calls: question generation and pass@2 answering.

Generation (Claude Sonnet 4 by default) follows the SpatialThinker recipe: the scene graph in pixel
boxes with ``name.N`` ids, the nine categories and three levels, salience rules, the relation
vocabulary (VG150's predicates plus 34 spatial relations), and the *running* category/level balance
so the model steers toward the targets. The answer is a JSON object ``{"questions": [...]}`` whose
items are ``{question, options (2-4), answer (letter), category, level, rating (1-10)}``; the schema
(:func:`generation_schema`) is sent to the API (a forced tool for Anthropic, structured outputs for
OpenAI-compatible servers).

Answering (pass@2, GPT-4o by default) shows the image at high detail with the question and lettered
options and asks for the letter only.

Bump :data:`GENERATION_PROMPT_VERSION` / :data:`ANSWER_PROMPT_VERSION` whenever a template or schema
changes: the version is part of the response-cache key, so old answers are not reused for a new prompt.

>>> schema = generation_schema(3)
>>> schema["properties"]["questions"]["maxItems"]
3
>>> print(render_answer_prompt("Where is the cup?", ["on", "under"]).splitlines()[-1])
Reply with only the letter of the correct option (A or B).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from assets.stvqa.scene import Scene
from assets.stvqa.vocabulary import CATEGORIES, LEVELS, SPATIAL_PREDICATES, VG150_PREDICATES

GENERATION_TEMPLATE_NAME = "stvqa_generation"
GENERATION_PROMPT_VERSION = "stvqa-generation-v1"
ANSWER_TEMPLATE_NAME = "stvqa_pass_at_2"
ANSWER_PROMPT_VERSION = "stvqa-answer-v1"
LETTERS = "ABCD"

CATEGORY_DESCRIPTIONS = {
    "relation": "the spatial predicate between two objects (above, behind, next to, on top of ...)",
    "reach": "whether objects reach, touch, hold or can interact with each other",
    "size": "comparative size (bigger / smaller, taller / shorter)",
    "orientation": "which way an object faces, or directions from an object's own point of view",
    "instance_location": "where a single object sits in the image frame (top left, centre ...)",
    "depth": "which of two objects is closer to the camera",
    "distance": "which object is closer to a reference object",
    "count": "how many instances of an object type there are (use sparingly)",
    "existence": "whether an object (with a property) is present: yes / no",
}

GENERATION_SYSTEM_PROMPT = """You write multiple-choice questions that test visual-spatial reasoning about one image, using only its scene graph.

Categories:
{categories}

Rules:
1. Use ONLY objects and relations that are in the scene graph. Never invent objects, attributes or relations. Refer to objects by their type name (with a distinguishing attribute when several share a name), never by their ids.
2. Prefer salient objects with explicit relations to other objects. Skip parts, text, logos, clothing and body parts of their owners, and relations that are obvious by default (wheel on car, man wearing shirt).
3. Every question has 2 to 4 options, exactly one of them correct and the others clearly wrong for this image. Options are distinct short phrases without letters ("on", "behind", "the lamp", "3", "yes").
4. count: only for easily countable objects (2 to 6 instances), counting synonyms (person, man, guy ...) together. instance_location: only for an object whose type occurs once.
5. answer is the letter of the correct option (A for the first option). level: easy (one clear relation, fully visible objects), medium (several objects or closer observation), hard (multi-step reasoning, occlusion, subtle differences). rating (1-10): how much the question would teach a model about space.
6. Steer toward the target balance: prefer the categories and levels that are furthest below their target share in the statistics below, and do not repeat a category when another fits.

Answer content per category: relation -> a predicate (or a synonym); reach -> a reaching/touching description or yes/no; size -> an object name or comparative; orientation -> a direction; instance_location -> a frame position; depth and distance -> an object name; count -> an integer written in digits; existence -> yes or no.

Relation vocabulary (VG150 predicates and spatial relations): {vocabulary}"""

GENERATION_USER_PROMPT = """{balance_heading}
{balance}

Image size: ({width} x {height}) pixels. Boxes are [x1, y1, x2, y2] in pixels.
Scene graph:
{scene_graph}

Write {count} questions about this scene, each of a different category or level where the scene allows.{feedback}"""

ANSWER_PROMPT = """Answer the following multiple choice question about the image.

Question: {question}

Options:
{options}

Reply with only the letter of the correct option ({letters})."""


def generation_schema(max_questions: int) -> dict[str, Any]:
    """JSON schema of a generation answer (strict-compatible: every property required, no extras)."""
    item = {
        "type": "object",
        "additionalProperties": False,
        "required": ["question", "options", "answer", "category", "level", "rating"],
        "properties": {
            "question": {"type": "string", "minLength": 1},
            "options": {
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "minItems": 2,
                "maxItems": 4,
            },
            "answer": {"type": "string", "enum": list(LETTERS)},
            "category": {"type": "string", "enum": list(CATEGORIES)},
            "level": {"type": "string", "enum": list(LEVELS)},
            "rating": {"type": "integer", "minimum": 1, "maximum": 10},
        },
    }
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["questions"],
        "properties": {
            "questions": {"type": "array", "items": item, "minItems": 1, "maxItems": max(1, max_questions)}
        },
    }


def scene_graph_json(scene: Scene) -> str:
    """The scene graph as the generator sees it: ``name.N`` ids, pixel boxes, attributes, relations.

    >>> from assets.stvqa.scene import Scene, SceneObject, SceneRelation
    >>> cup = SceneObject("7", "cup", "cup", (), ("red",), (0, 0, 500, 500), (0.0, 0.0, 50.5, 25.0), "cup.1")
    >>> print(scene_graph_json(Scene("1", 101, 50, [cup], [])))
    {"objects": [{"id": "cup.1", "bbox": [0, 0, 50, 25], "attributes": ["red"]}], "relationships": []}
    """
    ids = {obj.object_id: obj.scene_id for obj in scene.objects}
    objects = []
    for obj in scene.objects:
        entry: dict[str, Any] = {"id": obj.scene_id, "bbox": [round(value) for value in obj.bbox_px]}
        if obj.attributes:
            entry["attributes"] = list(obj.attributes)
        objects.append(entry)
    relationships = [
        {
            "subject": ids[relation.subject_id],
            "predicate": relation.predicate,
            "object": ids[relation.object_id],
        }
        for relation in scene.relations
    ]
    return json.dumps({"objects": objects, "relationships": relationships}, ensure_ascii=False)


def render_generation_system() -> str:
    """The generation system prompt (fixed for a prompt version)."""
    categories = "\n".join(f"- {name}: {CATEGORY_DESCRIPTIONS[name]}" for name in CATEGORIES)
    vocabulary = ", ".join((*VG150_PREDICATES, *SPATIAL_PREDICATES))
    return GENERATION_SYSTEM_PROMPT.format(categories=categories, vocabulary=vocabulary)


BALANCE_HEADINGS = {
    False: "Current balance of the questions generated so far:",
    True: "Planned balance of the questions before this scene (steer toward the categories and levels below target):",
}
"""The heading of the balance in the generation prompt: the running balance, or the balance planned up front."""


def render_generation_prompt(
    scene: Scene, count: int, balance: str, feedback: Sequence[str] = (), planned: bool = False
) -> str:
    """The user prompt for one image: balance (running, or planned up front), image size, scene graph, how many
    questions, and any problems of a previous answer that must be fixed."""
    feedback_text = ""
    if feedback:
        problems = "\n".join(f"- {problem}" for problem in feedback)
        feedback_text = (
            "\n\nYour previous answer for this scene had these problems; write all questions again without them:\n"
            + problems
        )
    return GENERATION_USER_PROMPT.format(
        balance_heading=BALANCE_HEADINGS[planned],
        balance=balance,
        width=scene.width,
        height=scene.height,
        scene_graph=scene_graph_json(scene),
        count=count,
        feedback=feedback_text,
    )


def render_answer_prompt(question: str, options: Sequence[str]) -> str:
    """The pass@2 prompt: question, ``A. option`` lines, and the instruction to answer with the letter only."""
    letters = LETTERS[: len(options)]
    lines = "\n".join(f"{letter}. {option}" for letter, option in zip(letters, options, strict=False))
    letter_list = ", ".join(letters[:-1]) + f" or {letters[-1]}" if len(letters) > 1 else letters
    return ANSWER_PROMPT.format(question=question, options=lines, letters=letter_list)
