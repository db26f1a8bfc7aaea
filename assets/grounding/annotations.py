"""The ``annotations`` grounding backend: object phrases grounded in human boxes (COCO-style instances).

For data sets that come with human boxes (the sample world writes COCO instances for its
OmniSpatial-like images), the pseudo-GT needs no detector: each phrase is matched to the annotated
instances of its image, and a matched box gets validity 1.0.

Matching a phrase ("red box", "boy in orange clothes", "boxes", "orange objects"):

1. **Category**, on lemmas: the phrase contains a category's full name ("trash can", "dining
   table"), or its head noun's singular is a category's head ("table" for "dining table"), a synonym
   ("sofa" for "couch", "man" for "person"), or a supercategory ("vehicle", "furniture"). A generic
   head ("objects", "things") matches every category.
2. **Attributes**, when several instances qualify: an instance's own ``attributes`` list in the
   annotation file when present (COCO-Attributes, Visual-Genome-derived files); otherwise colour words
   are checked against the pixels (the share of the instance's mask, or its box, whose colour has
   that name), and size words ("large", "small") pick the largest or smallest.
3. **Number**: a plural phrase ("boxes", "orange objects") takes every qualifying instance; a
   singular phrase takes one instance, and when the attributes cannot tell several apart the phrase
   stays unmatched ("ambiguous") rather than guessing.

An instance is used by at most one phrase. Box labels are the phrase, in the singular for a plural
phrase (one box per instance).

>>> instances = [Instance(1, "box", (10, 10, 50, 40)), Instance(2, "chair", (60, 20, 90, 70))]
>>> matched, unmatched = ground_phrases(["chair", "lamp"], instances, width=100, height=80)
>>> [(item["label"], item["bbox_2d"], item["validity"]) for item in matched], unmatched
([('chair', [600, 250, 900, 875], 1.0)], ['lamp: no annotated lamp'])
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from assets.grounding.vocabulary import (
    COLOUR_WORDS,
    GENERIC_HEADS,
    SIZE_WORDS,
    is_plural,
    singularize,
    words,
)
from data_contracts.boxes import BoxError, pixels_to_grid, xywh_to_xyxy

logger = logging.getLogger(__name__)

ANNOTATION_VALIDITY = 1.0
MIN_COLOUR_SHARE = 0.03
"""Least share of an instance's pixels with the phrase's colour for the colour to pick it (a coloured
part, such as a lamp's shade, can be small)."""
COLOUR_MARGIN = 2.0
"""The chosen instance's colour share must exceed the runner-up's by this factor."""
BRIGHTNESS_GAP = 0.1
"""Least difference of median brightness for "white" (brightest) or "black" (darkest) to pick among
achromatic instances whose shading blurs white, gray and black."""
PLURAL_COLOUR_SHARE = 0.35
"""Least colour share for an instance to join a plural phrase with a colour ("orange objects")."""

BASIC_COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (200, 40, 35),
    "green": (50, 150, 55),
    "blue": (40, 80, 200),
    "yellow": (235, 205, 45),
    "orange": (240, 130, 30),
    "purple": (128, 56, 158),
    "pink": (237, 133, 173),
    "brown": (128, 82, 43),
    "teal": (26, 140, 143),
}
"""Typical sRGB values of the chromatic basic colour terms (black, white and gray are told by brightness)."""
COLOUR_ALIASES = {
    "grey": "gray",
    "silver": "gray",
    "violet": "purple",
    "magenta": "pink",
    "cyan": "teal",
    "turquoise": "teal",
    "golden": "yellow",
    "gold": "yellow",
    "navy": "blue",
    "maroon": "red",
    "crimson": "red",
    "tan": "brown",
    "beige": "brown",
    "khaki": "brown",
    "olive": "green",
    "lime": "green",
    "ivory": "white",
    "cream": "white",
}
ACHROMATIC_SATURATION = 0.25
BLACK_BELOW = 0.15
WHITE_FROM = 0.5

SYNONYM_GROUPS: tuple[frozenset[str], ...] = tuple(
    frozenset(group.split(","))
    for group in (
        (
            "person,man,woman,boy,girl,child,kid,people,guy,lady,gentleman,player,pedestrian,rider,skier,"
            "surfer,skateboarder,human,adult,baby,worker,driver,passenger,customer,student,officer"
        ),
        "couch,sofa,settee",
        "tv,television,tvmonitor",
        "cell phone,phone,smartphone,mobile phone,cellphone",
        "motorcycle,motorbike",
        "bicycle,bike",
        "airplane,aeroplane,plane,aircraft,jet",
        "car,sedan,taxi,automobile",
        "cup,mug",
        "handbag,purse",
        "suitcase,luggage",
        "sports ball,ball",
        "refrigerator,fridge",
        "donut,doughnut",
        "hair drier,hair dryer",
        "dining table,table",
        "potted plant,plant,houseplant",
        "trash can,bin,garbage can,wastebasket",
        "monitor,screen,display",
        "cabinet,cupboard",
        "laptop,notebook computer",
    )
)


@dataclass(frozen=True)
class Instance:
    """One human-annotated object of an image.

    Args:
        annotation_id (`int`): the annotation's id.
        category (`str`): its category name.
        bbox_px (`tuple[float, float, float, float]`): `[x1, y1, x2, y2]` in pixels of the annotated image.
        supercategory (`str`, *optional*): the category's supercategory.
        attributes (`tuple[str, ...]`, *optional*): attribute words given by the annotation file.
        segmentation (*optional*): COCO segmentation (polygons, or RLE with list or string counts).
    """

    annotation_id: int
    category: str
    bbox_px: tuple[float, float, float, float]
    supercategory: str = ""
    attributes: tuple[str, ...] = ()
    segmentation: object = None

    @property
    def area(self) -> float:
        x1, y1, x2, y2 = self.bbox_px
        return max(x2 - x1, 0.0) * max(y2 - y1, 0.0)


@dataclass
class CocoInstances:
    """A COCO instances file indexed for grounding: images by file name, instances by image.

    Load with :meth:`load`. Questions find their image with :meth:`image_id_for`: by
    ``<task_type>/<file name>`` (the OmniSpatial layout), by a unique file name, or by the image's
    content hash when ``images_root`` is given.
    """

    images: dict[int, dict]
    instances: dict[int, list[Instance]]
    path: str = ""
    images_root: Path | None = None
    _by_file: dict[str, int] = field(default_factory=dict)
    _by_basename: dict[str, list[int]] = field(default_factory=dict)
    _by_sha: dict[str, int] | None = None

    @classmethod
    def load(cls, path: str | Path, images_root: str | Path | None = None) -> CocoInstances:
        """Read a COCO instances JSON file.

        Raises:
            `FileNotFoundError`: naming the file and the config field that sets it.
            `ValueError`: when the file is not a COCO instances document.
        """
        file_path = Path(path)
        if not file_path.is_file():
            raise FileNotFoundError(
                f"COCO instances file {file_path} not found: set the `sources` resource's `coco_instances_path`, "
                "or use the grounding_dino backend"
            )
        document = json.loads(file_path.read_text(encoding="utf-8"))
        if not isinstance(document, dict) or not {"images", "annotations", "categories"} <= document.keys():
            raise ValueError(
                f"{file_path} is not a COCO instances file (needs images, annotations, categories)"
            )
        categories = {entry["id"]: entry for entry in document["categories"]}
        images = {int(entry["id"]): entry for entry in document["images"]}
        instances: dict[int, list[Instance]] = {image_id: [] for image_id in images}
        skipped = 0
        for annotation in document["annotations"]:
            category = categories.get(annotation.get("category_id"))
            image_id = int(annotation.get("image_id", -1))
            box = annotation.get("bbox")
            if (
                category is None
                or image_id not in images
                or not box
                or len(box) != 4
                or annotation.get("iscrowd")
            ):
                skipped += 1
                continue
            try:
                x1, y1, x2, y2 = xywh_to_xyxy(box)
            except BoxError:
                skipped += 1
                continue
            instances[image_id].append(
                Instance(
                    annotation_id=int(annotation["id"]),
                    category=str(category["name"]).lower(),
                    bbox_px=(x1, y1, x2, y2),
                    supercategory=str(category.get("supercategory") or "").lower(),
                    attributes=tuple(str(value).lower() for value in annotation.get("attributes") or ()),
                    segmentation=annotation.get("segmentation"),
                )
            )
        if skipped:
            logger.warning(
                "%s: %d annotations skipped (crowd, unknown category or image, or bad box)",
                file_path,
                skipped,
            )
        index = cls(
            images=images,
            instances=instances,
            path=str(file_path),
            images_root=Path(images_root) if images_root else None,
        )
        for image_id, entry in images.items():
            name = str(entry.get("file_name", "")).replace("\\", "/")
            index._by_file[name] = image_id
            index._by_basename.setdefault(name.rsplit("/", 1)[-1], []).append(image_id)
        return index

    def _sha_index(self) -> dict[str, int]:
        if self._by_sha is None:
            self._by_sha = {}
            if self.images_root is not None:
                for image_id, entry in self.images.items():
                    candidate = self.images_root / str(entry.get("file_name", ""))
                    if candidate.is_file():
                        self._by_sha[hashlib.sha256(candidate.read_bytes()).hexdigest()] = image_id
        return self._by_sha

    def image_id_for(
        self, image_path: str | None, task_type: str = "", image_bytes: bytes | None = None
    ) -> int | None:
        """The COCO image id of a question's image, or None when the file has no such image.

        Example:
            >>> index = CocoInstances(images={4: {"file_name": "Complex_Logic/4.png"}}, instances={4: []})
            >>> index._by_file, index._by_basename = {"Complex_Logic/4.png": 4}, {"4.png": [4]}
            >>> index.image_id_for("4.png", "Complex_Logic"), index.image_id_for("5.png")
            (4, None)
        """
        if image_path:
            name = image_path.replace("\\", "/")
            for key in (f"{task_type}/{name}" if task_type else None, name):
                if key and key in self._by_file:
                    return self._by_file[key]
            same_name = self._by_basename.get(name.rsplit("/", 1)[-1], [])
            if len(same_name) == 1:
                return same_name[0]
        if image_bytes is not None and self.images_root is not None:
            return self._sha_index().get(hashlib.sha256(image_bytes).hexdigest())
        return None

    def image_size(self, image_id: int) -> tuple[int, int]:
        """`(width, height)` of an annotated image."""
        entry = self.images[image_id]
        return int(entry["width"]), int(entry["height"])


# --------------------------------------------------------------------------------------------------
# Masks and colours
# --------------------------------------------------------------------------------------------------
def rle_counts_from_string(text: str) -> list[int]:
    """Decode COCO's compressed RLE string (the `counts` of ``pycocotools.mask.encode``) into run lengths.

    Example:
        >>> rle_counts_from_string("=X1?Oin0lN")
        [13, 40, 15, 39, 1000, 3]
    """
    counts: list[int] = []
    position = 0
    while position < len(text):
        value, shift, more = 0, 0, True
        while more:
            code = ord(text[position]) - 48
            value |= (code & 0x1F) << (5 * shift)
            more = bool(code & 0x20)
            position += 1
            shift += 1
            if not more and code & 0x10:
                value |= -1 << (5 * shift)
        if len(counts) > 2:
            value += counts[-2]
        counts.append(value)
    return counts


def decode_segmentation(segmentation: object, width: int, height: int) -> np.ndarray | None:
    """A boolean mask (height x width) from COCO polygons or RLE; None when there is none.

    Example:
        >>> decode_segmentation({"counts": [2, 3, 7], "size": [4, 3]}, 3, 4).astype(int).T.ravel().tolist()
        [0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0]
    """
    if isinstance(segmentation, dict) and "counts" in segmentation:
        rle_height, rle_width = (int(value) for value in segmentation.get("size", (height, width)))
        counts = segmentation["counts"]
        if isinstance(counts, str):
            counts = rle_counts_from_string(counts)
        flat = np.zeros(rle_height * rle_width, dtype=bool)
        position, value = 0, False
        for run in counts:
            if value:
                flat[position : position + int(run)] = True
            position += int(run)
            value = not value
        mask = flat.reshape(rle_width, rle_height).T
        if mask.shape != (height, width):
            mask = np.asarray(Image.fromarray(mask).resize((width, height), Image.Resampling.NEAREST))
        return mask
    if isinstance(segmentation, list) and segmentation and isinstance(segmentation[0], list):
        canvas = Image.new("L", (width, height), 0)
        draw = ImageDraw.Draw(canvas)
        for polygon in segmentation:
            if len(polygon) >= 6:
                draw.polygon(
                    [(float(x), float(y)) for x, y in zip(polygon[0::2], polygon[1::2], strict=False)], fill=1
                )
        return np.asarray(canvas, dtype=bool)
    return None


def colour_name(word: str) -> str | None:
    """The basic colour a word names (aliases folded), or None.

    Example:
        >>> colour_name("grey"), colour_name("Teal"), colour_name("dark")
        ('gray', 'teal', None)
    """
    lower = COLOUR_ALIASES.get(word.lower(), word.lower())
    return lower if lower in BASIC_COLOURS or lower in ("black", "white", "gray") else None


_PALETTE_NAMES = tuple(BASIC_COLOURS)
_PALETTE_CHROMA = np.array([BASIC_COLOURS[name] for name in _PALETTE_NAMES], dtype=np.float64)
_PALETTE_CHROMA = _PALETTE_CHROMA / _PALETTE_CHROMA.max(axis=1, keepdims=True)


def name_pixel_colours(pixels: np.ndarray) -> np.ndarray:
    """Name the colour of each RGB pixel (values 0..1): black, white, gray or a chromatic basic colour.

    Chromatic pixels are named by their chromaticity (RGB divided by its maximum), which shading
    leaves unchanged; achromatic ones (low saturation) by brightness.

    Example:
        >>> name_pixel_colours(np.array([[0.8, 0.1, 0.1], [0.05, 0.05, 0.05], [0.9, 0.9, 0.9]])).tolist()
        ['red', 'black', 'white']
    """
    pixels = np.asarray(pixels, dtype=np.float64).reshape(-1, 3)
    brightest = pixels.max(axis=1)
    darkest = pixels.min(axis=1)
    saturation = np.where(brightest > 0, (brightest - darkest) / np.maximum(brightest, 1e-6), 0.0)
    names = np.empty(len(pixels), dtype=object)
    achromatic = (saturation < ACHROMATIC_SATURATION) | (brightest < 0.08)
    value = brightest[achromatic]
    names[achromatic] = np.where(value < BLACK_BELOW, "black", np.where(value >= WHITE_FROM, "white", "gray"))
    chromatic = ~achromatic
    if chromatic.any():
        chroma = pixels[chromatic] / brightest[chromatic, None]
        distances = ((chroma[:, None, :] - _PALETTE_CHROMA[None]) ** 2).sum(axis=-1)
        names[chromatic] = np.array(_PALETTE_NAMES, dtype=object)[distances.argmin(axis=1)]
    return names


def instance_pixels(image: np.ndarray, instance: Instance) -> np.ndarray:
    """The RGB pixels (n x 3, 0..1) of the instance's mask, or of its box when it has no mask."""
    height, width = image.shape[:2]
    mask = decode_segmentation(instance.segmentation, width, height)
    if mask is None or not mask.any():
        x1, y1, x2, y2 = (round(value) for value in instance.bbox_px)
        region = image[max(y1, 0) : max(y2, 0), max(x1, 0) : max(x2, 0)].reshape(-1, 3)
    else:
        region = image[mask]
    return region.reshape(-1, 3)


@dataclass(frozen=True)
class ColourProfile:
    """What the pixels of an instance say about its colour: share by colour name, and median brightness."""

    shares: dict[str, float]
    achromatic_share: float
    brightness: float


def colour_profile(image: np.ndarray, instance: Instance) -> ColourProfile:
    """The :class:`ColourProfile` of an instance.

    Args:
        image (`np.ndarray`): RGB image, float 0..1, of the annotated image's size.
        instance (`Instance`): the instance.
    """
    region = instance_pixels(image, instance)
    if region.size == 0:
        return ColourProfile({}, 0.0, 0.0)
    names, counts = np.unique(name_pixel_colours(region), return_counts=True)
    shares = {str(name): float(count) / len(region) for name, count in zip(names, counts, strict=False)}
    achromatic = sum(shares.get(name, 0.0) for name in ("black", "white", "gray"))
    return ColourProfile(shares, achromatic, float(np.median(region.max(axis=1))))


# --------------------------------------------------------------------------------------------------
# Phrase to instance matching
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PhraseQuery:
    """A phrase split for matching: lemmatised words, head noun, number, colour and size words."""

    text: str
    lemmas: tuple[str, ...]
    head: str
    plural: bool
    colours: tuple[str, ...]
    size: str | None

    @classmethod
    def parse(cls, phrase: str) -> PhraseQuery:
        """Split a (filtered) phrase; the head is the last word before an appearance preposition.

        Example:
            >>> query = PhraseQuery.parse("large red boxes")
            >>> query.head, query.plural, query.colours, query.size
            ('box', True, ('red',), 'largest')
        """
        parts = words(phrase)
        head_position = len(parts) - 1
        for index, word in enumerate(parts):
            if index > 0 and word in ("in", "with", "wearing", "of"):
                head_position = index - 1
                break
        head_word = parts[head_position] if parts else ""
        modifiers = parts[:head_position]
        colours = tuple(name for name in (colour_name(word) for word in modifiers) if name)
        size = next((SIZE_WORDS[word] for word in modifiers if word in SIZE_WORDS), None)
        return cls(
            text=phrase,
            lemmas=tuple(singularize(word) for word in parts),
            head=singularize(head_word),
            plural=is_plural(head_word),
            colours=colours,
            size=size,
        )

    @property
    def singular_text(self) -> str:
        """The phrase with its head in the singular ("red boxes" -> "red box")."""
        if not self.plural:
            return self.text
        parts = words(self.text)
        index = len(parts) - 1
        for position, word in enumerate(parts):
            if position > 0 and word in ("in", "with", "wearing", "of"):
                index = position - 1
                break
        parts[index] = singularize(parts[index])
        return " ".join(parts)


def _lemmas(name: str) -> tuple[str, ...]:
    return tuple(singularize(word) for word in words(name))


def _contains(sequence: tuple[str, ...], part: tuple[str, ...]) -> bool:
    return any(sequence[index : index + len(part)] == part for index in range(len(sequence) - len(part) + 1))


def matching_categories(
    query: PhraseQuery, categories: Sequence[str], supercategories: Mapping[str, str]
) -> set[str]:
    """The categories a phrase names, best kind of match first (full name, head, synonym, supercategory).

    Example:
        >>> sorted(matching_categories(PhraseQuery.parse("the trash can"), ["trash can", "can"], {}))
        ['trash can']
        >>> sorted(matching_categories(PhraseQuery.parse("gray vehicle"), ["car", "bus", "dog"],
        ...                            {"car": "vehicle", "bus": "vehicle", "dog": "animal"}))
        ['bus', 'car']
    """
    if query.head in {singularize(word) for word in GENERIC_HEADS}:
        return set(categories)
    lemmas = (
        query.lemmas[: query.lemmas.index(query.head) + 1] if query.head in query.lemmas else query.lemmas
    )
    full = {category for category in categories if _contains(lemmas, _lemmas(category))}
    if full:
        longest = max(len(_lemmas(category)) for category in full)
        return {category for category in full if len(_lemmas(category)) == longest}
    by_head = {
        category for category in categories if _lemmas(category) and _lemmas(category)[-1] == query.head
    }
    if by_head:
        return by_head
    synonyms: set[str] = set()
    for group in SYNONYM_GROUPS:
        group_lemmas = {_lemmas(name) for name in group}
        if any(_contains(lemmas, name) for name in group_lemmas):
            synonyms |= {category for category in categories if _lemmas(category) in group_lemmas}
    if synonyms:
        return synonyms
    return {
        category for category in categories if singularize(supercategories.get(category, "")) == query.head
    }


def _attribute_filter(query: PhraseQuery, candidates: list[Instance]) -> list[Instance]:
    modifiers = set(query.lemmas) - {query.head}
    described = [item for item in candidates if item.attributes]
    if not described or not modifiers:
        return candidates
    wanted = {word for word in modifiers if word in COLOUR_WORDS or word in SIZE_WORDS}
    if not wanted:
        return candidates
    return [
        item for item in candidates if wanted <= {singularize(value) for value in item.attributes}
    ] or candidates


def _colour_score(query: PhraseQuery, profile: ColourProfile) -> float:
    return float(np.mean([profile.shares.get(colour, 0.0) for colour in query.colours]))


def _by_brightness(
    query: PhraseQuery, candidates: list[Instance], profiles: list[ColourProfile]
) -> Instance | None:
    """Decide among mostly achromatic instances by median brightness, where shading blurs white, gray and black.

    "white" picks the brightest and "black" the darkest, by a clear gap; "gray" picks the darker of two
    when the brighter looks white, or the lighter of two when the darker looks black.
    """
    if len(query.colours) != 1 or query.colours[0] not in ("white", "black", "gray"):
        return None
    achromatic = sorted(
        (
            (profile.brightness, index)
            for index, profile in enumerate(profiles)
            if profile.achromatic_share >= 0.5
        ),
        reverse=True,
    )
    if len(achromatic) < 2:
        return None
    colour = query.colours[0]
    if colour == "white" and achromatic[0][0] - achromatic[1][0] >= BRIGHTNESS_GAP:
        return candidates[achromatic[0][1]]
    if colour == "black" and achromatic[-2][0] - achromatic[-1][0] >= BRIGHTNESS_GAP:
        return candidates[achromatic[-1][1]]
    if colour == "gray" and len(achromatic) == 2 and achromatic[0][0] - achromatic[1][0] >= BRIGHTNESS_GAP:
        (bright, bright_index), (dark, dark_index) = achromatic
        if bright >= WHITE_FROM - BRIGHTNESS_GAP / 2:
            return candidates[dark_index]
        if dark < BLACK_BELOW:
            return candidates[bright_index]
    return None


def select_instances(
    query: PhraseQuery, candidates: list[Instance], image: np.ndarray | None
) -> tuple[list[Instance], str | None]:
    """The instances a phrase grounds to among same-category candidates, or a reason for none.

    Args:
        query (`PhraseQuery`): the parsed phrase.
        candidates (`list[Instance]`): instances of the matching categories, not used by earlier phrases.
        image (`np.ndarray`, *optional*): the RGB image (0..1) for colour evidence.

    Returns:
        `tuple[list[Instance], str | None]`: the chosen instances, and why none was chosen.
    """
    if not candidates:
        return [], "no annotated " + query.head
    candidates = _attribute_filter(query, candidates)
    if query.colours and image is not None and (query.plural or len(candidates) > 1):
        profiles = [colour_profile(image, item) for item in candidates]
        scored = sorted(
            (
                (_colour_score(query, profile), index, item)
                for index, (item, profile) in enumerate(zip(candidates, profiles, strict=False))
            ),
            key=lambda entry: (-entry[0], entry[1]),
        )
        if query.plural:
            chosen = [item for score, _, item in scored if score >= PLURAL_COLOUR_SHARE]
            chosen.sort(key=candidates.index)
            return (
                (chosen, None)
                if chosen
                else ([], f"no annotated {query.head} looks {'/'.join(query.colours)}")
            )
        best_score = scored[0][0]
        runner_up = scored[1][0] if len(scored) > 1 else 0.0
        if best_score >= MIN_COLOUR_SHARE and best_score > COLOUR_MARGIN * runner_up:
            return [scored[0][2]], None
        brightest_or_darkest = _by_brightness(query, candidates, profiles)
        if brightest_or_darkest is not None:
            return [brightest_or_darkest], None
        return [], f"ambiguous: {len(candidates)} instances of {query.head}, colour does not decide"
    if query.plural:
        return candidates, None
    if len(candidates) == 1:
        return candidates, None
    if query.size is not None:
        ordered = sorted(candidates, key=lambda item: item.area, reverse=query.size == "largest")
        return [ordered[0]], None
    return [], f"ambiguous: {len(candidates)} instances of {query.head}"


def ground_phrases(
    phrases: Sequence[str],
    instances: Sequence[Instance],
    *,
    width: int,
    height: int,
    image: np.ndarray | None = None,
) -> tuple[list[dict], list[str]]:
    """Ground a question's phrases in the human boxes of its image.

    Args:
        phrases (`Sequence[str]`): filtered object phrases, in order.
        instances (`Sequence[Instance]`): the image's annotated instances.
        width, height (`int`): size of the annotated image (the boxes' pixel space).
        image (`np.ndarray`, *optional*): RGB image (0..1) of that size, for colour evidence.

    Returns:
        `tuple[list[dict], list[str]]`: pseudo-GT items `{bbox_2d, label, validity}` in phrase order, and
        `"<phrase>: <reason>"` for every phrase left without a box.
    """
    categories = sorted({item.category for item in instances})
    supercategories = {item.category: item.supercategory for item in instances}
    queries = [PhraseQuery.parse(phrase) for phrase in phrases]
    candidates_of = [
        [
            item
            for item in instances
            if item.category in matching_categories(query, categories, supercategories)
        ]
        for query in queries
    ]
    used: set[int] = set()
    chosen_of: dict[int, list[Instance]] = {}
    reasons: dict[int, str] = {}
    pending = list(range(len(queries)))
    while pending:
        deferred = []
        for position in pending:
            candidates = [item for item in candidates_of[position] if item.annotation_id not in used]
            if candidates_of[position] and not candidates:
                reasons.pop(position, None)
                chosen_of[position] = []  # every instance it names is already grounded by another phrase
                continue
            chosen, reason = select_instances(queries[position], candidates, image)
            if chosen:
                chosen_of[position] = chosen
                used.update(item.annotation_id for item in chosen)
                reasons.pop(position, None)
            else:
                reasons[position] = reason or "no match"
                deferred.append(position)
        if len(deferred) == len(pending):
            break  # no progress: the rest stay unmatched
        pending = deferred  # instances grounded meanwhile may settle an ambiguous phrase
    matched: list[dict] = []
    unmatched: list[str] = []
    for position, query in enumerate(queries):
        if position in reasons:
            unmatched.append(f"{query.text}: {reasons[position]}")
            continue
        for item in chosen_of.get(position, []):
            try:
                box = pixels_to_grid(item.bbox_px, width, height)
            except BoxError as error:
                unmatched.append(f"{query.text}: annotation {item.annotation_id} has no usable box ({error})")
                continue
            matched.append({"bbox_2d": box, "label": query.singular_text, "validity": ANNOTATION_VALIDITY})
    return matched, unmatched


def image_array(image: Image.Image, width: int, height: int) -> np.ndarray:
    """RGB float array (0..1) of ``image`` at ``width`` x ``height`` (resized when the sizes differ)."""
    rgb = image.convert("RGB")
    if rgb.size != (width, height):
        rgb = rgb.resize((width, height), Image.Resampling.BILINEAR)
    return np.asarray(rgb, dtype=np.float64) / 255.0
