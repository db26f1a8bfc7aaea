"""One image's scene graph, checked and filtered, as the STVQA stages see it.

A ``scene_graphs`` row is first checked (:func:`scene_graph_problems`): a graph with a missing or
unreadable image, a zero-area box or a relation that names a missing object is quarantined whole,
with every reason. A good row becomes a :class:`Scene`:

- object names are lower-cased and lemmatised (``"Chairs"`` -> ``"chair"``; ids and referring expressions
  use this singular form), predicates canonicalised;
- duplicate annotations of one object (same lemma, boxes overlapping with IoU >= ``DUPLICATE_IOU``,
  frequent in Visual Genome) are merged into the first, and relations are moved onto the survivor.
  This *filtered* scene is what count questions are checked against;
- every object gets the ``name.N`` id SpatialThinker uses (N counts objects of that name, in the
  scene's order) and, when it can be told apart from objects of the same name by an attribute,
  a referring expression such as ``"the black chair"``;
- metric geometry (:mod:`assets.stvqa.geometry`) is attached where a cache has it.

>>> row = {"image_id": "7", "image_width": 100, "image_height": 50, "image": {"bytes": b"\\x89PNG\\r\\n\\x1a\\n", "path": None},
...        "objects": [{"object_id": "1", "name": "Chair", "names": ["chair"], "attributes": ["red"],
...                     "bbox": [0, 0, 500, 500], "bbox_px": [0.0, 0.0, 50.0, 25.0]}],
...        "relationships": [], "source": "test", "origin": "real"}
>>> scene_graph_problems(row)
[]
>>> scene = build_scene(row)
>>> scene.objects[0].scene_id, scene.referring_expression(scene.objects[0])
('chair.1', 'the chair')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from assets.stvqa.geometry import ImageGeometry, ObjectGeometry
from assets.stvqa.text import lemmatize_phrase, tokenize
from assets.stvqa.vocabulary import canonical_predicate, fact_predicate
from data_contracts.boxes import GRID_SIZE
from data_contracts.images import sniff_format
from data_contracts.origin import ORIGINS

DUPLICATE_IOU = 0.8
"""Two boxes of one lemma that overlap this much are one object annotated twice."""


@dataclass(frozen=True)
class SceneObject:
    """An object of a filtered scene.

    Attributes:
        object_id (`str`): the scene graph's id.
        name (`str`): display name: the graph's name lemmatised (``"Chairs"`` -> ``"chair"``).
        lemma (`str`): lemmatised name, the key for matching text.
        alias_lemmas (`tuple[str, ...]`): lemmas of the other names the graph lists for it.
        attributes (`tuple[str, ...]`): lower-case attributes.
        bbox (`tuple[int, int, int, int]`): canonical 0..1000 box.
        bbox_px (`tuple[float, float, float, float]`): pixel box.
        scene_id (`str`): SpatialThinker id ``name.N``.
        geometry (`ObjectGeometry`, *optional*): metric facts, where a geometry cache has them.
        merged_ids (`tuple[str, ...]`): ids of duplicate annotations merged into this object.
    """

    object_id: str
    name: str
    lemma: str
    alias_lemmas: tuple[str, ...]
    attributes: tuple[str, ...]
    bbox: tuple[int, int, int, int]
    bbox_px: tuple[float, float, float, float]
    scene_id: str
    geometry: ObjectGeometry | None = None
    merged_ids: tuple[str, ...] = ()

    @property
    def lemmas(self) -> tuple[str, ...]:
        """The name's lemma and its aliases' lemmas."""
        return (self.lemma, *[alias for alias in self.alias_lemmas if alias != self.lemma])

    @property
    def area_px(self) -> float:
        """Box area in pixels."""
        return (self.bbox_px[2] - self.bbox_px[0]) * (self.bbox_px[3] - self.bbox_px[1])

    @property
    def centre_grid(self) -> tuple[float, float]:
        """Box centre on the 0..1000 grid."""
        return ((self.bbox[0] + self.bbox[2]) / 2.0, (self.bbox[1] + self.bbox[3]) / 2.0)


@dataclass(frozen=True)
class SceneRelation:
    """``subject predicate object`` between two objects of the filtered scene (canonical predicate)."""

    subject_id: str
    predicate: str
    object_id: str

    @property
    def fact(self) -> str:
        """The verifiable predicate this relation states (``"on top of"`` -> ``"on"``)."""
        return fact_predicate(self.predicate)


@dataclass
class Scene:
    """A filtered scene graph of one image (see the module docstring)."""

    image_id: str
    width: int
    height: int
    objects: list[SceneObject]
    relations: list[SceneRelation]
    source: str = ""
    origin: str = ""
    has_geometry: bool = False
    _by_id: dict[str, SceneObject] = field(default_factory=dict, repr=False)
    _references: dict[str, str | None] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._by_id = {obj.object_id: obj for obj in self.objects}
        self._references = {obj.object_id: self._compute_reference(obj) for obj in self.objects}

    def get(self, object_id: str) -> SceneObject:
        """The object with this id (raises `KeyError`)."""
        return self._by_id[object_id]

    def objects_with_lemma(self, lemma: str) -> list[SceneObject]:
        """Objects whose name (or an alias) has this lemma."""
        return [obj for obj in self.objects if lemma in obj.lemmas]

    def count(self, lemma: str) -> int:
        """How many objects of the filtered scene have this lemma."""
        return len(self.objects_with_lemma(lemma))

    def _compute_reference(self, obj: SceneObject) -> str | None:
        same_name = [other for other in self.objects if other.lemma == obj.lemma]
        if len(same_name) == 1:
            return f"the {obj.name}"
        for attribute in obj.attributes:
            if not attribute.replace(" ", "").isalpha():
                continue
            sharing = [other for other in same_name if attribute in other.attributes]
            if len(sharing) == 1:
                return f"the {attribute} {obj.name}"
        return None

    def referring_expression(self, obj: SceneObject) -> str | None:
        """``"the chair"`` when the name is unique, ``"the black chair"`` when an attribute tells it apart,
        else `None` (the object cannot be named unambiguously)."""
        return self._references.get(obj.object_id)

    def label(self, obj: SceneObject) -> str | None:
        """The referring expression without its article (``"black chair"``), for options."""
        reference = self.referring_expression(obj)
        return None if reference is None else reference.removeprefix("the ")

    def nameable(self) -> list[SceneObject]:
        """Objects that have a referring expression."""
        return [obj for obj in self.objects if self._references.get(obj.object_id) is not None]

    def resolve(self, expression: str) -> SceneObject | None:
        """The object a referring expression names (``"the black chair"``, ``"chair"``), or `None`.

        Exact referring expressions win; otherwise the last words must be an object's name and any
        words before it must be attributes that pick exactly one object.
        """
        text = " ".join(tokenize(expression))
        text = text.removeprefix("the ").removeprefix("a ").removeprefix("an ")
        for obj in self.objects:
            label = self.label(obj)
            if label is not None and label == text:
                return obj
        tokens = text.split()
        for start in range(len(tokens)):
            lemma = lemmatize_phrase(" ".join(tokens[start:]))
            candidates = self.objects_with_lemma(lemma)
            if not candidates:
                continue
            modifiers = tokens[:start]
            if modifiers:
                modifier = " ".join(modifiers)
                candidates = [obj for obj in candidates if modifier in obj.attributes]
            return candidates[0] if len(candidates) == 1 else None
        return None

    def relations_between(self, subject_id: str, object_id: str) -> list[SceneRelation]:
        """Relations stated from `subject_id` to `object_id`."""
        return [r for r in self.relations if r.subject_id == subject_id and r.object_id == object_id]

    def name_vocabulary(self) -> set[str]:
        """Every lemma of the scene's objects."""
        return {lemma for obj in self.objects for lemma in obj.lemmas}


def _box_iou(first: tuple[float, ...], second: tuple[float, ...]) -> float:
    x1, y1 = max(first[0], second[0]), max(first[1], second[1])
    x2, y2 = min(first[2], second[2]), min(first[3], second[3])
    intersection = max(0.0, x2 - x1) * max(0.0, y2 - y1)
    union = (
        (first[2] - first[0]) * (first[3] - first[1])
        + (second[2] - second[0]) * (second[3] - second[1])
        - intersection
    )
    return intersection / union if union > 0 else 0.0


def scene_graph_problems(row: Mapping[str, Any]) -> list[str]:
    """Why a ``scene_graphs`` row cannot be used (empty when it can).

    Checks: the image is present and its bytes are an image; the size is positive; the ``origin`` is
    'sample_world' or 'real' (questions inherit it, it is never guessed); object ids are unique; every
    box has area (pixel and grid); every relation names objects of the graph.

    >>> scene_graph_problems({"image_id": "1", "image": None, "image_width": 10, "image_height": 10, "origin": "real",
    ...                       "objects": [], "relationships": [{"subject_id": "1", "predicate": "on", "object_id": "2"}]})
    ['image is missing', 'relation 0 (1 on 2) names missing subject 1', 'relation 0 (1 on 2) names missing object 2']
    """
    problems: list[str] = []
    image = row.get("image")
    data = image.get("bytes") if isinstance(image, Mapping) else None
    if not data:
        problems.append("image is missing")
    elif sniff_format(bytes(data)) is None:
        problems.append("image bytes are not a known image format")
    width, height = row.get("image_width"), row.get("image_height")
    if not width or not height or width <= 0 or height <= 0:
        problems.append(f"image size {width}x{height} is not positive")
    if row.get("origin") not in ORIGINS:
        problems.append(f"origin {row.get('origin')!r} is not one of {', '.join(ORIGINS)}")
    seen: set[str] = set()
    for obj in row.get("objects") or []:
        object_id = str(obj.get("object_id"))
        if object_id in seen:
            problems.append(f"object id {object_id} appears twice")
        seen.add(object_id)
        box_px = obj.get("bbox_px")
        box = obj.get("bbox")
        if box_px is None or len(box_px) != 4 or box_px[2] <= box_px[0] or box_px[3] <= box_px[1]:
            problems.append(f"object {object_id} ({obj.get('name')}) has a zero-area pixel box {box_px}")
        elif box is None or len(box) != 4 or box[2] <= box[0] or box[3] <= box[1]:
            problems.append(f"object {object_id} ({obj.get('name')}) has a zero-area grid box {box}")
        if not str(obj.get("name") or "").strip():
            problems.append(f"object {object_id} has no name")
    for index, relation in enumerate(row.get("relationships") or []):
        subject, obj = str(relation.get("subject_id")), str(relation.get("object_id"))
        described = f"relation {index} ({subject} {relation.get('predicate')} {obj})"
        if subject not in seen:
            problems.append(f"{described} names missing subject {subject}")
        if obj not in seen:
            problems.append(f"{described} names missing object {obj}")
    return problems


def build_scene(row: Mapping[str, Any], geometry: ImageGeometry | None = None) -> Scene:
    """The filtered :class:`Scene` of a ``scene_graphs`` row that passed :func:`scene_graph_problems`.

    Args:
        row (`Mapping`): a ``scene_graphs`` row (image bytes are not read).
        geometry (`dict[str, ObjectGeometry]`, *optional*): object id -> metric facts for this image.
    """
    geometry = geometry or {}
    kept: list[dict[str, Any]] = []
    survivor_of: dict[str, str] = {}
    for raw in row.get("objects") or []:
        object_id = str(raw["object_id"])
        lemma = lemmatize_phrase(str(raw["name"]))
        name = lemma or " ".join(str(raw["name"]).lower().split())
        box_px = tuple(float(value) for value in raw["bbox_px"])
        duplicate_of = next(
            (
                entry
                for entry in kept
                if entry["lemma"] == lemma and _box_iou(entry["bbox_px"], box_px) >= DUPLICATE_IOU
            ),
            None,
        )
        if duplicate_of is not None:
            survivor_of[object_id] = duplicate_of["object_id"]
            duplicate_of["merged_ids"].append(object_id)
            for attribute in raw.get("attributes") or []:
                text = " ".join(str(attribute).lower().split())
                if text and text not in duplicate_of["attributes"]:
                    duplicate_of["attributes"].append(text)
            continue
        survivor_of[object_id] = object_id
        attributes: list[str] = []
        for attribute in raw.get("attributes") or []:
            text = " ".join(str(attribute).lower().split())
            if text and text not in attributes:
                attributes.append(text)
        aliases = tuple(
            dict.fromkeys(
                lemmatize_phrase(str(alias)) for alias in (raw.get("names") or []) if str(alias).strip()
            )
        )
        kept.append(
            {
                "object_id": object_id,
                "name": name,
                "lemma": lemma,
                "alias_lemmas": aliases,
                "attributes": attributes,
                "bbox": tuple(int(value) for value in raw["bbox"]),
                "bbox_px": box_px,
                "merged_ids": [],
            }
        )
    per_name: dict[str, int] = {}
    objects: list[SceneObject] = []
    for entry in kept:
        per_name[entry["name"]] = per_name.get(entry["name"], 0) + 1
        objects.append(
            SceneObject(
                object_id=entry["object_id"],
                name=entry["name"],
                lemma=entry["lemma"],
                alias_lemmas=entry["alias_lemmas"],
                attributes=tuple(entry["attributes"]),
                bbox=entry["bbox"],
                bbox_px=entry["bbox_px"],
                scene_id=f"{entry['name']}.{per_name[entry['name']]}",
                geometry=geometry.get(entry["object_id"]),
                merged_ids=tuple(entry["merged_ids"]),
            )
        )
    relations: list[SceneRelation] = []
    seen: set[tuple[str, str, str]] = set()
    for raw in row.get("relationships") or []:
        subject = survivor_of.get(str(raw["subject_id"]))
        obj = survivor_of.get(str(raw["object_id"]))
        predicate = canonical_predicate(str(raw["predicate"]))
        if subject is None or obj is None or subject == obj or not predicate:
            continue
        key = (subject, predicate, obj)
        if key not in seen:
            seen.add(key)
            relations.append(SceneRelation(subject, predicate, obj))
    return Scene(
        image_id=str(row["image_id"]),
        width=int(row["image_width"]),
        height=int(row["image_height"]),
        objects=objects,
        relations=relations,
        source=str(row.get("source") or ""),
        origin=str(row.get("origin") or ""),
        has_geometry=any(obj.geometry is not None for obj in objects),
    )


def grid_area(box: tuple[int, int, int, int]) -> float:
    """Area of a canonical box as a fraction of the image.

    >>> grid_area((0, 0, 500, 500))
    0.25
    """
    return (box[2] - box[0]) * (box[3] - box[1]) / float(GRID_SIZE * GRID_SIZE)
