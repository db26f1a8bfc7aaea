"""The catalogue of everyday objects the sample world furnishes its rooms with.

Every object is built from open3d primitives (boxes, cylinders, spheres, cones) in a local frame:
metres, z up, the footprint centred on the origin, the lowest point at z = 0, and (for objects with
a front, such as chairs and sofas) the front facing local +y. A template holds the size ranges, the
colours the object may take, where it may stand (the floor, or the top of a supporting object),
and the names used by the on-disk formats (WordNet synset, COCO-style category id).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

# open3d is imported inside the functions that use it: importing it loads its dash/plotly UI (seconds).
if TYPE_CHECKING:
    import open3d as o3d

logger = logging.getLogger(__name__)

COLOURS: dict[str, tuple[float, float, float]] = {
    "red": (0.78, 0.16, 0.14),
    "green": (0.20, 0.58, 0.22),
    "blue": (0.16, 0.32, 0.78),
    "yellow": (0.92, 0.80, 0.18),
    "orange": (0.93, 0.50, 0.12),
    "purple": (0.50, 0.22, 0.62),
    "pink": (0.93, 0.52, 0.68),
    "brown": (0.50, 0.32, 0.17),
    "black": (0.09, 0.09, 0.10),
    "white": (0.93, 0.93, 0.91),
    "gray": (0.52, 0.52, 0.54),
    "teal": (0.10, 0.55, 0.56),
}
"""Colour names and their linear RGB albedo in 0..1."""

FLOOR = "floor"
SUPPORT = "support"

_LEG_DARKEN = 0.55
_POT_RGB = (0.62, 0.33, 0.20)
_METAL_RGB = (0.45, 0.45, 0.47)


@dataclass(frozen=True)
class Part:
    """One closed triangle mesh of an object, in the object's local frame.

    Args:
        vertices (`np.ndarray`): float64 array of shape `(n, 3)`.
        triangles (`np.ndarray`): int64 array of shape `(m, 3)`, counter-clockwise seen from outside.
        rgb (`tuple[float, float, float]`): the part's albedo in 0..1.
    """

    vertices: np.ndarray
    triangles: np.ndarray
    rgb: tuple[float, float, float]


PartBuilder = Callable[[float, float, float, tuple[float, float, float]], list[Part]]


@dataclass(frozen=True)
class ObjectTemplate:
    """A kind of object the generator can place.

    Args:
        category (`str`): the noun used as label and name (`"chair"`).
        synset (`str`): WordNet synset written to the Visual-Genome-like files.
        coco_id (`int`): category id in the COCO-like file (COCO's own id where COCO has the class,
            otherwise one of COCO's unused ids, so ids stay non-contiguous like COCO's).
        supercategory (`str`): COCO supercategory.
        width_range, depth_range, height_range (`tuple[float, float]`): size ranges in metres along
            local x, y, z.
        colours (`tuple[str, ...]`): colour names (keys of `COLOURS`) the object may take.
        placements (`tuple[str, ...]`): `"floor"` and/or `"support"` (on top of a supporting object).
        is_support (`bool`): whether small objects may be put on its flat top.
        has_front (`bool`): whether the object faces a direction (local +y).
        weight (`float`): relative sampling weight.
        build (`PartBuilder`): `(width, depth, height, rgb) -> list[Part]`.
    """

    category: str
    synset: str
    coco_id: int
    supercategory: str
    width_range: tuple[float, float]
    depth_range: tuple[float, float]
    height_range: tuple[float, float]
    colours: tuple[str, ...]
    placements: tuple[str, ...]
    is_support: bool
    has_front: bool
    weight: float
    build: PartBuilder


def _legacy_part(mesh: o3d.geometry.TriangleMesh, rgb: tuple[float, float, float]) -> Part:
    return Part(
        vertices=np.asarray(mesh.vertices, dtype=np.float64).copy(),
        triangles=np.asarray(mesh.triangles, dtype=np.int64).copy(),
        rgb=rgb,
    )


def box_part(
    centre_x: float,
    centre_y: float,
    bottom_z: float,
    width: float,
    depth: float,
    height: float,
    rgb: tuple[float, float, float],
) -> Part:
    """An axis-aligned box given its footprint centre, bottom height and sizes.

    >>> part = box_part(0.0, 0.0, 0.0, 1.0, 2.0, 0.5, (1.0, 0.0, 0.0))
    >>> part.vertices.min(axis=0).tolist(), part.vertices.max(axis=0).tolist()
    ([-0.5, -1.0, 0.0], [0.5, 1.0, 0.5])
    """
    import open3d as o3d

    mesh = o3d.geometry.TriangleMesh.create_box(width, depth, height)
    mesh.translate((centre_x - width / 2.0, centre_y - depth / 2.0, bottom_z))
    return _legacy_part(mesh, rgb)


def cylinder_part(
    centre_x: float,
    centre_y: float,
    bottom_z: float,
    radius: float,
    height: float,
    rgb: tuple[float, float, float],
    resolution: int = 24,
) -> Part:
    """A vertical cylinder given its axis position, bottom height, radius and height.

    >>> part = cylinder_part(0.0, 0.0, 1.0, 0.1, 0.5, (0.0, 1.0, 0.0))
    >>> [round(float(v), 6) for v in (part.vertices[:, 2].min(), part.vertices[:, 2].max())]
    [1.0, 1.5]
    """
    import open3d as o3d

    mesh = o3d.geometry.TriangleMesh.create_cylinder(radius, height, resolution, 1)
    mesh.translate((centre_x, centre_y, bottom_z + height / 2.0))
    return _legacy_part(mesh, rgb)


def sphere_part(
    centre_x: float,
    centre_y: float,
    centre_z: float,
    radius: float,
    rgb: tuple[float, float, float],
    resolution: int = 14,
) -> Part:
    """A sphere given its centre and radius.

    >>> part = sphere_part(0.0, 0.0, 0.5, 0.5, (0.0, 0.0, 1.0))
    >>> round(float(part.vertices[:, 2].min()), 6)
    0.0
    """
    import open3d as o3d

    mesh = o3d.geometry.TriangleMesh.create_sphere(radius, resolution)
    mesh.translate((centre_x, centre_y, centre_z))
    return _legacy_part(mesh, rgb)


def cone_part(
    centre_x: float,
    centre_y: float,
    bottom_z: float,
    radius: float,
    height: float,
    rgb: tuple[float, float, float],
    resolution: int = 24,
) -> Part:
    """An upright cone given its base centre, radius and height."""
    import open3d as o3d

    mesh = o3d.geometry.TriangleMesh.create_cone(radius, height, resolution, 1)
    mesh.translate((centre_x, centre_y, bottom_z))
    return _legacy_part(mesh, rgb)


def _darker(rgb: tuple[float, float, float], factor: float = _LEG_DARKEN) -> tuple[float, float, float]:
    return (rgb[0] * factor, rgb[1] * factor, rgb[2] * factor)


def _four_legs(width: float, depth: float, height: float, leg: float, rgb) -> list[Part]:
    half_x = width / 2.0 - leg / 2.0 - 0.02
    half_y = depth / 2.0 - leg / 2.0 - 0.02
    return [
        box_part(sign_x * half_x, sign_y * half_y, 0.0, leg, leg, height, rgb)
        for sign_x in (-1.0, 1.0)
        for sign_y in (-1.0, 1.0)
    ]


def build_table(width: float, depth: float, height: float, rgb) -> list[Part]:
    """A table: a top slab on four legs."""
    top = 0.04
    return [box_part(0.0, 0.0, height - top, width, depth, top, rgb)] + _four_legs(
        width, depth, height - top, 0.05, _darker(rgb)
    )


def build_chair(width: float, depth: float, height: float, rgb) -> list[Part]:
    """A chair facing +y: seat, backrest along the rear edge, four legs."""
    seat_height = 0.45
    seat = 0.05
    back = 0.05
    return [
        box_part(0.0, 0.0, seat_height - seat, width, depth, seat, rgb),
        box_part(0.0, -depth / 2.0 + back / 2.0, seat_height, width, back, height - seat_height, rgb),
    ] + _four_legs(width, depth, seat_height - seat, 0.04, _darker(rgb))


def build_box(width: float, depth: float, height: float, rgb) -> list[Part]:
    """A closed cardboard-style box."""
    return [box_part(0.0, 0.0, 0.0, width, depth, height, rgb)]


def build_mug(width: float, depth: float, height: float, rgb) -> list[Part]:
    """A mug: a cylinder with a handle on its +x side."""
    radius = min(width, depth) / 2.0 * 0.8
    handle = radius * 0.45
    return [
        cylinder_part(-handle / 2.0, 0.0, 0.0, radius, height, rgb),
        box_part(radius, 0.0, height * 0.25, handle, handle * 0.35, height * 0.5, rgb),
    ]


def build_lamp(width: float, depth: float, height: float, rgb) -> list[Part]:
    """A floor lamp: base disc, pole, cylindrical shade."""
    radius = min(width, depth) / 2.0
    shade_height = 0.28
    return [
        cylinder_part(0.0, 0.0, 0.0, radius * 0.7, 0.03, _METAL_RGB),
        cylinder_part(0.0, 0.0, 0.03, 0.015, height - shade_height - 0.03 + 0.05, _METAL_RGB, resolution=8),
        cylinder_part(0.0, 0.0, height - shade_height, radius, shade_height, rgb),
    ]


def build_ball(width: float, depth: float, height: float, rgb) -> list[Part]:
    """A ball resting on its lowest point."""
    radius = min(width, depth, height) / 2.0
    return [sphere_part(0.0, 0.0, radius, radius, rgb)]


def build_shelf(width: float, depth: float, height: float, rgb) -> list[Part]:
    """A bookshelf open towards +y: two sides, a back panel, top, bottom and inner boards."""
    board = 0.03
    inner_width = width - 2 * board
    parts = [
        box_part(-width / 2.0 + board / 2.0, 0.0, 0.0, board, depth, height, rgb),
        box_part(width / 2.0 - board / 2.0, 0.0, 0.0, board, depth, height, rgb),
        box_part(0.0, -depth / 2.0 + board / 4.0, 0.0, inner_width, board / 2.0, height, _darker(rgb, 0.8)),
    ]
    levels = 4
    for level in range(levels + 1):
        bottom = level * (height - board) / levels
        parts.append(box_part(0.0, 0.0, bottom, inner_width, depth, board, rgb))
    return parts


def build_plant(width: float, depth: float, height: float, rgb) -> list[Part]:
    """A potted plant: a terracotta pot with a round crown of leaves on top."""
    crown = min(width, depth) / 2.0
    pot_height = max(height - 2 * crown, 0.15)
    pot_radius = crown * 0.55
    return [
        cylinder_part(0.0, 0.0, 0.0, pot_radius, pot_height, _POT_RGB),
        sphere_part(0.0, 0.0, pot_height + crown * 0.95, crown, rgb),
    ]


def build_sofa(width: float, depth: float, height: float, rgb) -> list[Part]:
    """A sofa facing +y: seat block, backrest, two armrests."""
    seat_height = 0.42
    back_depth = 0.2
    arm_width = 0.18
    arm_height = 0.62
    return [
        box_part(0.0, back_depth / 2.0, 0.0, width - 2 * arm_width, depth - back_depth, seat_height, rgb),
        box_part(0.0, -depth / 2.0 + back_depth / 2.0, 0.0, width, back_depth, height, _darker(rgb, 0.85)),
        box_part(
            -width / 2.0 + arm_width / 2.0,
            back_depth / 2.0,
            0.0,
            arm_width,
            depth - back_depth,
            arm_height,
            rgb,
        ),
        box_part(
            width / 2.0 - arm_width / 2.0,
            back_depth / 2.0,
            0.0,
            arm_width,
            depth - back_depth,
            arm_height,
            rgb,
        ),
    ]


def build_cabinet(width: float, depth: float, height: float, rgb) -> list[Part]:
    """A cabinet facing +y: a body with two door handles."""
    handle = 0.02
    return [
        box_part(0.0, 0.0, 0.0, width, depth, height, rgb),
        box_part(-0.06, depth / 2.0 + handle / 2.0, height * 0.55, handle, handle, height * 0.25, _METAL_RGB),
        box_part(0.06, depth / 2.0 + handle / 2.0, height * 0.55, handle, handle, height * 0.25, _METAL_RGB),
    ]


def build_trash_can(width: float, depth: float, height: float, rgb) -> list[Part]:
    """A round trash can."""
    return [cylinder_part(0.0, 0.0, 0.0, min(width, depth) / 2.0, height, rgb)]


def build_bottle(width: float, depth: float, height: float, rgb) -> list[Part]:
    """A bottle: body and a narrower neck."""
    radius = min(width, depth) / 2.0
    body = height * 0.68
    return [
        cylinder_part(0.0, 0.0, 0.0, radius, body, rgb, resolution=16),
        cylinder_part(0.0, 0.0, body, radius * 0.38, height - body, rgb, resolution=12),
    ]


def build_book(width: float, depth: float, height: float, rgb) -> list[Part]:
    """A closed book lying flat."""
    return [box_part(0.0, 0.0, 0.0, width, depth, height, rgb)]


def build_vase(width: float, depth: float, height: float, rgb) -> list[Part]:
    """A vase: a round belly under a cylindrical neck."""
    radius = min(width, depth) / 2.0
    belly = min(radius, height * 0.4)
    return [
        sphere_part(0.0, 0.0, belly, belly, rgb, resolution=12),
        cylinder_part(0.0, 0.0, belly, radius * 0.45, height - belly, rgb, resolution=16),
    ]


def build_monitor(width: float, depth: float, height: float, rgb) -> list[Part]:
    """A computer monitor facing +y: foot, stand and screen."""
    screen_depth = 0.03
    screen_height = height * 0.7
    return [
        box_part(0.0, 0.0, 0.0, width * 0.4, depth, 0.02, _METAL_RGB),
        box_part(0.0, -screen_depth, 0.02, 0.04, 0.03, height - screen_height, _METAL_RGB),
        box_part(0.0, 0.0, height - screen_height, width, screen_depth, screen_height, rgb),
    ]


_FURNITURE_COLOURS = (
    "red",
    "green",
    "blue",
    "yellow",
    "orange",
    "purple",
    "brown",
    "black",
    "white",
    "gray",
    "teal",
)
_SMALL_COLOURS = ("red", "green", "blue", "yellow", "orange", "purple", "pink", "black", "white", "teal")

CATALOGUE: dict[str, ObjectTemplate] = {
    template.category: template
    for template in (
        ObjectTemplate(
            "table",
            "table.n.02",
            67,
            "furniture",
            (0.9, 1.6),
            (0.6, 1.0),
            (0.70, 0.78),
            ("brown", "white", "black", "gray"),
            (FLOOR,),
            True,
            False,
            0.6,
            build_table,
        ),
        ObjectTemplate(
            "chair",
            "chair.n.01",
            62,
            "furniture",
            (0.42, 0.52),
            (0.42, 0.52),
            (0.85, 1.0),
            _FURNITURE_COLOURS,
            (FLOOR,),
            False,
            True,
            2.5,
            build_chair,
        ),
        ObjectTemplate(
            "box",
            "box.n.01",
            12,
            "indoor",
            (0.3, 0.6),
            (0.3, 0.5),
            (0.25, 0.5),
            ("brown", "white", "red", "blue", "yellow", "green"),
            (FLOOR,),
            False,
            False,
            1.6,
            build_box,
        ),
        ObjectTemplate(
            "lamp",
            "lamp.n.02",
            26,
            "furniture",
            (0.32, 0.44),
            (0.32, 0.44),
            (1.35, 1.7),
            ("white", "yellow", "orange", "red", "blue", "black"),
            (FLOOR,),
            False,
            False,
            1.0,
            build_lamp,
        ),
        ObjectTemplate(
            "ball",
            "ball.n.01",
            37,
            "sports",
            (0.18, 0.32),
            (0.18, 0.32),
            (0.18, 0.32),
            ("red", "blue", "yellow", "orange", "green", "white", "pink", "purple"),
            (FLOOR,),
            False,
            False,
            1.3,
            build_ball,
        ),
        ObjectTemplate(
            "shelf",
            "shelf.n.01",
            29,
            "furniture",
            (0.8, 1.2),
            (0.3, 0.4),
            (1.2, 1.8),
            ("brown", "white", "black", "gray"),
            (FLOOR,),
            False,
            True,
            0.9,
            build_shelf,
        ),
        ObjectTemplate(
            "plant",
            "plant.n.02",
            64,
            "furniture",
            (0.45, 0.7),
            (0.45, 0.7),
            (0.7, 1.2),
            ("green", "teal"),
            (FLOOR,),
            False,
            False,
            1.0,
            build_plant,
        ),
        ObjectTemplate(
            "sofa",
            "sofa.n.01",
            63,
            "furniture",
            (1.6, 2.1),
            (0.8, 0.95),
            (0.8, 0.95),
            _FURNITURE_COLOURS,
            (FLOOR,),
            False,
            True,
            0.7,
            build_sofa,
        ),
        ObjectTemplate(
            "cabinet",
            "cabinet.n.01",
            30,
            "furniture",
            (0.6, 1.0),
            (0.4, 0.5),
            (0.75, 0.95),
            ("brown", "white", "gray", "black", "blue"),
            (FLOOR,),
            True,
            True,
            0.7,
            build_cabinet,
        ),
        ObjectTemplate(
            "trash can",
            "ashcan.n.01",
            66,
            "indoor",
            (0.28, 0.38),
            (0.28, 0.38),
            (0.35, 0.5),
            ("gray", "black", "white", "blue", "green"),
            (FLOOR,),
            False,
            False,
            0.7,
            build_trash_can,
        ),
        ObjectTemplate(
            "mug",
            "mug.n.04",
            47,
            "kitchen",
            (0.10, 0.13),
            (0.09, 0.12),
            (0.09, 0.12),
            _SMALL_COLOURS,
            (SUPPORT,),
            False,
            False,
            1.6,
            build_mug,
        ),
        ObjectTemplate(
            "bottle",
            "bottle.n.01",
            44,
            "kitchen",
            (0.07, 0.09),
            (0.07, 0.09),
            (0.22, 0.32),
            ("green", "blue", "white", "orange", "purple", "teal"),
            (SUPPORT,),
            False,
            False,
            1.2,
            build_bottle,
        ),
        ObjectTemplate(
            "book",
            "book.n.01",
            84,
            "indoor",
            (0.15, 0.24),
            (0.21, 0.30),
            (0.025, 0.05),
            _SMALL_COLOURS,
            (SUPPORT,),
            False,
            False,
            1.2,
            build_book,
        ),
        ObjectTemplate(
            "vase",
            "vase.n.01",
            86,
            "indoor",
            (0.12, 0.2),
            (0.12, 0.2),
            (0.2, 0.35),
            ("white", "blue", "red", "teal", "yellow", "purple"),
            (SUPPORT,),
            False,
            False,
            0.9,
            build_vase,
        ),
        ObjectTemplate(
            "monitor",
            "monitor.n.04",
            72,
            "electronic",
            (0.45, 0.65),
            (0.16, 0.2),
            (0.35, 0.5),
            ("black", "white", "gray"),
            (SUPPORT,),
            False,
            True,
            0.7,
            build_monitor,
        ),
    )
}
"""All object templates, keyed by category."""

SUPPORT_CATEGORIES: tuple[str, ...] = tuple(name for name, t in CATALOGUE.items() if t.is_support)
"""Categories whose flat top can carry small objects."""
