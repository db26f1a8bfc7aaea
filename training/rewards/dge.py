"""DGE answer reward (SpatialEvo tasks): exact letter match or mean relative accuracy.

Completions use ``<think>...</think><answer>...</answer>``. The answer is an option letter for
multiple-choice rows (``options`` non-empty) and a number with an optional unit for numeric rows.

* Multiple choice: accuracy 1 when the ``<answer>`` names the gold option: its letter (``"B"``,
  ``"(B)"``, ``"B."``, either case) and, when text follows the letter (``"B. right"``), that option's
  text; else 0. The grammar is :func:`~training.rewards.parsing.read_choice_answer`, the same as
  SpatialThinker's (tabled in ``training/rewards/README.md``).
* Numeric: mean relative accuracy as in VSI-Bench,
  ``MRA = 1/10 sum_{theta in {0.50, 0.55, ..., 0.95}} 1[ |y_hat - y| / |y| < 1 - theta ]``, after the
  predicted unit (m, cm, mm, km, ft, in, yd; m^2 / sq m, cm^2, ft^2; degrees, rad) is converted to
  the row's ``unit``. No unit means the row's unit; a unit of another dimension scores 0. With
  ``y = 0`` only an exact 0 scores.
* format in {0, 1}: the think/answer template holds and the answer has the expected form.
* total ``= answer_weight * accuracy + format_weight * format`` (defaults 1.0 and 0.1).

>>> score_dge("<think>about 2 m</think><answer>210 cm</answer>", answer="2.0", options=[],
...           numeric_answer=2.0, unit="m").accuracy
0.9
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from typing import Any

from training.rewards.parsing import (
    choice_answer_matches,
    gold_option_letter,
    is_allowed_letter,
    load_json,
    parse_think_answer,
    read_choice_answer,
)

logger = logging.getLogger(__name__)

MRA_THRESHOLDS = tuple(round(0.50 + 0.05 * step, 2) for step in range(10))


@dataclass(frozen=True)
class Unit:
    """A unit of measure: its ``dimension`` and ``factor`` to the dimension's base unit."""

    name: str
    dimension: str
    factor: float


_UNIT_ALIASES: dict[str, tuple[str, ...]] = {
    "m": ("m", "meter", "meters", "metre", "metres"),
    "cm": ("cm", "centimeter", "centimeters", "centimetre", "centimetres"),
    "mm": ("mm", "millimeter", "millimeters", "millimetre", "millimetres"),
    "km": ("km", "kilometer", "kilometers", "kilometre", "kilometres"),
    "ft": ("ft", "foot", "feet", "'"),
    "in": ("in", "inch", "inches", '"'),
    "yd": ("yd", "yard", "yards"),
    "m^2": (
        "m^2",
        "m2",
        "m²",
        "sq m",
        "sqm",
        "sq. m",
        "sq meter",
        "sq meters",
        "square meter",
        "square meters",
        "square metre",
        "square metres",
        "meters squared",
        "metres squared",
        "sq. meters",
    ),
    "cm^2": ("cm^2", "cm2", "cm²", "sq cm", "square centimeter", "square centimeters"),
    "ft^2": ("ft^2", "ft2", "ft²", "sq ft", "sq. ft", "sqft", "square foot", "square feet"),
    "deg": ("degrees", "degree", "deg", "°"),
    "rad": ("rad", "radian", "radians"),
}
_UNIT_DEFINITIONS = {
    "m": ("length", 1.0),
    "cm": ("length", 0.01),
    "mm": ("length", 0.001),
    "km": ("length", 1000.0),
    "ft": ("length", 0.3048),
    "in": ("length", 0.0254),
    "yd": ("length", 0.9144),
    "m^2": ("area", 1.0),
    "cm^2": ("area", 1e-4),
    "ft^2": ("area", 0.09290304),
    "deg": ("angle", 1.0),
    "rad": ("angle", 180.0 / math.pi),
}
UNITS: dict[str, Unit] = {
    alias: Unit(name, *_UNIT_DEFINITIONS[name])
    for name, aliases in _UNIT_ALIASES.items()
    for alias in aliases
}
_UNIT_PATTERN = re.compile(
    r"\s*("
    + "|".join(re.escape(alias) for alias in sorted(UNITS, key=len, reverse=True))
    + r")(?![a-z0-9²])",
    re.IGNORECASE,
)
_NUMBER_PATTERN = re.compile(
    r"(?<![\w.])([-+]?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?)"
)
_FEET_INCHES = re.compile(
    r"(?<![\d.])(\d+(?:\.\d+)?)\s*(?:ft|feet|foot|')\s*(\d+(?:\.\d+)?)\s*(?:in|inch|inches|\")", re.IGNORECASE
)
# fmt: off
_NUMBER_WORDS = {
    word: value
    for value, word in enumerate((
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
        "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty",
    ))
}
# fmt: on
_FIRST_WORD = re.compile(r"[a-z]+")


def parse_unit(text: Any) -> Unit | None:
    """Read a unit name (``"m"``, ``"sq m"``, ``"degrees"``...), or ``None``.

    >>> parse_unit("square meters").name, parse_unit("cm").dimension, parse_unit("chairs")
    ('m^2', 'length', None)
    """
    if not isinstance(text, str):
        return None
    match = _UNIT_PATTERN.match(text.strip())
    if match is None or match.end() != len(text.strip()):
        return None
    return UNITS.get(match.group(1).lower()) or UNITS.get(match.group(1))


def parse_quantity(text: Any) -> tuple[float, Unit | None] | None:
    """First number of an answer with the unit written right after it, or ``None``.

    ``5 ft 3 in`` is read as one length; number words up to twenty are read for counts.

    >>> value, unit = parse_quantity("about 2.5 m")
    >>> value, unit.name
    (2.5, 'm')
    >>> parse_quantity("three")
    (3.0, None)
    """
    if not isinstance(text, str):
        return None
    compound = _FEET_INCHES.search(text)
    number = _NUMBER_PATTERN.search(text)
    if compound is not None and (number is None or compound.start() <= number.start()):
        feet, inches = float(compound.group(1)), float(compound.group(2))
        return feet + inches / 12.0, UNITS["ft"]
    if number is None:
        word = _FIRST_WORD.search(text.lower())
        if word is not None and word.group() in _NUMBER_WORDS:
            return float(_NUMBER_WORDS[word.group()]), None
        return None
    try:
        value = float(number.group(1).replace(",", ""))
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    unit_match = _UNIT_PATTERN.match(text, number.end())
    unit = None
    if unit_match is not None:
        unit = UNITS.get(unit_match.group(1).lower()) or UNITS.get(unit_match.group(1))
    return value, unit


def convert(value: float, source: Unit | None, target: Unit | None) -> float | None:
    """Convert ``value`` from ``source`` to ``target``; ``None`` across dimensions.

    A missing source unit means the target unit; a missing target leaves the value as it is.

    >>> convert(250.0, UNITS["cm"], UNITS["m"]), convert(1.0, UNITS["m"], UNITS["m^2"])
    (2.5, None)
    """
    if source is None or target is None:
        return value
    if source.dimension != target.dimension:
        return None
    return value * source.factor / target.factor


def mean_relative_accuracy(predicted: float, target: float) -> float:
    """VSI-Bench MRA: share of thresholds 0.50..0.95 with relative error below ``1 - theta``.

    >>> mean_relative_accuracy(2.1, 2.0), mean_relative_accuracy(3.0, 2.0), mean_relative_accuracy(0.0, 0.0)
    (0.9, 0.0, 1.0)
    """
    if not (math.isfinite(predicted) and math.isfinite(target)):
        return 0.0
    if target == 0.0:
        return 1.0 if predicted == 0.0 else 0.0
    error = abs(predicted - target) / abs(target)
    hits = sum(1 for threshold in MRA_THRESHOLDS if error < round(1.0 - threshold, 2))
    return hits / len(MRA_THRESHOLDS)


@dataclass(frozen=True)
class DgeConfig:
    """Weights of the DGE reward.

    Args:
        answer_weight (`float`, defaults to `1.0`): weight of the accuracy term.
        format_weight (`float`, defaults to `0.1`): weight of the format term.
    """

    answer_weight: float = 1.0
    format_weight: float = 0.1

    def __post_init__(self) -> None:
        for name in ("answer_weight", "format_weight"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"DgeConfig.{name} must be finite and >= 0, got {value!r}")

    @property
    def total_range(self) -> tuple[float, float]:
        """Bounds of ``DgeScore.total``."""
        return 0.0, self.answer_weight + self.format_weight


@dataclass(frozen=True)
class DgeScore:
    """Terms of the DGE reward for one completion.

    Attributes:
        total: ``answer_weight * accuracy + format_weight * format``.
        format: 0 or 1.
        accuracy: 0/1 for multiple choice, MRA in ``[0, 1]`` for numeric rows.
        kind: ``"choice"`` or ``"numeric"``.
        has_answer: an answer of the expected form was read.
        predicted_letter: the letter read (multiple choice).
        predicted_value: the number read, converted to the row's unit (numeric).
        problems: reasons the completion is malformed.
    """

    total: float
    format: float
    accuracy: float
    kind: str
    has_answer: bool
    predicted_letter: str | None
    predicted_value: float | None
    problems: tuple[str, ...]


def _option_list(options: Any) -> list[Any]:
    if options is None:
        return []
    if isinstance(options, str):
        value, error = load_json(options)
        return list(value) if error is None and isinstance(value, list) else [options]
    return list(options)


def _gold_value(answer: Any, numeric_answer: Any) -> float:
    if numeric_answer is not None:
        try:
            value = float(numeric_answer)
        except (TypeError, ValueError) as error:
            raise ValueError(f"numeric_answer {numeric_answer!r} is not a number") from error
        if math.isfinite(value):
            return value
    quantity = parse_quantity(answer)
    if quantity is None:
        raise ValueError(f"numeric row without a readable gold value (answer={answer!r})")
    return quantity[0]


def score_dge(
    completion: Any,
    *,
    answer: Any,
    options: Any,
    numeric_answer: Any = None,
    unit: Any = None,
    task_type: str | None = None,
    config: DgeConfig | None = None,
) -> DgeScore:
    """Score one DGE completion.

    Args:
        completion (`str` or `list[dict]`): the completion.
        answer (`str`): gold letter for multiple choice, the value as text for numeric rows.
        options (`list[str]`): option texts; empty for numeric rows.
        numeric_answer (`float`, *optional*): gold value of a numeric row (in ``unit``).
        unit (`str`, *optional*): unit of the gold value (``"m"``, ``"m^2"``, ``"degrees"``...).
        task_type (`str`, *optional*): the DGE task type (only used in log messages).
        config ([`DgeConfig`], *optional*): weights.

    Returns:
        [`DgeScore`]

    Raises:
        `ValueError`: when the row's gold answer cannot be read.

    >>> score_dge("<think>..</think><answer>(B)</answer>", answer="B", options=["left", "right"]).total
    1.1
    """
    config = config or DgeConfig()
    option_list = _option_list(options)
    parse = parse_think_answer(completion)
    problems = list(parse.problems)
    if option_list:
        gold = gold_option_letter(answer, len(option_list))
        read = read_choice_answer(parse.answer_text)
        letter = (
            read.letter if read is not None and is_allowed_letter(read.letter, len(option_list)) else None
        )
        gold_text = str(option_list["ABCDEFGHIJKLMNOPQRSTUVWXYZ".index(gold)])
        correct = letter is not None and choice_answer_matches(read, gold, gold_text)
        if (
            read is not None
            and letter is not None
            and read.option_text is not None
            and not correct
            and letter == gold
        ):
            problems.append("the option text after the letter is not that option's text")
        accuracy = 1.0 if correct else 0.0
        has_answer = letter is not None
        kind, value = "choice", None
    else:
        gold_value = _gold_value(answer, numeric_answer)
        target_unit = parse_unit(unit) if isinstance(unit, str) and unit.strip() else None
        if isinstance(unit, str) and unit.strip() and target_unit is None:
            logger.debug("unknown unit %r for task %s; comparing values as written", unit, task_type)
        quantity = parse_quantity(parse.answer_text)
        value = None
        if quantity is not None:
            answer_unit = quantity[1]
            value = convert(quantity[0], answer_unit, target_unit)
            if value is None:
                assert answer_unit is not None and target_unit is not None  # `convert` gives None only then
                problems.append(
                    f"answer unit {answer_unit.name} does not measure the row's {target_unit.name}"
                )
        accuracy = mean_relative_accuracy(value, gold_value) if value is not None else 0.0
        has_answer = value is not None
        kind, letter = "numeric", None
    format_value = 1.0 if parse.format_ok and has_answer else 0.0
    total = config.answer_weight * accuracy + config.format_weight * format_value
    return DgeScore(
        total=float(total),
        format=format_value,
        accuracy=float(accuracy),
        kind=kind,
        has_answer=has_answer,
        predicted_letter=letter,
        predicted_value=value,
        problems=tuple(problems),
    )
