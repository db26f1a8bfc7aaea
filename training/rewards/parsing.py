"""Parsing of model completions for the project's output grammars.

Three grammars are read here, each into a frozen structure that says what was found, where, and
why a completion is malformed:

* **SpatialCORE** (Qwen3-VL-Thinking; the chat template already opened ``<think>``)::

      {"bbox_2d": [x1, y1, x2, y2], "label": "noun phrase"}      <- one box per line, 0..1000 grid
      ... reasoning ...
      </think>B

  The reasoning segment is everything before the first ``</think>``. A completion without exactly
  one ``</think>`` has no answer. Boxes after ``</think>`` are not grounding. The answer is one
  option letter (either case) standing alone after ``</think>`` (:func:`read_spatialcore_answer`).

* **SpatialThinker** (Qwen2.5-VL)::

      <observe>...</observe><scene>{"objects": [{"id": "name.N", "bbox": [x1, y1, x2, y2]}],
      "relationships": [{"subject": ..., "predicate": ..., "object": ...}]}</scene>
      <think>...</think><answer>(X) option text</answer>

  Every tag appears exactly once and in this order; ids may be multi-word (``traffic light.1``).

* **Think-answer** (DGE tasks): ``<think>...</think><answer>...</answer>``.

The multiple-choice ``<answer>`` of the last two is read by :func:`read_choice_answer`: an option
letter alone, or ``(X)`` / ``X.`` / ``X)`` / ``X:`` followed by that option's text. The accepted and
rejected forms of every grammar are tabled in ``training/rewards/README.md``.

Every parser accepts any input (``None``, non-strings, adversarial text) and never raises.

>>> parse = parse_spatialcore('{"bbox_2d": [10, 20, 30, 40], "label": "cup"}\\nThe cup is left.</think>B')
>>> parse.answer_letter, len(parse.grounding_boxes), parse.grounding_boxes[0].label
('B', 1, 'cup')
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import dataclass
from typing import Any, TypeGuard

logger = logging.getLogger(__name__)

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
GRID_MAX = 1000
# Longest digit string read as a coordinate; longer ones are out of range anyway and converting
# them could hit Python's limit on integer string conversion.
_MAX_COORDINATE_DIGITS = 6

# A box entry of the SpatialCORE grammar. The coordinate list is read loosely (any text without
# brackets, braces or quotes) so that malformed numbers are still recognised as a box attempt.
BOX_ENTRY_PATTERN = re.compile(
    r'\{\s*"bbox_2d"\s*:\s*\[(?P<coords>[^\[\]{}"]*)\]\s*,\s*"label"\s*:\s*"(?P<label>(?:[^"\\\n]|\\.)*)"\s*\}'
)
BOX_KEY = '"bbox_2d"'
_COORDINATE_PIECE = re.compile(r"[^,]+")
_INTEGER = re.compile(r"\d+")
_WORD = re.compile(r"[a-z0-9]+")

# Gold answer cells: "B", "(B)", "B.", "B)", "B:", optionally followed by option text after a
# delimiter ("B. Go a bit right", "(B) red car"). The letter is always the leading token; letters
# inside option text are never read.
_BARE_LETTER = re.compile(r"([A-Z])")
_LETTER_WITH_TEXT = re.compile(r"(?:\(([A-Z])\)|([A-Z])[.):])(?:\s.*)?", re.DOTALL)

# SpatialCORE's answer: the whole text after the single </think> is one letter, either case (the public
# reference's `</think>\s*([A-D])\s*$`, case-insensitive).
_SPATIALCORE_ANSWER = re.compile(r"\s*([A-Za-z])\s*")

# A multiple-choice <answer> (SpatialThinker, DGE): the letter alone, or "(X)" / "X." / "X)" / "X:" and then
# optionally the option's text. Without a delimiter no text may follow, so "a bit left" is never "A".
_CHOICE_PARENTHESIZED = re.compile(r"\(\s*([A-Za-z])\s*\)\s*(.*)", re.DOTALL)
_CHOICE_DELIMITED = re.compile(r"([A-Za-z])[.):](?:\s+(.*))?", re.DOTALL)
_CHOICE_BARE = re.compile(r"([A-Za-z])")
_SPACES = re.compile(r"\s+")

SPATIALTHINKER_TAGS = (
    "<observe>",
    "</observe>",
    "<scene>",
    "</scene>",
    "<think>",
    "</think>",
    "<answer>",
    "</answer>",
)
# Object ids "name.N"; the name may hold several words, digits, hyphens and apostrophes.
SCENE_ID_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_' \-]*\.\d+")
SCENE_OBJECT_KEYS = frozenset({"id", "bbox"})
SCENE_RELATION_KEYS = frozenset({"subject", "predicate", "object"})


def completion_text(completion: Any) -> str:
    """Return the text of one completion as TRL passes it: a string or a chat message list.

    Args:
        completion (`str` or `list[dict]`):
            A plain string, or a conversational completion ``[{"role": "assistant", "content": ...}]``
            whose content is a string or a list of ``{"type": "text", "text": ...}`` parts.

    Returns:
        `str`: the text; ``""`` for anything that holds no text.

    >>> completion_text([{"role": "assistant", "content": "</think>A"}])
    '</think>A'
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return _content_text(completion.get("content"))
    if isinstance(completion, (list, tuple)):
        return "".join(
            _content_text(message.get("content")) if isinstance(message, dict) else _content_text(message)
            for message in completion
        )
    return ""


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return ""


def parse_option_letter(text: str | None) -> str | None:
    """Read the option letter of a gold answer cell, never from inside option text.

    Accepted: ``"B"``, ``"(B)"``, ``"B."``, ``"B)"``, ``"B:"``, and those followed by option text
    after whitespace (``"B. Go a bit right"``). Letters must be capitals. Model answers are read by
    the grammar of their format instead (:func:`read_spatialcore_answer`, :func:`read_choice_answer`).

    Args:
        text (`str` or `None`): the answer string (already cut out of the completion).

    Returns:
        `str` or `None`: the letter, or ``None`` when the string is not one of the accepted forms.

    >>> parse_option_letter("B. Go a bit right"), parse_option_letter("a bit"), parse_option_letter("A or B")
    ('B', None, None)
    """
    if not isinstance(text, str):
        return None
    stripped = text.strip()
    if _BARE_LETTER.fullmatch(stripped):
        return stripped
    match = _LETTER_WITH_TEXT.fullmatch(stripped)
    if match is None:
        return None
    return match.group(1) or match.group(2)


def gold_option_letter(answer: Any, n_options: int) -> str:
    """Normalise a gold ``answer`` cell (a letter derived upstream from the integer index).

    A bare letter is accepted in either case; a leading letter of the form ``"B. text"`` or
    ``"(B) text"`` is read from its first token only. Anything else raises.

    Args:
        answer (`str`): the gold letter cell.
        n_options (`int`): number of options; ``0`` means the options are drawn in the image (A-D).

    Returns:
        `str`: the upper-case gold letter.

    Raises:
        `ValueError`: when the cell is not a letter, or the letter is beyond the options.

    >>> gold_option_letter("B. Go a bit right", 4)
    'B'
    """
    stripped = answer.strip() if isinstance(answer, str) else ""
    letter = stripped.upper() if len(stripped) == 1 and stripped.isalpha() else parse_option_letter(stripped)
    if letter is None:
        raise ValueError(f"gold answer {answer!r} is not an option letter")
    if not is_allowed_letter(letter, n_options):
        raise ValueError(f"gold answer {answer!r} is beyond the {n_options} options")
    return letter


def read_spatialcore_answer(answer_text: str | None) -> str | None:
    """The option letter of a SpatialCORE answer: the text after ``</think>`` is one letter, alone.

    Either case is accepted (as the public reference's ``</think>\\s*([A-D])\\s*$`` with ``re.I``) and
    returned upper-case; surrounding whitespace is ignored. Anything else (``"(B)"``, ``"B."``,
    ``"B. text"``, prose) is no answer: the prompt asks for the letter and nothing else.

    >>> read_spatialcore_answer(" b\\n"), read_spatialcore_answer("(B)"), read_spatialcore_answer("a bit")
    ('B', None, None)
    """
    if not isinstance(answer_text, str):
        return None
    match = _SPATIALCORE_ANSWER.fullmatch(answer_text)
    return match.group(1).upper() if match else None


@dataclass(frozen=True)
class ChoiceAnswer:
    """A multiple-choice ``<answer>`` read by :func:`read_choice_answer`.

    Attributes:
        letter: the option letter, upper-case.
        option_text: the option text written after the letter, stripped; ``None`` when only the
            letter was given.
    """

    letter: str
    option_text: str | None


def read_choice_answer(text: str | None) -> ChoiceAnswer | None:
    """Read a multiple-choice ``<answer>`` (SpatialThinker and DGE formats).

    Accepted (letters in either case): the letter alone (``"B"``); ``"(B)"``, ``"B."``, ``"B)"``,
    ``"B:"``; and those followed by the option's text (``"(B) red car"``, ``"B. red car"``; after
    ``.``, ``)`` or ``:`` a space must come first). No text may follow a letter without a delimiter,
    so ``"a bit left"`` is never read as ``A``. Whether the text is that option's text is for the
    caller to check (:func:`choice_answer_matches`).

    Returns:
        [`ChoiceAnswer`] or `None` when the string is not one of the accepted forms.

    >>> read_choice_answer("C. Turn a bit to the left")
    ChoiceAnswer(letter='C', option_text='Turn a bit to the left')
    >>> read_choice_answer("(c)"), read_choice_answer("A bit to the left"), read_choice_answer("A or B")
    (ChoiceAnswer(letter='C', option_text=None), None, None)
    """
    if not isinstance(text, str):
        return None
    stripped = text.strip()
    match = _CHOICE_PARENTHESIZED.fullmatch(stripped) or _CHOICE_DELIMITED.fullmatch(stripped)
    if match is None:
        match = _CHOICE_BARE.fullmatch(stripped)
        return ChoiceAnswer(match.group(1).upper(), None) if match else None
    option_text = (match.group(2) or "").strip()
    return ChoiceAnswer(match.group(1).upper(), option_text or None)


def normalize_option_text(text: str) -> str:
    """Option text for comparison: case-folded, spaces collapsed, a final period dropped.

    >>> normalize_option_text("  Turn a bit   to the LEFT. ")
    'turn a bit to the left'
    """
    return _SPACES.sub(" ", text.strip().casefold()).rstrip(".").strip()


def choice_answer_matches(
    answer: ChoiceAnswer | None,
    gold_letter: str,
    gold_text: str | None,
    *,
    accept_letter_only: bool = True,
) -> bool:
    """Whether a read ``<answer>`` names the gold option.

    The letter must be the gold letter. Option text written after it must be the gold option's text
    (:func:`normalize_option_text`; an answer whose text belongs to another option contradicts
    itself and is wrong); it is not checked when the gold text is unknown (options drawn in the
    image). A letter without text counts when ``accept_letter_only``.

    >>> gold = ("C", "Turn a bit to the left")
    >>> choice_answer_matches(read_choice_answer("C. turn a bit to the left"), *gold)
    True
    >>> choice_answer_matches(read_choice_answer("(C) Turn a bit to the right"), *gold)
    False
    """
    if answer is None or answer.letter != gold_letter:
        return False
    if answer.option_text is None:
        return accept_letter_only
    if gold_text is None or not gold_text.strip():
        return True
    return normalize_option_text(answer.option_text) == normalize_option_text(gold_text)


def allowed_letters(n_options: int) -> str:
    """Letters a multiple-choice answer may take: ``A``.. for ``n_options``, A-D when ``0``.

    >>> allowed_letters(3), allowed_letters(0)
    ('ABC', 'ABCD')
    """
    count = n_options if n_options > 0 else 4
    return "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[: min(count, 26)]


def is_allowed_letter(letter: Any, n_options: int) -> TypeGuard[str]:
    """Whether ``letter`` is one option letter among ``n_options`` (A-D when ``0``).

    >>> is_allowed_letter("B", 2), is_allowed_letter("C", 2), is_allowed_letter(None, 2), is_allowed_letter("AB", 4)
    (True, False, False, False)
    """
    return isinstance(letter, str) and len(letter) == 1 and letter in allowed_letters(n_options)


def label_words(label: str) -> frozenset[str]:
    """Lower-case alphanumeric words of a label, as a set.

    >>> sorted(label_words("Black sedan, ahead!"))
    ['ahead', 'black', 'sedan']
    """
    return frozenset(_WORD.findall(label.lower()))


# ---------------------------------------------------------------------------------------------
# SpatialCORE
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedBox:
    """One ``{"bbox_2d": [...], "label": ...}`` entry found in a completion.

    Attributes:
        coords: the four coordinates as integers when valid, else whatever could be read (may be
            fewer than four; non-integers are left out).
        label: the label string, JSON-unescaped.
        span: character span of the whole entry in the completion.
        coord_spans: character spans of the digits of each coordinate (four when valid).
        in_reasoning: the entry ends inside the reasoning segment (before the first ``</think>``).
        problem: why the box is invalid, ``None`` when valid.
    """

    coords: tuple[int, ...]
    label: str
    span: tuple[int, int]
    coord_spans: tuple[tuple[int, int], ...]
    in_reasoning: bool
    problem: str | None

    @property
    def is_valid(self) -> bool:
        """True when the box has four integer coordinates in 0..1000, positive area and a label."""
        return self.problem is None


@dataclass(frozen=True)
class SpatialCoreParse:
    """Structured parse of one SpatialCORE completion.

    Attributes:
        text: the completion text.
        reasoning_end: character offset where the reasoning segment ends (first ``</think>``, or the
            end of the text when there is none).
        n_think_close: number of ``</think>`` tags.
        truncated: no ``</think>`` at all (the rollout did not finish its reasoning).
        answer_text: text after the single ``</think>``, stripped; ``None`` without exactly one.
        answer_letter: the option letter of ``answer_text`` (:func:`read_spatialcore_answer`: one
            letter alone, upper-cased), or ``None``.
        answer_is_single_letter: ``answer_text`` is one letter alone (``answer_letter`` is set).
        boxes: every box entry found anywhere in the completion, in order.
        malformed_box_entries: ``"bbox_2d"`` keys in the reasoning segment that do not form a box
            entry of the grammar.
        boxes_after_reasoning: ``"bbox_2d"`` keys after the reasoning segment (entries or not).
        stray_think_open: a ``<think>`` tag other than an optional leading one.
        problems: human-readable reasons why the completion is malformed (empty when well formed).
    """

    text: str
    reasoning_end: int
    n_think_close: int
    truncated: bool
    answer_text: str | None
    answer_letter: str | None
    answer_is_single_letter: bool
    boxes: tuple[ParsedBox, ...]
    malformed_box_entries: int
    boxes_after_reasoning: int
    stray_think_open: bool
    problems: tuple[str, ...]

    @property
    def grounding_boxes(self) -> tuple[ParsedBox, ...]:
        """Valid boxes of the reasoning segment, in order: the boxes the spatial reward scores."""
        return tuple(box for box in self.boxes if box.is_valid and box.in_reasoning)

    @property
    def reasoning_boxes(self) -> tuple[ParsedBox, ...]:
        """All box entries (valid or not) of the reasoning segment."""
        return tuple(box for box in self.boxes if box.in_reasoning)

    @property
    def has_valid_structure(self) -> bool:
        """Reasoning closed by exactly one ``</think>`` and followed by a single answer letter."""
        return self.n_think_close == 1 and self.answer_is_single_letter and not self.stray_think_open


def _unescape_label(raw: str) -> str:
    try:
        value = json.loads(f'"{raw}"')
    except ValueError:
        return raw
    return value if isinstance(value, str) else raw


def _parse_box_entry(match: re.Match[str], reasoning_end: int) -> ParsedBox:
    coords_text = match.group("coords")
    coords_offset = match.start("coords")
    coords: list[int] = []
    coord_spans: list[tuple[int, int]] = []
    problem: str | None = None
    pieces = list(_COORDINATE_PIECE.finditer(coords_text))
    if len(pieces) != 4 or coords_text.count(",") != 3:
        problem = f"box has {len(pieces)} coordinates, expected 4"
    for piece in pieces:
        stripped = piece.group().strip()
        if not stripped:
            problem = problem or "empty coordinate"
            continue
        if not _INTEGER.fullmatch(stripped):
            problem = problem or f"coordinate {stripped[:20]!r} is not a non-negative integer"
            continue
        start = coords_offset + piece.start() + piece.group().index(stripped)
        coord_spans.append((start, start + len(stripped)))
        if len(stripped) > _MAX_COORDINATE_DIGITS:
            problem = problem or "coordinate out of 0..1000"
            coords.append(GRID_MAX + 1)
            continue
        coords.append(int(stripped))
    label = _unescape_label(match.group("label"))
    if problem is None:
        x1, y1, x2, y2 = coords
        if any(value > GRID_MAX for value in coords):
            problem = "coordinate out of 0..1000"
        elif x2 <= x1 or y2 <= y1:
            problem = "box has no area (needs x2 > x1 and y2 > y1)"
        elif not label_words(label):
            problem = "box label has no words"
    return ParsedBox(
        coords=tuple(coords),
        label=label,
        span=(match.start(), match.end()),
        coord_spans=tuple(coord_spans),
        in_reasoning=match.end() <= reasoning_end,
        problem=problem,
    )


def parse_spatialcore(completion: Any) -> SpatialCoreParse:
    """Parse a SpatialCORE completion (boxes, reasoning, ``</think>``, one answer letter).

    An optional leading ``<think>`` is tolerated (some chat templates return it); any other
    ``<think>`` is a stray tag. The answer letter is read only when there is exactly one
    ``</think>``; a truncated completion (no ``</think>``) has no answer.

    Args:
        completion (`str` or `list[dict]`): the completion (string or chat message list).

    Returns:
        [`SpatialCoreParse`]

    >>> parse_spatialcore("reasoning that never ends").truncated
    True
    >>> parse_spatialcore("done</think>\\nc").answer_letter
    'C'
    >>> parse_spatialcore("done</think>(C)").answer_letter is None
    True
    """
    text = completion_text(completion)
    problems: list[str] = []
    body_start = 0
    leading = len(text) - len(text.lstrip())
    if text.startswith(THINK_OPEN, leading):
        body_start = leading + len(THINK_OPEN)
    stray_think_open = text.find(THINK_OPEN, body_start) >= 0
    if stray_think_open:
        problems.append("stray <think> tag inside the completion")

    n_close = text.count(THINK_CLOSE)
    first_close = text.find(THINK_CLOSE)
    reasoning_end = first_close if first_close >= 0 else len(text)
    answer_text: str | None = None
    if n_close == 0:
        problems.append("no </think>: the completion did not finish its reasoning")
    elif n_close > 1:
        problems.append(f"{n_close} </think> tags, expected exactly one")
    else:
        answer_text = text[first_close + len(THINK_CLOSE) :].strip()

    answer_letter = read_spatialcore_answer(answer_text)
    answer_is_single_letter = answer_letter is not None
    if answer_text is not None and not answer_is_single_letter:
        problems.append("the text after </think> is not a single answer letter")

    boxes = tuple(_parse_box_entry(match, reasoning_end) for match in BOX_ENTRY_PATTERN.finditer(text))
    malformed_in_reasoning = 0
    after_reasoning = 0
    entry_index = 0  # entries and keys are both in text order: one merge pass
    for position in _find_all(text, BOX_KEY):
        if position >= reasoning_end:
            after_reasoning += 1
            continue
        while entry_index < len(boxes) and boxes[entry_index].span[1] <= position:
            entry_index += 1
        if not (entry_index < len(boxes) and boxes[entry_index].span[0] <= position):
            malformed_in_reasoning += 1
    if after_reasoning:
        problems.append(f"{after_reasoning} bbox entries after </think>")
    if malformed_in_reasoning:
        problems.append(f"{malformed_in_reasoning} malformed bbox entries")
    invalid = sum(1 for box in boxes if box.in_reasoning and not box.is_valid)
    if invalid:
        problems.append(f"{invalid} invalid boxes in the reasoning")

    return SpatialCoreParse(
        text=text,
        reasoning_end=reasoning_end,
        n_think_close=n_close,
        truncated=n_close == 0,
        answer_text=answer_text,
        answer_letter=answer_letter,
        answer_is_single_letter=answer_is_single_letter,
        boxes=boxes,
        malformed_box_entries=malformed_in_reasoning,
        boxes_after_reasoning=after_reasoning,
        stray_think_open=stray_think_open,
        problems=tuple(problems),
    )


def _find_all(text: str, needle: str) -> list[int]:
    positions = []
    start = text.find(needle)
    while start >= 0:
        positions.append(start)
        start = text.find(needle, start + 1)
    return positions


# ---------------------------------------------------------------------------------------------
# SpatialThinker
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SceneObject:
    """A scene-graph object: ``id`` ("name.N"), its ``name`` (id without the ``.N``) and box."""

    id: str
    name: str
    bbox: tuple[float, float, float, float]


@dataclass(frozen=True)
class SceneRelation:
    """A scene-graph relation triplet between object ids."""

    subject: str
    predicate: str
    object: str


@dataclass(frozen=True)
class SpatialThinkerParse:
    """Structured parse of one SpatialThinker completion.

    Attributes:
        text: the completion text.
        tags_ok: each of the eight tags appears exactly once, in template order.
        scene_ok: the ``<scene>`` JSON is an object whose objects and relationships are all valid
            and whose object ids are unique.
        answer_text: content of the single closed ``<answer>...</answer>``, stripped; else ``None``.
        objects: the predicted objects (empty unless ``scene_ok``).
        relations: the predicted relations (empty unless ``scene_ok``).
        problems: reasons why the completion is malformed.
    """

    text: str
    tags_ok: bool
    scene_ok: bool
    answer_text: str | None
    objects: tuple[SceneObject, ...]
    relations: tuple[SceneRelation, ...]
    problems: tuple[str, ...]

    @property
    def format_ok(self) -> bool:
        """The SpatialThinker format reward condition: tags in order and a valid scene."""
        return self.tags_ok and self.scene_ok


def scene_object_name(object_id: str) -> str:
    """The object name of an id ``"name.N"`` (``"traffic light.1"`` -> ``"traffic light"``).

    >>> scene_object_name("traffic light.12")
    'traffic light'
    """
    head, dot, tail = object_id.rpartition(".")
    if dot and tail.isdigit():
        return head
    return object_id


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _scene_object(item: Any) -> SceneObject | str:
    if not isinstance(item, dict):
        return "scene object is not a JSON object"
    if set(item.keys()) != SCENE_OBJECT_KEYS:
        return f"scene object keys {sorted(map(str, item.keys()))} are not exactly ['bbox', 'id']"
    object_id, bbox = item["id"], item["bbox"]
    if not isinstance(object_id, str) or not SCENE_ID_PATTERN.fullmatch(object_id):
        return f"object id {str(object_id)[:40]!r} is not of the form 'name.N'"
    if not isinstance(bbox, list) or len(bbox) != 4 or not all(_is_number(value) for value in bbox):
        return f"object {object_id!r} bbox is not 4 finite numbers"
    x1, y1, x2, y2 = (float(value) for value in bbox)
    if x2 <= x1 or y2 <= y1:
        return f"object {object_id!r} bbox has no area"
    return SceneObject(id=object_id, name=scene_object_name(object_id), bbox=(x1, y1, x2, y2))


def _scene_relation(item: Any) -> SceneRelation | str:
    if not isinstance(item, dict) or not SCENE_RELATION_KEYS.issubset(item.keys()):
        return "relation is not an object with subject, predicate and object"
    subject, predicate, obj = item["subject"], item["predicate"], item["object"]
    if not all(isinstance(value, str) for value in (subject, predicate, obj)):
        return "relation fields must be strings"
    if not SCENE_ID_PATTERN.fullmatch(subject) or not SCENE_ID_PATTERN.fullmatch(obj):
        return "relation subject/object are not object ids 'name.N'"
    return SceneRelation(subject=subject, predicate=predicate, object=obj)


def load_json(text: str) -> tuple[Any, str | None]:
    """``json.loads`` that never raises: returns ``(value, None)`` or ``(None, reason)``.

    >>> load_json("[1, 2]"), load_json("{")[1] is not None
    (([1, 2], None), True)
    """
    try:
        return json.loads(text), None
    except (ValueError, RecursionError) as error:
        return None, f"invalid JSON: {type(error).__name__}"


def parse_scene_json(scene_text: str) -> tuple[tuple[SceneObject, ...], tuple[SceneRelation, ...], list[str]]:
    """Validate a scene-graph JSON string; returns objects, relations and problems.

    Objects and relations are returned only when the whole scene is valid (as the reference's
    format check: one bad object makes the scene invalid).

    >>> objects, relations, problems = parse_scene_json('{"objects": [{"id": "cup.1", "bbox": [1, 2, 3, 4]}]}')
    >>> objects[0].name, relations, problems
    ('cup', (), [])
    """
    value, error = load_json(scene_text.strip())
    if error is not None:
        return (), (), [f"scene: {error}"]
    if not isinstance(value, dict):
        return (), (), ["scene JSON is not an object"]
    raw_objects = value.get("objects", [])
    raw_relations = value.get("relationships", [])
    if not isinstance(raw_objects, list) or not isinstance(raw_relations, list):
        return (), (), ["scene objects/relationships are not lists"]
    problems: list[str] = []
    objects: list[SceneObject] = []
    for item in raw_objects:
        parsed = _scene_object(item)
        if isinstance(parsed, str):
            problems.append(parsed)
        else:
            objects.append(parsed)
    relations: list[SceneRelation] = []
    for item in raw_relations:
        parsed_relation = _scene_relation(item)
        if isinstance(parsed_relation, str):
            problems.append(parsed_relation)
        else:
            relations.append(parsed_relation)
    ids = [obj.id for obj in objects]
    if len(ids) != len(set(ids)):
        problems.append("repeated object ids")
    if problems:
        return (), (), problems
    return tuple(objects), tuple(relations), problems


def _single_span(text: str, open_tag: str, close_tag: str) -> tuple[int, int] | None:
    """Inner span of ``open_tag ... close_tag`` when each occurs exactly once and in order."""
    if text.count(open_tag) != 1 or text.count(close_tag) != 1:
        return None
    start = text.find(open_tag) + len(open_tag)
    end = text.find(close_tag)
    if end < start:
        return None
    return start, end


def parse_spatialthinker(completion: Any) -> SpatialThinkerParse:
    """Parse a SpatialThinker completion (observe, scene JSON, think, answer).

    Args:
        completion (`str` or `list[dict]`): the completion.

    Returns:
        [`SpatialThinkerParse`]

    >>> text = ('<observe>a cup</observe><scene>{"objects": [{"id": "cup.1", "bbox": [1, 2, 30, 40]}], '
    ...         '"relationships": []}</scene><think>left</think><answer>(A) left</answer>')
    >>> parse = parse_spatialthinker(text)
    >>> parse.format_ok, parse.answer_text, parse.objects[0].id
    (True, '(A) left', 'cup.1')
    """
    text = completion_text(completion)
    problems: list[str] = []
    positions: list[int] = []
    tags_ok = True
    for tag in SPATIALTHINKER_TAGS:
        count = text.count(tag)
        if count != 1:
            tags_ok = False
            problems.append(f"{tag} appears {count} times, expected once")
        positions.append(text.find(tag))
    if tags_ok and positions != sorted(positions):
        tags_ok = False
        problems.append("tags are not in the order observe, scene, think, answer")

    answer_span = _single_span(text, "<answer>", "</answer>")
    answer_text = text[answer_span[0] : answer_span[1]].strip() if answer_span is not None else None
    if answer_text is None:
        problems.append("no single closed <answer>")

    objects: tuple[SceneObject, ...] = ()
    relations: tuple[SceneRelation, ...] = ()
    scene_ok = False
    scene_span = _single_span(text, "<scene>", "</scene>")
    if scene_span is None:
        problems.append("no single closed <scene>")
    else:
        objects, relations, scene_problems = parse_scene_json(text[scene_span[0] : scene_span[1]])
        scene_ok = not scene_problems
        problems.extend(scene_problems)
    return SpatialThinkerParse(
        text=text,
        tags_ok=tags_ok,
        scene_ok=scene_ok,
        answer_text=answer_text,
        objects=objects,
        relations=relations,
        problems=tuple(problems),
    )


# ---------------------------------------------------------------------------------------------
# <think>...</think><answer>...</answer>
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ThinkAnswerParse:
    """Structured parse of a ``<think>...</think><answer>...</answer>`` completion.

    Attributes:
        text: the completion text.
        format_ok: an optional leading ``<think>``, exactly one ``</think>``, then exactly one
            ``<answer>...</answer>`` with only whitespace around it.
        answer_text: content of the single closed ``<answer>`` after the reasoning, stripped;
            ``None`` without one.
        problems: reasons why the completion is malformed.
    """

    text: str
    format_ok: bool
    answer_text: str | None
    problems: tuple[str, ...]


def parse_think_answer(completion: Any) -> ThinkAnswerParse:
    """Parse a ``<think>...</think><answer>...</answer>`` completion.

    ``<think>`` may be missing when the chat template opened it. An answer is read only from a
    single closed ``<answer>`` that follows the (single) ``</think>``.

    >>> parse_think_answer("<think>2 + 2</think><answer>4 m</answer>").answer_text
    '4 m'
    >>> parse_think_answer("<think>2 + 2</think><answer>4 m").answer_text is None
    True
    """
    text = completion_text(completion)
    problems: list[str] = []
    n_open, n_close = text.count(THINK_OPEN), text.count(THINK_CLOSE)
    think_close = text.find(THINK_CLOSE)
    if n_close != 1:
        problems.append(f"{n_close} </think> tags, expected exactly one")
    if n_open > 1 or (n_open == 1 and not text.lstrip().startswith(THINK_OPEN)):
        problems.append("<think> must appear at most once, at the start")
    answer_span = _single_span(text, "<answer>", "</answer>")
    answer_text: str | None = None
    if answer_span is None:
        problems.append("no single closed <answer>")
    elif n_close > 1 or (n_close == 1 and answer_span[0] < think_close):
        problems.append("<answer> is not after the reasoning")
    else:
        answer_text = text[answer_span[0] : answer_span[1]].strip()
    format_ok = not problems
    if format_ok and answer_span is not None:
        between = text[think_close + len(THINK_CLOSE) : answer_span[0] - len("<answer>")]
        after = text[answer_span[1] + len("</answer>") :]
        if between.strip() or after.strip():
            format_ok = False
            problems.append("text outside the <think> and <answer> blocks")
    return ThinkAnswerParse(text=text, format_ok=format_ok, answer_text=answer_text, problems=tuple(problems))
