"""Small scene-graph rows and generated questions for the STVQA tests, built in code."""

from __future__ import annotations

import io
from typing import Any

from PIL import Image

from data_contracts.boxes import pixels_to_grid

WIDTH, HEIGHT = 200, 100

RELATION_ITEM = {
    "question": "Where is the chair with respect to the table?",
    "options": ["left of", "right of"],
    "answer": "A",
    "category": "relation",
    "level": "easy",
    "rating": 7,
}
"""A valid generated relation question (as the generation model answers it)."""
COUNT_ITEM = {
    "question": "How many chairs are there in the image?",
    "options": ["0", "1", "2", "3"],
    "answer": "A",
    "category": "count",
    "level": "medium",
    "rating": 5,
}
"""A valid generated count question."""


def png_bytes(width: int = WIDTH, height: int = HEIGHT) -> bytes:
    """A blank PNG of the given size."""
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buffer, format="PNG")
    return buffer.getvalue()


def scene_object(
    object_id: str,
    name: str,
    box_px: list[float],
    attributes: list[str] | None = None,
    names: list[str] | None = None,
) -> dict[str, Any]:
    """A ``scene_graphs`` object struct with both boxes."""
    try:
        grid = pixels_to_grid(box_px, WIDTH, HEIGHT)
    except ValueError:
        grid = [0, 0, 0, 0]
    return {
        "object_id": object_id,
        "name": name,
        "names": names or [name],
        "attributes": attributes or [],
        "bbox": grid,
        "bbox_px": [float(v) for v in box_px],
    }


def scene_row(
    image_id: str,
    objects: list[dict],
    relations: list[tuple[str, str, str]],
    image: bytes | None = b"png",
    origin: str = "sample_world",
) -> dict[str, Any]:
    """A ``scene_graphs`` row; ``image=b"png"`` makes a real blank PNG, ``None`` a missing image."""
    cell = None
    if image is not None:
        cell = {"bytes": png_bytes() if image == b"png" else image, "path": f"{image_id}.png"}
    return {
        "image_id": image_id,
        "image": cell,
        "image_width": WIDTH,
        "image_height": HEIGHT,
        "objects": objects,
        "relationships": [{"subject_id": s, "predicate": p, "object_id": o} for s, p, o in relations],
        "source": "test",
        "origin": origin,
    }


def kitchen_row(image_id: str = "k1") -> dict[str, Any]:
    """Two chairs told apart by colour, a table, a duplicate table box, a cup on the table and traffic lights."""
    return scene_row(
        image_id,
        [
            scene_object("1", "chair", [10, 40, 40, 90], ["red"]),
            scene_object("2", "Chairs", [150, 40, 190, 95], ["blue"]),
            scene_object("3", "table", [60, 50, 140, 95], ["wooden"]),
            scene_object("4", "table", [61, 50, 140, 96]),
            scene_object("5", "cup", [90, 40, 100, 50], ["white"]),
            scene_object("6", "traffic light", [100, 0, 110, 20]),
            scene_object("7", "traffic light", [120, 0, 130, 20]),
        ],
        [("5", "on", "3"), ("1", "left of", "4"), ("2", "right of", "3"), ("6", "above", "5")],
    )
