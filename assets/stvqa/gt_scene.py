"""The ground-truth scene of one question, and the count check.

SpatialThinker's spatial reward compares the model's ``<scene>`` with the question's ground-truth
subgraph: the objects the question and its options name, with their boxes, and the relations among
them. :func:`question_scene` finds them by lemmatised matching:

- question and options are tokenised and lemmatised (``"chairs"`` -> ``"chair"``), and so is every
  object name and alias of the filtered scene;
- names are matched as whole token sequences, longest first, so ``"traffic light"`` is one match and
  not also ``"light"``; a matched span is not reused by a shorter name;
- words just before a name that are attributes of some objects of that name (``"the black chair"``)
  keep only those objects; otherwise every object of the name is included (``"how many chairs"``);
- relations are the graph's relations whose two ends are both included.

Count questions are then checked against the *filtered* scene (duplicates merged, see
:mod:`assets.stvqa.scene`), not the raw annotation list, which is what the reference pipeline got wrong:
a gold count that disagrees is moved to the option that states the true count, and the item is
rejected when no option does (:func:`check_count`).

>>> from assets.stvqa.scene import Scene, SceneObject
>>> chairs = [SceneObject(str(i), "chair", "chair", (), (colour,), (i * 100, 0, i * 100 + 50, 50),
...                       (i * 10.0, 0.0, i * 10.0 + 5, 5.0), f"chair.{i + 1}") for i, colour in enumerate(["red", "blue"])]
>>> scene = Scene("1", 100, 100, chairs, [])
>>> [o["id"] for o in question_scene(scene, "Where is the blue chair?", ["left", "right"])["objects"]]
['chair.2']
>>> check_count(scene, "How many chairs are there in the image?", ["1", "2", "3"], "A").answer
'B'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from assets.stvqa.scene import Scene, SceneObject
from assets.stvqa.text import lemmatize_phrase, lemmatize_tokens, parse_count, tokenize

LETTERS = "ABCD"
_COUNT_QUESTION = re.compile(
    r"\bhow many\s+(.+?)(?:\s+(?:are|is|can|do|does|were|was|appear)\b|\?|$)", re.IGNORECASE
)
MAX_MODIFIER_WORDS = 2


def _name_index(scene: Scene) -> list[tuple[tuple[str, ...], list[SceneObject]]]:
    """(lemma tokens, objects) for every name and alias, longest names first."""
    by_lemma: dict[tuple[str, ...], list[SceneObject]] = {}
    for obj in scene.objects:
        for lemma in obj.lemmas:
            tokens = tuple(lemma.split())
            if tokens:
                by_lemma.setdefault(tokens, []).append(obj)
    return sorted(by_lemma.items(), key=lambda item: (-len(item[0]), item[0]))


def mentioned_objects(scene: Scene, texts: Sequence[str]) -> list[SceneObject]:
    """Objects of the filtered scene named in any of `texts` (see the module docstring), in scene order."""
    index = _name_index(scene)
    selected: set[str] = set()
    for text in texts:
        raw_tokens = tokenize(text)
        tokens = lemmatize_tokens(raw_tokens)
        used = [False] * len(tokens)
        for name_tokens, objects in index:
            width = len(name_tokens)
            for start in range(len(tokens) - width + 1):
                if any(used[start : start + width]) or tuple(tokens[start : start + width]) != name_tokens:
                    continue
                for position in range(start, start + width):
                    used[position] = True
                chosen = objects
                for size in range(MAX_MODIFIER_WORDS, 0, -1):
                    if start - size < 0:
                        continue
                    modifier = " ".join(raw_tokens[start - size : start])
                    narrowed = [obj for obj in objects if modifier in obj.attributes]
                    if narrowed:
                        chosen = narrowed
                        break
                selected.update(obj.object_id for obj in chosen)
    return [obj for obj in scene.objects if obj.object_id in selected]


def question_scene(scene: Scene, question: str, options: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
    """The ground-truth subgraph of a question: ``{"objects": [{id, bbox_2d}], "relationships": [...]}``.

    Object ids are the scene's ``name.N`` ids; boxes are canonical (0..1000). Relations use those ids.
    """
    objects = mentioned_objects(scene, [question, *options])
    included = {obj.object_id: obj for obj in objects}
    relationships = [
        {
            "subject": included[relation.subject_id].scene_id,
            "predicate": relation.predicate,
            "object": included[relation.object_id].scene_id,
        }
        for relation in scene.relations
        if relation.subject_id in included and relation.object_id in included
    ]
    return {
        "objects": [{"id": obj.scene_id, "bbox_2d": list(obj.bbox)} for obj in objects],
        "relationships": relationships,
    }


@dataclass(frozen=True)
class CountCheck:
    """Outcome of checking a count question.

    Attributes:
        answer (`str` or `None`): the gold letter to keep (possibly corrected); `None` when rejected.
        note (`str` or `None`): what was corrected, or why the item was rejected; `None` when the gold
            answer was right.
        counted (`int` or `None`): the count in the filtered scene (`None` when the noun was not found).
    """

    answer: str | None
    note: str | None
    counted: int | None

    @property
    def rejected(self) -> bool:
        """The item cannot be kept."""
        return self.answer is None


def counted_noun(question: str) -> str | None:
    """The phrase after "how many" (``"How many red chairs are there?"`` -> ``"red chairs"``).

    >>> counted_noun("How many traffic lights can be seen?"), counted_noun("Is there a cup?")
    ('traffic lights', None)
    """
    match = _COUNT_QUESTION.search(question)
    if match is None:
        return None
    phrase = match.group(1).strip()
    return phrase or None


def _count_in_scene(scene: Scene, phrase: str) -> int | None:
    raw_tokens = tokenize(phrase)
    for start in range(len(raw_tokens)):
        lemma = lemmatize_phrase(" ".join(raw_tokens[start:]))
        objects = scene.objects_with_lemma(lemma)
        if not objects:
            continue
        modifier = " ".join(raw_tokens[:start])
        if modifier:
            narrowed = [obj for obj in objects if modifier in obj.attributes]
            return len(narrowed) if narrowed else None
        return len(objects)
    return None


def check_count(scene: Scene, question: str, options: Sequence[str], answer: str) -> CountCheck:
    """Check a count question's gold option against the filtered scene.

    Returns the kept letter (the original, or the option stating the true count) with a note when
    corrected; a rejection (`answer=None`) with the reason when the noun is not in the scene, no option
    is a number, or no option states the true count.
    """
    phrase = counted_noun(question)
    if phrase is None:
        return CountCheck(None, "count question does not say what to count (no 'how many ...')", None)
    counted = _count_in_scene(scene, phrase)
    if counted is None:
        return CountCheck(
            None, f"count question about {phrase!r}, which the filtered scene does not contain", None
        )
    values = [parse_count(option) for option in options]
    if all(value is None for value in values):
        return CountCheck(None, f"no option of the count question is a number: {list(options)}", counted)
    gold_index = LETTERS.index(answer)
    if values[gold_index] == counted:
        return CountCheck(answer, None, counted)
    matching = [index for index, value in enumerate(values) if value == counted]
    if len(matching) == 1:
        corrected = LETTERS[matching[0]]
        return CountCheck(
            corrected,
            f"count corrected: gold {answer} said {options[gold_index]!r}, the filtered scene has {counted} {phrase}; "
            f"gold moved to {corrected}",
            counted,
        )
    return CountCheck(
        None,
        f"count mismatch: gold {answer} said {options[gold_index]!r}, the filtered scene has {counted} {phrase}, "
        "and no option states that",
        counted,
    )
