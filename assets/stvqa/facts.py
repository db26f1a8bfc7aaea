"""Spatial facts read off a :class:`~assets.stvqa.scene.Scene`: true, false, or unknown.

The template generator only asks what these functions can decide, and the scene-graph solver
answers with the same functions, so a template question is right by construction and the solver's
agreement checks the text round trip (names resolve, options parse, letters map). Every function
returns `True`, `False`, or `None` when the scene does not settle the question (no relation stated,
no geometry, or a difference inside the safety margin); templates skip `None`.

Sources of truth, in order: the graph's relations (and their inverses); metric geometry where a
cache has it (:mod:`assets.stvqa.geometry`); 2D boxes for facts about the picture itself (where
an object is in the frame, which box is bigger, which boxes are near each other in the image).

>>> from assets.stvqa.scene import Scene, SceneObject, SceneRelation
>>> cup = SceneObject("1", "cup", "cup", (), (), (100, 500, 200, 600), (10.0, 50.0, 20.0, 60.0), "cup.1")
>>> box = SceneObject("2", "box", "box", (), (), (600, 400, 900, 900), (60.0, 40.0, 90.0, 90.0), "box.1")
>>> scene = Scene("1", 100, 100, [cup, box], [SceneRelation("1", "left of", "2")])
>>> relation_truth(scene, cup, "left of", box), relation_truth(scene, box, "left of", cup)
(True, False)
"""

from __future__ import annotations

import math

import numpy as np

from assets.stvqa.geometry import box_gap, centre_distance
from assets.stvqa.scene import Scene, SceneObject
from assets.stvqa.vocabulary import (
    CONTACT_PREDICATES,
    INVERSE_PREDICATES,
    SYMMETRIC_PREDICATES,
    fact_predicate,
)

LATERAL_MARGIN_GRID = 60
"""Box centres this far apart on the 0..1000 grid settle left/right when no relation is stated."""
DEPTH_MARGIN_M = 0.4
"""Camera distances must differ by this much (metres) to say which object is closer."""
DISTANCE_RATIO = 0.6
"""The nearer of two objects must be at most this fraction of the farther one's distance."""
DISTANCE_MARGIN_M = 0.5
IMAGE_DISTANCE_RATIO = 0.5
"""2D version of :data:`DISTANCE_RATIO`, on box centres in the image."""
SIZE_RATIO = 2.0
"""Volumes (or pixel areas) must differ by this factor to say which object is bigger."""
REACH_NEAR_M = 0.5
"""Objects whose boxes are at most this far apart are within arm's reach of each other."""
REACH_FAR_M = 1.5
"""Objects whose boxes are at least this far apart are out of reach."""
REACH_FAR_IMAGE = 0.45
"""Without geometry: box centres at least this far apart (fraction of the image diagonal), boxes not
overlapping, and no relation between them, count as out of reach."""
FACING_COS = math.cos(math.radians(35))
"""An object faces a direction when its front is within 35 degrees of it."""
NOT_FACING_COS = math.cos(math.radians(70))
PERSPECTIVE_COS = math.cos(math.radians(30))
PERSPECTIVE_MIN_M = 0.3
SHAPE_RATIO = 1.5
"""A box is clearly wider than tall (or taller than wide) by this aspect ratio."""
REGION_MARGIN = 40
"""Box centres within this many grid units of a region border are not placed in a region."""

HORIZONTAL_THIRDS = ("on the left side", "in the middle", "on the right side")
VERTICAL_THIRDS = ("at the top", "in the middle", "at the bottom")
QUADRANTS = ("top left", "top right", "bottom left", "bottom right")
HALVES = ("the left half", "the right half")
FACING_DIRECTIONS = (
    "toward the camera",
    "away from the camera",
    "toward the left of the image",
    "toward the right of the image",
)
PERSPECTIVE_DIRECTIONS = ("in front of it", "behind it", "to its left", "to its right")
SHAPES = ("horizontally", "vertically")


def _stated(scene: Scene, subject: SceneObject, predicate: str, obj: SceneObject) -> bool:
    """The graph states ``subject predicate obj`` directly or through the inverse predicate."""
    for relation in scene.relations_between(subject.object_id, obj.object_id):
        if relation.fact == predicate:
            return True
    inverse = INVERSE_PREDICATES.get(predicate)
    if inverse is not None:
        for relation in scene.relations_between(obj.object_id, subject.object_id):
            if relation.fact == inverse:
                return True
    return False


def relation_truth(scene: Scene, subject: SceneObject, predicate: str, obj: SceneObject) -> bool | None:
    """Whether ``subject predicate obj`` holds: stated, contradicted, settled by geometry or boxes, or unknown.

    A statement is contradicted when the graph states the opposite (``o p s`` or ``s inverse(p) o``) for
    an asymmetric predicate. Left/right also follow from box centres far enough apart; in front/behind
    from camera distances; bigger/smaller from volumes.
    """
    predicate = fact_predicate(predicate)
    if subject.object_id == obj.object_id:
        return None
    if _stated(scene, subject, predicate, obj):
        return True
    inverse = INVERSE_PREDICATES.get(predicate)
    if (
        inverse is not None
        and predicate not in SYMMETRIC_PREDICATES
        and _stated(scene, subject, inverse, obj)
    ):
        return False
    if predicate in ("left of", "right of"):
        delta = subject.centre_grid[0] - obj.centre_grid[0]
        if abs(delta) >= LATERAL_MARGIN_GRID:
            return (delta < 0) == (predicate == "left of")
        return None
    if predicate in ("in front of", "behind"):
        closer = closer_to_camera(scene, subject, obj)
        if closer is None:
            return None
        return closer == (predicate == "in front of")
    if predicate in ("bigger than", "smaller than"):
        bigger = bigger_than(scene, subject, obj)
        if bigger is None:
            return None
        return bigger == (predicate == "bigger than")
    return None


def closer_to_camera(scene: Scene, first: SceneObject, second: SceneObject) -> bool | None:
    """Whether `first` is closer to the camera than `second` (relations, else camera distances)."""
    if _stated(scene, first, "in front of", second):
        return True
    if _stated(scene, first, "behind", second):
        return False
    if first.geometry is not None and second.geometry is not None:
        difference = second.geometry.distance_to_camera - first.geometry.distance_to_camera
        if abs(difference) >= DEPTH_MARGIN_M:
            return difference > 0
    return None


def bigger_than(scene: Scene, first: SceneObject, second: SceneObject) -> bool | None:
    """Whether `first` is bigger (in 3D) than `second` (relations, else volumes differing by :data:`SIZE_RATIO`)."""
    if _stated(scene, first, "bigger than", second):
        return True
    if _stated(scene, first, "smaller than", second):
        return False
    if first.geometry is not None and second.geometry is not None:
        first_volume, second_volume = first.geometry.volume_m3, second.geometry.volume_m3
        if first_volume and second_volume:
            if first_volume >= SIZE_RATIO * second_volume:
                return True
            if second_volume >= SIZE_RATIO * first_volume:
                return False
    return None


def larger_in_image(first: SceneObject, second: SceneObject) -> bool | None:
    """Whether `first`'s box covers more of the image than `second`'s (by :data:`SIZE_RATIO`)."""
    if first.area_px >= SIZE_RATIO * second.area_px:
        return True
    if second.area_px >= SIZE_RATIO * first.area_px:
        return False
    return None


def camera_distance(obj: SceneObject) -> float | None:
    """The object's distance from the camera in metres, if known."""
    return None if obj.geometry is None else obj.geometry.distance_to_camera


def nearer_to(scene: Scene, reference: SceneObject, first: SceneObject, second: SceneObject) -> bool | None:
    """Whether `first` is nearer to `reference` than `second` is, in 3D (needs geometry for all three)."""
    if reference.geometry is None or first.geometry is None or second.geometry is None:
        return None
    to_first = centre_distance(reference.geometry, first.geometry)
    to_second = centre_distance(reference.geometry, second.geometry)
    if to_first <= DISTANCE_RATIO * to_second and to_second - to_first >= DISTANCE_MARGIN_M:
        return True
    if to_second <= DISTANCE_RATIO * to_first and to_first - to_second >= DISTANCE_MARGIN_M:
        return False
    return None


def _image_distance(first: SceneObject, second: SceneObject) -> float:
    (x1, y1), (x2, y2) = first.centre_grid, second.centre_grid
    return math.hypot(x1 - x2, y1 - y2) / (1000.0 * math.sqrt(2.0))


def nearer_in_image(reference: SceneObject, first: SceneObject, second: SceneObject) -> bool | None:
    """Whether `first`'s box centre is nearer `reference`'s than `second`'s is (2D, by :data:`IMAGE_DISTANCE_RATIO`)."""
    to_first, to_second = _image_distance(reference, first), _image_distance(reference, second)
    if to_first <= IMAGE_DISTANCE_RATIO * to_second and to_second - to_first >= 0.05:
        return True
    if to_second <= IMAGE_DISTANCE_RATIO * to_first and to_first - to_second >= 0.05:
        return False
    return None


def _boxes_overlap(first: SceneObject, second: SceneObject) -> bool:
    a, b = first.bbox, second.bbox
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def within_reach(scene: Scene, first: SceneObject, second: SceneObject) -> bool | None:
    """Whether the two objects are within arm's reach of each other.

    True when a contact relation links them (on, next to, holding...) or their 3D boxes are at most
    :data:`REACH_NEAR_M` apart; false when the 3D boxes are at least :data:`REACH_FAR_M` apart or,
    without geometry, when the boxes are far apart in the image and unrelated.
    """
    related = scene.relations_between(first.object_id, second.object_id) + scene.relations_between(
        second.object_id, first.object_id
    )
    if any(
        relation.predicate in CONTACT_PREDICATES or relation.fact in CONTACT_PREDICATES
        for relation in related
    ):
        return True
    if first.geometry is not None and second.geometry is not None:
        gap = box_gap(first.geometry, second.geometry)
        if gap is None:
            gap = centre_distance(first.geometry, second.geometry)
        if gap <= REACH_NEAR_M:
            return True
        if gap >= REACH_FAR_M:
            return False
        return None
    if (
        not related
        and not _boxes_overlap(first, second)
        and _image_distance(first, second) >= REACH_FAR_IMAGE
    ):
        return False
    return None


def facing_direction(obj: SceneObject) -> str | None:
    """Which of :data:`FACING_DIRECTIONS` the object's front points to (camera frame), if clear."""
    if obj.geometry is None or obj.geometry.facing_camera is None:
        return None
    x, _, z = obj.geometry.facing_camera
    norm = math.hypot(x, z)
    if norm < 1e-6:
        return None
    x, z = x / norm, z / norm
    if -z >= FACING_COS:
        return FACING_DIRECTIONS[0]
    if z >= FACING_COS:
        return FACING_DIRECTIONS[1]
    if -x >= FACING_COS:
        return FACING_DIRECTIONS[2]
    if x >= FACING_COS:
        return FACING_DIRECTIONS[3]
    return None


def faces_camera(obj: SceneObject) -> bool | None:
    """Whether the object faces the camera (within 35 degrees), clearly does not (beyond 70), or unclear."""
    if obj.geometry is None or obj.geometry.facing_camera is None:
        return None
    position = np.asarray(obj.geometry.camera_xyz, dtype=np.float64)
    towards_camera = -position / max(float(np.linalg.norm(position)), 1e-9)
    facing = np.asarray(obj.geometry.facing_camera, dtype=np.float64)
    cosine = float(facing @ towards_camera) / max(float(np.linalg.norm(facing)), 1e-9)
    if cosine >= FACING_COS:
        return True
    if cosine <= NOT_FACING_COS:
        return False
    return None


def direction_from(viewer: SceneObject, target: SceneObject) -> str | None:
    """Where `target` is from `viewer`'s point of view (:data:`PERSPECTIVE_DIRECTIONS`), if clear.

    Needs the viewer's facing direction and both positions in one frame; the direction must lie within
    30 degrees of front, back, left or right, in the horizontal plane.
    """
    if viewer.geometry is None or target.geometry is None:
        return None
    frame = viewer.geometry.heading_frame()
    if frame is None:
        return None
    position, facing, up = frame
    if viewer.geometry.facing_world is not None and target.geometry.aabb_min is not None:
        target_position = target.geometry.centre
    elif viewer.geometry.facing_world is None:
        target_position = np.asarray(target.geometry.camera_xyz, dtype=np.float64)
    else:
        return None
    offset = target_position - position
    offset = offset - (offset @ up) * up
    facing = facing - (facing @ up) * up
    distance = float(np.linalg.norm(offset))
    if distance < PERSPECTIVE_MIN_M or float(np.linalg.norm(facing)) < 1e-6:
        return None
    facing = facing / np.linalg.norm(facing)
    right = np.cross(facing, up)
    forward_cos = float(offset @ facing) / distance
    right_cos = float(offset @ right) / distance
    if forward_cos >= PERSPECTIVE_COS:
        return PERSPECTIVE_DIRECTIONS[0]
    if -forward_cos >= PERSPECTIVE_COS:
        return PERSPECTIVE_DIRECTIONS[1]
    if -right_cos >= PERSPECTIVE_COS:
        return PERSPECTIVE_DIRECTIONS[2]
    if right_cos >= PERSPECTIVE_COS:
        return PERSPECTIVE_DIRECTIONS[3]
    return None


def _region(coordinate: float, borders: tuple[float, ...]) -> int | None:
    for border in borders:
        if abs(coordinate - border) < REGION_MARGIN:
            return None
    return sum(coordinate > border for border in borders)


def horizontal_third(obj: SceneObject) -> str | None:
    """Which third of the image width the box centre is in, unless it is near a border."""
    index = _region(obj.centre_grid[0], (1000 / 3, 2000 / 3))
    return None if index is None else HORIZONTAL_THIRDS[index]


def vertical_third(obj: SceneObject) -> str | None:
    """Which third of the image height the box centre is in, unless it is near a border."""
    index = _region(obj.centre_grid[1], (1000 / 3, 2000 / 3))
    return None if index is None else VERTICAL_THIRDS[index]


def horizontal_half(obj: SceneObject) -> str | None:
    """Which half of the image the box centre is in, unless it is near the middle."""
    index = _region(obj.centre_grid[0], (500.0,))
    return None if index is None else HALVES[index]


def quadrant(obj: SceneObject) -> str | None:
    """Which quarter of the image the box centre is in, unless it is near a middle line."""
    column = _region(obj.centre_grid[0], (500.0,))
    row = _region(obj.centre_grid[1], (500.0,))
    if column is None or row is None:
        return None
    return QUADRANTS[row * 2 + column]


def box_orientation(obj: SceneObject) -> str | None:
    """``"horizontally"`` when the pixel box is clearly wider than tall, ``"vertically"`` when taller, else `None`."""
    width = obj.bbox_px[2] - obj.bbox_px[0]
    height = obj.bbox_px[3] - obj.bbox_px[1]
    if width >= SHAPE_RATIO * height:
        return SHAPES[0]
    if height >= SHAPE_RATIO * width:
        return SHAPES[1]
    return None
