"""Word lists and small word functions shared by phrase extraction, the filter and the matchers.

The lists are closed classes of English (determiners, prepositions, pronouns, auxiliaries) plus the
terms that SpatialCORE's appendix A.3 filters out because they do not define an object box: spatial
relations and directions (left, right, front, distance, direction...), the viewer and the picture
itself (camera, image, view), measures and abstract nouns. Colour, material and clothing words are
the modifiers that tell instances apart ("boy in orange clothes", "gray vehicle").

>>> singularize("boxes"), singularize("shelves"), singularize("people"), singularize("glass")
('box', 'shelf', 'person', 'glass')
>>> is_plural("chairs"), is_plural("glass"), is_plural("bus")
(True, False, False)
"""

from __future__ import annotations

import re
from functools import lru_cache

from data_contracts.nouns import singularize

NUMBER_PATTERN = re.compile(r"\d+(?:\.\d+)?(?:st|nd|rd|th|m|cm|mm|%)?")
WORD_PATTERN = re.compile(r"[a-z0-9]+(?:['\-][a-z0-9]+)*(?:\.[0-9]+)?")
"""A lower-case word: letters and digits, inner hyphens and apostrophes, a decimal part."""


def word_set(text: str) -> frozenset[str]:
    """The whitespace-separated words of ``text`` as a frozen set.

    >>> sorted(word_set("a b  a"))
    ['a', 'b']
    """
    return frozenset(text.split())


TOKEN_PATTERN = re.compile(r"[A-Za-z0-9]+(?:['\-][A-Za-z0-9]+)*(?:\.[0-9]+)?|[^\sA-Za-z0-9]")
"""A word (as :data:`WORD_PATTERN`, any case) or one punctuation character."""

DETERMINERS = word_set(
    "the a an this that these those each every any some all both another either neither no such what"
)
POSSESSIVES = word_set("my your his her its our their whose")
QUANTIFIERS = word_set("many much several few more most lots lot plenty couple pair")
NUMBER_WORDS = word_set(
    "zero one two three four five six seven eight nine ten eleven twelve twenty hundred dozen first "
    "second third fourth fifth half"
)
PREPOSITIONS = word_set(
    "on in at of to from by with without into onto over under above below beneath behind beside besides "
    "between among near next towards toward across along around through past against inside outside upon "
    "within beyond via underneath atop up down off out for about after before than like opposite away "
    "ahead"
)
CONJUNCTIONS = word_set("and or but nor so yet if then because while whereas although though unless whether")
PRONOUNS = word_set(
    "i me you yourself yourselves he him himself she her herself it itself we us ourselves they them "
    "themselves one ones someone somebody something anything nothing everything everyone none it's you're "
    "there here"
)
AUXILIARIES = word_set(
    "is are was were be been being am do does did done have has had having can could will would shall "
    "should may might must isn't aren't wasn't weren't don't doesn't didn't can't couldn't won't wouldn't "
    "shouldn't"
)
WH_WORDS = word_set("which what who whom where when why how whose")
COMMON_VERBS = word_set(
    "see seen look looks looking stand stands standing face faces facing move moves moved moving walk "
    "walks walked walking turn turns turned turning imagine imagined get gets got go goes went reach "
    "reaches reached place placed put puts pick picked take taken took rotate rotated rotating push "
    "pushed pull pulled drive drives driving sit sits sitting lie lies lying rest rests resting hold "
    "holds holding appear appears seem seems need needs make makes made want wants give gives keep keeps "
    "let lets occupy occupies block blocks blocked hide hides hidden hit hits enter enters leave leaves "
    "cross crosses crossed count counted rotates roll rolls rolled slides slid fall falls fell pointed "
    "pointing lean leans tilt tilts fit fits bump bumps pass passes arrive arrives carry carries "
    "extend extends travel travels hang hangs hung"
)
INTENSIFIERS = word_set("very quite rather too also just only even still really approximately about roughly")

DIRECTIONAL_WORDS = word_set(
    "left right leftmost rightmost front back rear behind ahead forward forwards backward backwards up "
    "down upward downward upwards downwards top bottom upper lower middle centre center central north "
    "south east west northeast northwest southeast southwest clockwise counterclockwise anticlockwise "
    "near nearby far nearest farthest furthest closest inner outer side sideways horizontal vertical "
    "diagonal straight opposite"
)
"""Directions and relative positions: never an object, and dropped as leading modifiers."""

LEADING_DIRECTIONAL_MODIFIERS = word_set(
    "left right leftmost rightmost nearest farthest furthest closest near far nearby middle centre center "
    "opposite"
)
"""Directional words stripped from the front of a phrase ("left chair" -> "chair"). Words that also
form compound object names ("front door", "top shelf", "back seat") are kept."""

COMPARATIVES = word_set(
    "closer farther further nearer bigger smaller larger taller shorter higher lower wider narrower "
    "longer heavier lighter faster slower deeper shallower thicker thinner biggest smallest largest "
    "tallest shortest highest lowest widest narrowest longest heaviest lightest fastest slowest deepest "
    "more less same different equal similar clear visible hidden occluded possible impossible correct "
    "incorrect true false yes no"
)
"""Answer words that are comparisons or verdicts, never objects."""

NON_VISUAL_HEADS = word_set(
    "distance direction directions position positions location locations orientation angle angles degree "
    "degrees way ways path paths route routes line lines trajectory movement motion rotation turn camera "
    "cameras viewer viewers observer observers viewpoint viewpoints perspective perspectives view views "
    "image images picture pictures photo photos photograph photographs frame frames scene scenes scenario "
    "shot screen screenshot left right front back rear top bottom side sides middle centre center edge "
    "edges corner corners part parts area areas region regions place places spot spots space spaces "
    "section half halves room floor ground wall walls ceiling sky background foreground surroundings "
    "environment height heights size sizes length lengths width widths depth depths volume area speed "
    "velocity time order sequence number numbers count amount quantity total sum difference ratio "
    "percentage answer answers option options question questions choice choices metre metres meter meters "
    "centimetre centimetres centimeter centimeters millimetre millimetres cm mm m km kilometre kilometres "
    "kilometer kilometers inch inches foot feet ft yard yards mile miles second seconds minute minutes "
    "hour hours step steps kg kilogram kilograms gram grams color colour colors colours shape shapes texture "
    "textures point points level levels dimension dimensions quadrant quadrants origin axis axes "
    "relationship relationships arrangement layout configuration fraction portion proportion heading "
    "shadow shadows reflection reflections"
)
"""Heads of phrases that do not name a boxable object: relations, directions, the viewer and the
picture, scene-level surfaces (whose box is the whole image), measures and abstractions."""

GENERIC_HEADS = word_set("object objects thing things item items stuff entity entities element elements")
"""Heads that name no category: kept only with a distinguishing modifier ("orange objects")."""

UNITS = word_set(
    "m cm mm km metre metres meter meters centimetre centimetres inch inches foot feet ft degree degrees "
    "percent % s sec second seconds"
)

COLOUR_WORDS = word_set(
    "red green blue yellow orange purple violet pink brown black white gray grey teal cyan magenta beige "
    "gold golden silver navy maroon tan cream ivory turquoise olive khaki crimson lime dark light pale "
    "bright"
)
"""Colour words (and brightness words that qualify a colour)."""

CLOTHING_WORDS = word_set(
    "clothes clothing shirt shirts t-shirt tshirt jacket jackets coat coats dress dresses skirt pants "
    "trousers jeans shorts hat hats cap caps helmet helmets uniform uniforms suit suits sweater hoodie "
    "vest scarf glasses sunglasses shoes boots gloves backpack apron jersey top outfit"
)
MATERIAL_WORDS = word_set(
    "wooden wood metal metallic plastic glass leather paper cardboard stone brick concrete fabric steel "
    "ceramic rubber striped checked plaid spotted"
)
APPEARANCE_PREPOSITIONS = frozenset({"in", "with", "wearing"})
"""Prepositions whose phrase may describe appearance ("boy in orange clothes", "man with a red hat")."""

PARTITIVE_HEADS = word_set(
    "back front top bottom side edge corner part end middle centre center piece half surface bit stack pile "
    "row group bunch set collection kind type sort"
)
"""Heads of "X of Y" phrases that name a part, a place or an amount of Y: the object is Y."""

VIEWER_POSSESSIVES = word_set("my your our")
"""Possessives of the viewer: what follows them is the viewer's own ("your left", "your arm"), not the scene's."""

IDIOMATIC_POSSESSIVES = frozenset({("bird's", "eye"), ("arm's", "reach"), ("arm's", "length")})
"""Possessives that name no possessor ("a bird's eye view", "within arm's reach")."""

RELATIONAL_WORDS = word_set("relative relatively respect compared comparing regard regarding according")
"""Words that end a noun phrase because a relation follows ("the spoon relative to the cup")."""

ING_NOUNS = word_set(
    "building buildings ceiling painting paintings clothing railing railings sibling siblings ring rings "
    "string strings king kings wing wings thing things sling swing swings spring springs bedding stuffing "
    "icing awning awnings drawing drawings sign signing"
)
ED_WORDS_THAT_ARE_NOUNS = word_set("bed shed sled red")

SIZE_WORDS = {
    "large": "largest",
    "big": "largest",
    "huge": "largest",
    "giant": "largest",
    "tall": "largest",
    "small": "smallest",
    "little": "smallest",
    "tiny": "smallest",
    "short": "smallest",
}
"""Size adjectives and whether they pick the largest or smallest of several instances."""


def words(text: str) -> list[str]:
    """Lower-case words of ``text`` (punctuation dropped, inner hyphens and apostrophes kept).

    >>> words("The boy-in-orange's (red) cup, 1.5 m.")
    ['the', "boy-in-orange's", 'red', 'cup', '1.5', 'm']
    """
    return WORD_PATTERN.findall(text.lower())


def tokens(text: str) -> list[str]:
    """Words and punctuation characters of ``text``, case kept.

    >>> tokens("Is the cup left of it?")
    ['Is', 'the', 'cup', 'left', 'of', 'it', '?']
    """
    return TOKEN_PATTERN.findall(text)


def is_plural(word: str) -> bool:
    """True when ``word`` is a plural noun form (its singular differs).

    >>> is_plural("people"), is_plural("chair")
    (True, False)
    """
    return singularize(word) != word.lower()


@lru_cache(maxsize=65536)
def is_number(word: str) -> bool:
    """True for digits (``"3"``, ``"1.5"``) and number words (``"two"``).

    >>> is_number("1.5"), is_number("two"), is_number("tv")
    (True, True, False)
    """
    lower = word.lower()
    return lower in NUMBER_WORDS or NUMBER_PATTERN.fullmatch(lower) is not None


@lru_cache(maxsize=65536)
def is_verb_form(word: str) -> bool:
    """A heuristic for words that end a noun phrase: auxiliaries, common verbs, -ing and -ed forms, -ly adverbs.

    >>> is_verb_form("facing"), is_verb_form("building"), is_verb_form("moved"), is_verb_form("bed")
    (True, False, True, False)
    """
    lower = word.lower()
    if lower in AUXILIARIES or lower in COMMON_VERBS:
        return True
    if lower.endswith("ing") and len(lower) > 4 and lower not in ING_NOUNS:
        return True
    if lower.endswith("ed") and len(lower) > 4 and lower not in ED_WORDS_THAT_ARE_NOUNS:
        return True
    return lower.endswith("ly") and len(lower) > 4
