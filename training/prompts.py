"""Prompts of the three training formats, with the model family's coordinate convention.

* `spatialcore`: SpatialCORE's grounded-reasoning system prompt (paper Sec. A.4, Fig. 7) for
  Qwen3-VL-Thinking, whose chat template already opens `<think>`: box lines first inside the
  reasoning (`{"bbox_2d": [x1, y1, x2, y2], "label": ...}`), then the reasoning, then `</think>`
  exactly once and a single option letter.
* `spatialthinker`: SpatialThinker's `<observe>`/`<scene>`/`<think>`/`<answer>` template with the
  `Image size: (W x H)` line (original-image pixels, as the STVQA ground truth is scored): STVQA's
  `problem` column when present, else built here. When the options are drawn in the image (no option
  texts), the prompt says so and asks for the letter.
* `dge`: `<think>...</think><answer>...</answer>` for the DGE tasks: an option letter, or a number
  with its unit.

Prompts are conversational message lists with string contents; the trainer inserts the images
into the first user message. The coordinate wording follows `data_contracts.boxes`: Qwen2-VL and
Qwen3-VL read and write the 0..1000 grid, Qwen2.5-VL absolute pixels.

>>> messages = build_messages("spatialcore", {"question": "Where is the cup?", "options": ["left", "right"]},
...                           family="qwen3_vl")
>>> [message["role"] for message in messages]
['system', 'user']
>>> print(messages[1]["content"])
Where is the cup?
Options:
A. left
B. right
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable, Sequence
from typing import Any

from data_contracts.boxes import MODEL_FAMILIES, UnknownModelFamilyError

PROMPT_FORMATS = ("spatialcore", "spatialthinker", "dge")
# The prompt format of each training table the pipeline writes.
FORMAT_OF_TABLE = {"spatialcore_train": "spatialcore", "stvqa": "spatialthinker", "dge_tasks": "dge"}
THINKING_TEMPLATE_FAMILIES = ("qwen3_vl",)

_COORDINATE_WORDING = {
    "qwen2_vl": "on a 0-1000 grid relative to the image width and height",
    "qwen3_vl": "on a 0-1000 grid relative to the image width and height",
    "qwen2_5_vl": "in absolute pixel coordinates of the image",
}

SPATIALCORE_SYSTEM_PROMPT = (
    "You answer spatial questions about an image by reasoning from grounded objects.\n\n"
    "{opening}Start your reasoning by listing the task-relevant objects: one line per physical object or "
    "person that the question or the options refer to and that is visible in the image, each line a JSON "
    "object\n"
    '{{"bbox_2d": [x1, y1, x2, y2], "label": "short noun phrase"}}\n'
    "with (x1, y1) the top-left and (x2, y2) the bottom-right corner of the object, as integers "
    '{coordinates}. Keep the words that tell instances apart in the label (for example "boy in orange '
    'clothes"). Do not box directions, distances, paths, regions or other spatial terms such as left, '
    "right, front or behind, and give each object one box.\n\n"
    "After the box lines, reason step by step about where the boxed objects are and how they relate.\n\n"
    "Then close your reasoning with </think> exactly once. After </think>, write only the letter of the "
    "correct option and nothing else."
)

SPATIALTHINKER_INSTRUCTION = (
    "You FIRST observe the image in <observe> </observe> tags, then write the scene graph of the objects "
    "relevant to the question in <scene> </scene> tags, followed by thinking about the reasoning process as "
    "an internal monologue within <think> </think> tags, and then provide the final answer within "
    "<answer> </answer> tags.\n"
    'The scene graph is a JSON object {{"objects": [{{"id": "name.1", "bbox": [x1, y1, x2, y2]}}], '
    '"relationships": [{{"subject": "name.1", "predicate": "relation", "object": "name.2"}}]}} with boxes in '
    "pixel coordinates of the image (x1, y1 top-left, x2, y2 bottom-right).\n"
    "Only return the final choice, with its option letter and text, within the answer tags, e.g. "
    "<answer> (A) cat </answer>.\n"
    "Image size: ({width} x {height})"
)

OPTIONS_IN_IMAGE_SPATIALCORE = "The options A-D are shown in the image."
OPTIONS_IN_IMAGE_SPATIALTHINKER = (
    "The options (A) to (D) are shown in the image: answer with the letter of the correct one, e.g. "
    "<answer> (A) </answer>."
)

DGE_INSTRUCTION_CHOICE = (
    "Think about the question inside <think> </think> tags, then give the letter of the correct option "
    "inside <answer> </answer> tags, e.g. <answer>B</answer>."
)
DGE_INSTRUCTION_NUMERIC = (
    "Think about the question inside <think> </think> tags, then give the answer as a number with its unit "
    "inside <answer> </answer> tags, e.g. <answer>{example}</answer>."
)


def option_letters(count: int) -> str:
    """The letters of `count` options.

    >>> option_letters(3)
    'ABC'
    """
    return string.ascii_uppercase[:count]


def as_option_list(options: Any) -> list[str]:
    """Options as a list of strings (a JSON string is decoded; `None` is no options).

    >>> as_option_list('["up", "down"]'), as_option_list(None)
    (['up', 'down'], [])
    """
    if options is None:
        return []
    if isinstance(options, str):
        decoded = json.loads(options) if options.strip().startswith("[") else [options]
        return [str(option) for option in decoded]
    return [str(option) for option in options]


def format_options(options: Sequence[str]) -> str:
    """`A. text` lines of the options.

    >>> print(format_options(["left", "right"]))
    A. left
    B. right
    """
    return "\n".join(
        f"{letter}. {text}" for letter, text in zip(option_letters(len(options)), options, strict=False)
    )


def coordinate_wording(family: str) -> str:
    """How the family writes box coordinates, for the prompts."""
    if family not in _COORDINATE_WORDING:
        raise UnknownModelFamilyError(family)
    return _COORDINATE_WORDING[family]


def spatialcore_system_prompt(family: str) -> str:
    """SpatialCORE's system prompt in `family`'s coordinate convention.

    Models whose chat template does not open `<think>` are asked to open it themselves.
    """
    opening = "" if family in THINKING_TEMPLATE_FAMILIES else "Begin your response with <think>. "
    return SPATIALCORE_SYSTEM_PROMPT.format(opening=opening, coordinates=coordinate_wording(family))


def spatialcore_messages(row: dict, family: str) -> list[dict]:
    """System prompt plus the question and its lettered options (or a pointer to the image's options)."""
    options = as_option_list(row.get("options"))
    question = str(row["question"]).strip()
    if options:
        user = f"{question}\nOptions:\n{format_options(options)}"
    else:
        user = f"{question}\n{OPTIONS_IN_IMAGE_SPATIALCORE}"
    return [
        {"role": "system", "content": spatialcore_system_prompt(family)},
        {"role": "user", "content": user},
    ]


def spatialthinker_question(row: dict) -> str:
    """The STVQA question with its options (`question_with_options`, else question and options).

    Without option texts (options drawn in the image) the question says where the options are.

    >>> print(spatialthinker_question({"question": "Which arrow points at the door?", "options": []}))
    Which arrow points at the door?
    The options (A) to (D) are shown in the image: answer with the letter of the correct one, e.g. <answer> (A) </answer>.
    """
    text = row.get("question_with_options")
    if isinstance(text, str) and text.strip():
        return text.strip()
    question = str(row.get("question_only") or row.get("question") or row.get("problem") or "").strip()
    options = as_option_list(row.get("options"))
    if not options:
        return f"{question}\n{OPTIONS_IN_IMAGE_SPATIALTHINKER}"
    lines = [
        f"({letter}) {text}" for letter, text in zip(option_letters(len(options)), options, strict=False)
    ]
    return question + "\nOptions:\n" + "\n".join(lines)


def spatialthinker_messages(row: dict, family: str) -> list[dict]:
    """SpatialThinker's user prompt.

    STVQA's `problem` column already holds it (template, `Image size: (W x H)` line, question with
    options); its `<image>` placeholder is dropped because the trainer inserts the image itself.
    Without `problem`, the prompt is built from the question, the template and the image size.
    """
    coordinate_wording(family)
    problem = row.get("problem")
    if isinstance(problem, str) and problem.strip():
        return [{"role": "user", "content": problem.replace("<image>", "").strip()}]
    instruction = SPATIALTHINKER_INSTRUCTION.format(
        width=int(row["image_width"]), height=int(row["image_height"])
    )
    return [{"role": "user", "content": f"{instruction}\nQ. {spatialthinker_question(row)}"}]


def dge_messages(row: dict, family: str) -> list[dict]:
    """DGE prompt: the question, lettered options or the unit of the numeric answer, the answer template."""
    coordinate_wording(family)
    options = as_option_list(row.get("options"))
    question = str(row["question"]).strip()
    if options:
        body = f"{question}\nOptions:\n{format_options(options)}\n{DGE_INSTRUCTION_CHOICE}"
    else:
        unit = row.get("unit")
        example = f"2.5 {unit}" if isinstance(unit, str) and unit.strip() else "2.5"
        body = f"{question}\n{DGE_INSTRUCTION_NUMERIC.format(example=example)}"
    return [{"role": "user", "content": body}]


PROMPT_BUILDERS: dict[str, Callable[[dict, str], list[dict]]] = {
    "spatialcore": spatialcore_messages,
    "spatialthinker": spatialthinker_messages,
    "dge": dge_messages,
}


def build_messages(prompt_format: str, row: dict, family: str) -> list[dict]:
    """The conversational prompt of one training row.

    Args:
        prompt_format (`str`): `"spatialcore"`, `"spatialthinker"` or `"dge"`.
        row (`dict`): the training-table row.
        family (`str`): the model family (`data_contracts.boxes` names it).

    Raises:
        `ValueError`: for an unknown format; `UnknownModelFamilyError` for an unknown family.
    """
    if prompt_format not in PROMPT_BUILDERS:
        raise ValueError(
            f"unknown prompt format {prompt_format!r}; expected one of {', '.join(PROMPT_FORMATS)}"
        )
    if family not in MODEL_FAMILIES or family not in _COORDINATE_WORDING:
        raise UnknownModelFamilyError(family)
    return PROMPT_BUILDERS[prompt_format](row, family)
