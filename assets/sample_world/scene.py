"""Sampling of rooms, the objects in them and the camera views that look into them.

World frame: metres, z up, the floor is the plane z = 0 and the room spans
`[0, width] x [0, depth] x [0, height]`. Cameras follow OpenCV (x right, y down, z forward) and
poses are 4x4 camera-to-world matrices. Intrinsics put pixel centres at integer coordinates
(OpenCV), so the colour principal point of a `W x H` image is `((W - 1) / 2, (H - 1) / 2)`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from assets.sample_world.catalogue import CATALOGUE, COLOURS, FLOOR, SUPPORT, ObjectTemplate, Part
from assets.sample_world.config import MIXED_CAMERA_PATHS, SampleWorldConfig

logger = logging.getLogger(__name__)

FLOOR_CLEARANCE = 0.15
"""Least gap in metres between the footprints of two objects standing on the floor."""
SUPPORT_CLEARANCE = 0.02
"""Least gap in metres between two objects standing on the same support."""
SUPPORT_EDGE_MARGIN = 0.03
"""Objects on a support keep this distance from its edges."""
CAMERA_OBJECT_CLEARANCE = 0.3
"""Cameras keep this distance from every object footprint."""

SCENE_TYPES = ("Living room / Lounge", "Office", "Bedroom / Hotel", "Conference Room", "Apartment")
_FLOOR_TONES = ((0.55, 0.42, 0.30), (0.62, 0.58, 0.52), (0.45, 0.40, 0.36), (0.70, 0.62, 0.48))
_WALL_TONES = ((0.86, 0.84, 0.78), (0.80, 0.84, 0.86), (0.88, 0.82, 0.76), (0.82, 0.86, 0.80))
_CEILING_RGB = (0.92, 0.92, 0.92)


@dataclass(frozen=True)
class Room:
    """An empty box-shaped room (the floor at z = 0, walls at x = 0, x = width, y = 0, y = depth)."""

    width: float
    depth: float
    height: float
    floor_rgb: tuple[float, float, float]
    wall_rgb: tuple[float, float, float]
    ceiling_rgb: tuple[float, float, float]

    @property
    def centre(self) -> np.ndarray:
        """The centre of the floor, `(x, y, 0)`."""
        return np.array([self.width / 2.0, self.depth / 2.0, 0.0])


def yaw_rotation(yaw: float) -> np.ndarray:
    """The 3x3 rotation about +z by `yaw` radians.

    >>> np.round(yaw_rotation(math.pi / 2) @ np.array([1.0, 0.0, 0.0]), 6).tolist()
    [0.0, 1.0, 0.0]
    """
    cos_yaw, sin_yaw = math.cos(yaw), math.sin(yaw)
    return np.array([[cos_yaw, -sin_yaw, 0.0], [sin_yaw, cos_yaw, 0.0], [0.0, 0.0, 1.0]])


def box_corners(minimum: np.ndarray, maximum: np.ndarray) -> np.ndarray:
    """The 8 corners of an axis-aligned box, bottom face first (x varies fastest).

    >>> box_corners(np.zeros(3), np.ones(3))[7].tolist()
    [1.0, 1.0, 1.0]
    """
    xs = (minimum[0], maximum[0])
    ys = (minimum[1], maximum[1])
    zs = (minimum[2], maximum[2])
    return np.array(
        [[xs[i], ys[j], zs[k]] for k in range(2) for j in range(2) for i in range(2)], dtype=np.float64
    )


@dataclass(frozen=True, eq=False)
class SceneObject:
    """One placed object: its template, colour, pose and geometry.

    The object's local frame is the template's frame rotated by `yaw` about +z and moved to
    `position` (footprint centre x, y and the height of its lowest point).
    """

    object_id: int
    template: ObjectTemplate
    colour: str
    size_word: str | None
    yaw: float
    position: np.ndarray
    parts: tuple[Part, ...]
    support_id: int | None

    @property
    def category(self) -> str:
        """The object's category noun (`"chair"`)."""
        return self.template.category

    @property
    def name(self) -> str:
        """Colour plus category (`"red chair"`); unique within a scene."""
        return f"{self.colour} {self.category}"

    @cached_property
    def rotation(self) -> np.ndarray:
        """Local-to-world rotation."""
        return yaw_rotation(self.yaw)

    def to_world(self, points: np.ndarray) -> np.ndarray:
        """Map local points of shape `(n, 3)` to the world frame."""
        return points @ self.rotation.T + self.position

    @cached_property
    def local_min(self) -> np.ndarray:
        """Lower corner of the object's tight box in its local frame."""
        return np.min([part.vertices.min(axis=0) for part in self.parts], axis=0)

    @cached_property
    def local_max(self) -> np.ndarray:
        """Upper corner of the object's tight box in its local frame."""
        return np.max([part.vertices.max(axis=0) for part in self.parts], axis=0)

    @cached_property
    def extents(self) -> np.ndarray:
        """Sizes of the oriented box along local x, y, z in metres."""
        return self.local_max - self.local_min

    @cached_property
    def centroid(self) -> np.ndarray:
        """World centre of the oriented box."""
        return self.to_world(((self.local_min + self.local_max) / 2.0)[None, :])[0]

    @cached_property
    def obb_corners(self) -> np.ndarray:
        """The 8 world corners of the oriented box (bottom face first)."""
        return self.to_world(box_corners(self.local_min, self.local_max))

    @cached_property
    def world_vertices(self) -> np.ndarray:
        """All mesh vertices in the world frame."""
        return self.to_world(np.concatenate([part.vertices for part in self.parts]))

    @cached_property
    def aabb(self) -> tuple[np.ndarray, np.ndarray]:
        """World axis-aligned box of the mesh (tight), as `(minimum, maximum)`."""
        vertices = self.world_vertices
        return vertices.min(axis=0), vertices.max(axis=0)

    @cached_property
    def footprint(self) -> np.ndarray:
        """The 4 world xy corners of the oriented box's footprint, counter-clockwise."""
        low, high = self.local_min, self.local_max
        corners = np.array(
            [[low[0], low[1], 0.0], [high[0], low[1], 0.0], [high[0], high[1], 0.0], [low[0], high[1], 0.0]]
        )
        return self.to_world(corners)[:, :2]

    @cached_property
    def volume(self) -> float:
        """Volume of the oriented box in cubic metres."""
        return float(np.prod(self.extents))

    @cached_property
    def facing(self) -> np.ndarray | None:
        """World unit vector of the object's front (local +y), or None for objects without one."""
        if not self.template.has_front:
            return None
        return self.rotation @ np.array([0.0, 1.0, 0.0])


@dataclass(frozen=True, eq=False)
class Scene:
    """A room with its objects."""

    scene_index: int
    scene_id: str
    scene_type: str
    room: Room
    objects: tuple[SceneObject, ...]


@dataclass(frozen=True, eq=False)
class View:
    """One camera view: colour and depth intrinsics (3x3) and the camera-to-world pose (4x4)."""

    frame_index: int
    width: int
    height: int
    depth_width: int
    depth_height: int
    color_intrinsics: np.ndarray
    depth_intrinsics: np.ndarray
    pose: np.ndarray

    @property
    def position(self) -> np.ndarray:
        """Camera centre in the world frame."""
        return self.pose[:3, 3]

    @property
    def rotation(self) -> np.ndarray:
        """Camera-to-world rotation (columns: camera x right, y down, z forward in world)."""
        return self.pose[:3, :3]

    def world_to_camera(self, points: np.ndarray) -> np.ndarray:
        """Map world points `(n, 3)` to camera coordinates."""
        return (points - self.position) @ self.rotation


def scene_id_for(scene_index: int) -> str:
    """ScanNet-style scene id.

    >>> scene_id_for(7)
    'scene0007_00'
    """
    return f"scene{scene_index:04d}_00"


def scene_rng(seed: int, scene_index: int) -> np.random.Generator:
    """The random generator of one scene: depends only on the seed and the scene index."""
    return np.random.default_rng(np.random.SeedSequence([seed, scene_index]))


def rectangles_overlap(first: np.ndarray, second: np.ndarray, clearance: float) -> bool:
    """Whether two convex quadrilaterals (4x2, in order) come closer than `clearance` (separating axes).

    >>> square = np.array([[0, 0], [1, 0], [1, 1], [0, 1]], dtype=float)
    >>> rectangles_overlap(square, square + [1.1, 0.0], 0.05), rectangles_overlap(square, square + [1.1, 0.0], 0.2)
    (False, True)
    """
    for polygon in (first, second):
        for index in range(len(polygon)):
            edge = polygon[(index + 1) % len(polygon)] - polygon[index]
            axis = np.array([-edge[1], edge[0]])
            axis /= np.linalg.norm(axis)
            first_projection = first @ axis
            second_projection = second @ axis
            if (
                first_projection.max() + clearance <= second_projection.min()
                or second_projection.max() + clearance <= first_projection.min()
            ):
                return False
    return True


def _sample_room(config: SampleWorldConfig, rng: np.random.Generator) -> Room:
    return Room(
        width=round(float(rng.uniform(*config.room_width_range)), 3),
        depth=round(float(rng.uniform(*config.room_depth_range)), 3),
        height=round(float(rng.uniform(*config.room_height_range)), 3),
        floor_rgb=_FLOOR_TONES[int(rng.integers(len(_FLOOR_TONES)))],
        wall_rgb=_WALL_TONES[int(rng.integers(len(_WALL_TONES)))],
        ceiling_rgb=_CEILING_RGB,
    )


def _sample_shape(template: ObjectTemplate, colour: str, rng: np.random.Generator):
    fractions = rng.uniform(0.0, 1.0, size=3)
    sizes = [
        low + fraction * (high - low)
        for (low, high), fraction in zip(
            (template.width_range, template.depth_range, template.height_range), fractions, strict=True
        )
    ]
    mean_fraction = float(fractions.mean())
    size_word = "large" if mean_fraction > 0.67 else "small" if mean_fraction < 0.33 else None
    parts = tuple(template.build(sizes[0], sizes[1], sizes[2], COLOURS[colour]))
    return parts, size_word


def _try_floor_position(
    config: SampleWorldConfig,
    room: Room,
    candidate: SceneObject,
    placed: list[SceneObject],
    rng: np.random.Generator,
) -> SceneObject | None:
    margin = config.object_wall_margin
    for _ in range(30):
        yaw = float(rng.uniform(0.0, 2.0 * math.pi))
        position = np.array(
            [rng.uniform(margin, room.width - margin), rng.uniform(margin, room.depth - margin), 0.0]
        )
        trial = SceneObject(
            candidate.object_id,
            candidate.template,
            candidate.colour,
            candidate.size_word,
            yaw,
            position,
            candidate.parts,
            None,
        )
        trial = _recentre(trial)
        footprint = trial.footprint
        if (
            footprint[:, 0].min() < margin
            or footprint[:, 0].max() > room.width - margin
            or footprint[:, 1].min() < margin
            or footprint[:, 1].max() > room.depth - margin
        ):
            continue
        if any(
            other.support_id is None and rectangles_overlap(footprint, other.footprint, FLOOR_CLEARANCE)
            for other in placed
        ):
            continue
        return trial
    return None


def _recentre(scene_object: SceneObject) -> SceneObject:
    """Shift the position so that the footprint centre of the object's tight box lands on it."""
    local_centre = (scene_object.local_min + scene_object.local_max) / 2.0
    offset = scene_object.rotation @ np.array([local_centre[0], local_centre[1], scene_object.local_min[2]])
    position = scene_object.position - offset
    return SceneObject(
        scene_object.object_id,
        scene_object.template,
        scene_object.colour,
        scene_object.size_word,
        scene_object.yaw,
        position,
        scene_object.parts,
        scene_object.support_id,
    )


def _try_support_position(
    candidate: SceneObject, placed: list[SceneObject], rng: np.random.Generator
) -> SceneObject | None:
    supports = [other for other in placed if other.template.is_support and other.support_id is None]
    if not supports:
        return None
    support = supports[int(rng.integers(len(supports)))]
    low = support.local_min[:2] + SUPPORT_EDGE_MARGIN
    high = support.local_max[:2] - SUPPORT_EDGE_MARGIN
    top = float(support.position[2] + support.local_max[2])
    for _ in range(25):
        local_xy = rng.uniform(low, high)
        yaw = float(rng.uniform(0.0, 2.0 * math.pi))
        position = support.to_world(np.array([[local_xy[0], local_xy[1], 0.0]]))[0]
        position[2] = top
        trial = _recentre(
            SceneObject(
                candidate.object_id,
                candidate.template,
                candidate.colour,
                candidate.size_word,
                yaw,
                position,
                candidate.parts,
                support.object_id,
            )
        )
        footprint_local = (np.c_[trial.footprint, np.full(4, top)] - support.position) @ support.rotation
        if (footprint_local[:, :2] < low).any() or (footprint_local[:, :2] > high).any():
            continue
        if any(
            other.support_id == support.object_id
            and rectangles_overlap(trial.footprint, other.footprint, SUPPORT_CLEARANCE)
            for other in placed
        ):
            continue
        return trial
    return None


def sample_scene(config: SampleWorldConfig, scene_index: int) -> Scene:
    """Sample one room and its objects (deterministic in `config.seed` and `scene_index`).

    The first object is a table or a cabinet, so small objects (mugs, books, ...) have somewhere to
    stand. Every `(category, colour)` pair occurs at most once per scene, so an object's name
    (`"red chair"`) identifies it.

    >>> scene = sample_scene(SampleWorldConfig(num_scenes=1), 0)
    >>> scene.scene_id, 4 <= len(scene.objects) <= 12
    ('scene0000_00', True)
    """
    rng = scene_rng(config.seed, scene_index)
    room = _sample_room(config, rng)
    target = int(rng.integers(config.min_objects, config.max_objects + 1))
    categories = list(CATALOGUE)
    weights = np.array([CATALOGUE[name].weight for name in categories])
    weights = weights / weights.sum()
    placed: list[SceneObject] = []
    used_names: set[tuple[str, str]] = set()
    attempts = 0
    while len(placed) < target and attempts < 40 * target:
        attempts += 1
        if not placed:
            category = "table" if rng.uniform() < 0.75 else "cabinet"
        elif attempts > 25 * target:
            category = ("ball", "box", "trash can", "mug", "book")[int(rng.integers(5))]
        else:
            category = categories[int(rng.choice(len(categories), p=weights))]
        template = CATALOGUE[category]
        colours = [colour for colour in template.colours if (category, colour) not in used_names]
        if not colours:
            continue
        colour = colours[int(rng.integers(len(colours)))]
        parts, size_word = _sample_shape(template, colour, rng)
        candidate = SceneObject(len(placed), template, colour, size_word, 0.0, np.zeros(3), parts, None)
        if FLOOR in template.placements and (SUPPORT not in template.placements or rng.uniform() < 0.5):
            result = _try_floor_position(config, room, candidate, placed, rng)
        else:
            result = _try_support_position(candidate, placed, rng)
        if result is None:
            continue
        placed.append(result)
        used_names.add((category, colour))
    if len(placed) < config.min_objects:
        raise RuntimeError(
            f"Scene {scene_index}: placed only {len(placed)} of at least {config.min_objects} objects; "
            "use larger rooms or fewer objects."
        )
    scene_type = SCENE_TYPES[int(rng.integers(len(SCENE_TYPES)))]
    return Scene(scene_index, scene_id_for(scene_index), scene_type, room, tuple(placed))


def intrinsics_matrix(focal: float, centre_x: float, centre_y: float) -> np.ndarray:
    """A 3x3 pinhole matrix with square pixels."""
    return np.array([[focal, 0.0, centre_x], [0.0, focal, centre_y], [0.0, 0.0, 1.0]])


def camera_intrinsics(config: SampleWorldConfig) -> tuple[np.ndarray, np.ndarray]:
    """Colour and depth intrinsics (3x3) for the configured image sizes and field of view.

    Depth pixels are `depth_downsample` colour pixels wide; with pixel centres at integer
    coordinates the depth principal point is `(c + 0.5) / s - 0.5`.

    >>> color, depth = camera_intrinsics(SampleWorldConfig(width=64, height=48))
    >>> float(color[0, 2]), float(depth[0, 2])
    (31.5, 15.5)
    """
    focal = config.width / (2.0 * math.tan(math.radians(config.horizontal_fov_degrees) / 2.0))
    color = intrinsics_matrix(focal, (config.width - 1) / 2.0, (config.height - 1) / 2.0)
    scale = config.depth_downsample
    depth = intrinsics_matrix(
        focal / scale, (color[0, 2] + 0.5) / scale - 0.5, (color[1, 2] + 0.5) / scale - 0.5
    )
    return color, depth


def look_at(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """OpenCV camera-to-world pose at `eye` looking at `target` with world +z up (no roll).

    >>> pose = look_at(np.array([0.0, 0.0, 1.0]), np.array([0.0, 5.0, 1.0]))
    >>> np.round(pose[:3, :3], 6).tolist()
    [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]]
    """
    forward = target - eye
    forward = forward / np.linalg.norm(forward)
    right = np.cross(forward, np.array([0.0, 0.0, 1.0]))
    right = right / np.linalg.norm(right)
    down = np.cross(forward, right)
    pose = np.eye(4)
    pose[:3, 0] = right
    pose[:3, 1] = down
    pose[:3, 2] = forward
    pose[:3, 3] = eye
    return pose


def _point_on_inset_rectangle(room: Room, inset: float, angle: float) -> np.ndarray:
    half_x = room.width / 2.0 - inset
    half_y = room.depth / 2.0 - inset
    direction = np.array([math.cos(angle), math.sin(angle)])
    scale = min(
        half_x / abs(direction[0]) if abs(direction[0]) > 1e-9 else math.inf,
        half_y / abs(direction[1]) if abs(direction[1]) > 1e-9 else math.inf,
    )
    return room.centre[:2] + direction * scale


def sample_views(config: SampleWorldConfig, scene: Scene) -> list[View]:
    """Camera views of one scene, in frame order, along the configured `camera_path`.

    >>> config = SampleWorldConfig(num_scenes=1, views_per_scene=3)
    >>> views = sample_views(config, sample_scene(config, 0))
    >>> len(views), views[0].pose.shape
    (3, (4, 4))
    """
    path = scene_camera_path(config, scene.scene_index)
    if path == "handheld":
        return _handheld_views(config, scene)
    if path == "partial":
        return _loop_views(config, scene, arc=PARTIAL_ARC)
    if path == "lookaround":
        return _lookaround_views(config, scene)
    return _loop_views(config, scene)


def scene_camera_path(config: SampleWorldConfig, scene_index: int) -> str:
    """The camera path of one scene: the configured one, or the scene's turn of a `"mixed"` world.

    >>> [scene_camera_path(SampleWorldConfig(camera_path="mixed"), index) for index in range(5)]
    ['loop', 'handheld', 'partial', 'lookaround', 'loop']
    """
    if config.camera_path == "mixed":
        return MIXED_CAMERA_PATHS[scene_index % len(MIXED_CAMERA_PATHS)]
    return config.camera_path


def clear_of_objects(scene: Scene, point_xy: np.ndarray, clearance: float = CAMERA_OBJECT_CLEARANCE) -> bool:
    """Whether a floor point keeps `clearance` from every object footprint."""
    corner = np.asarray(point_xy, dtype=np.float64)
    square = np.array([corner, corner + [1e-3, 0], corner + [1e-3, 1e-3], corner + [0, 1e-3]])
    return all(
        not rectangles_overlap(square, scene_object.footprint, clearance) for scene_object in scene.objects
    )


def _view(config: SampleWorldConfig, frame: int, pose: np.ndarray) -> View:
    color_k, depth_k = camera_intrinsics(config)
    return View(
        frame_index=frame,
        width=config.width,
        height=config.height,
        depth_width=config.depth_width,
        depth_height=config.depth_height,
        color_intrinsics=color_k,
        depth_intrinsics=depth_k,
        pose=pose,
    )


PARTIAL_ARC = 2.0 * math.pi / 3.0
"""Share of the loop (radians around the room) that the `"partial"` camera path walks: a third."""


def _loop_views(config: SampleWorldConfig, scene: Scene, arc: float = 2.0 * math.pi) -> list[View]:
    """The `"loop"` camera path: the camera walks once around the room near the walls, looking at the furniture, while its height
    rises and falls between `camera_height_range` (so views differ in height, and long sequences move
    smoothly). The look-at point wanders around the objects' centre. With `arc` below a full turn the
    camera walks only that part of the loop (the `"partial"` path): the walls behind it are never seen.
    """
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, scene.scene_index, 1]))
    count = config.views_per_scene
    room = scene.room
    centre = np.mean([scene_object.centroid[:2] for scene_object in scene.objects], axis=0)
    start = float(rng.uniform(0.0, 2.0 * math.pi))
    phase = math.pi / 2.0 + float(rng.uniform(-0.6, 0.6))
    wander = rng.uniform(0.0, 2.0 * math.pi, size=3)
    low, high = config.camera_height_range
    step = arc / count
    views = []
    for frame in range(count):
        eye_xy = None
        for attempt in range(20):
            jitter = float(rng.uniform(-0.15, 0.15)) * step * (1 + attempt)
            candidate = _point_on_inset_rectangle(
                room, config.camera_wall_margin, start + frame * step + jitter
            )
            if clear_of_objects(scene, candidate):
                eye_xy = candidate
                break
        if eye_xy is None:
            eye_xy = candidate
            logger.warning("%s frame %d: camera close to an object", scene.scene_id, frame)
        wave = math.sin(phase + 2.0 * math.pi * frame / count)
        eye_height = float(
            np.clip((low + high) / 2.0 + (high - low) / 2.0 * wave + rng.normal(0.0, 0.04), low, high)
        )
        target = np.array(
            [
                centre[0] + 0.35 * math.cos(wander[0] + 2.0 * step * frame),
                centre[1] + 0.35 * math.sin(wander[1] + 2.0 * step * frame),
                0.55 + 0.25 * math.sin(wander[2] + step * frame),
            ]
        )
        eye = np.array([eye_xy[0], eye_xy[1], eye_height])
        views.append(_view(config, frame, look_at(eye, target)))
    return views


def _lookaround_views(config: SampleWorldConfig, scene: Scene) -> list[View]:
    """The `"lookaround"` camera path: the camera stands at the clear floor point nearest the room's centre and turns
    once around on the spot (each frame a `360 / views` degree turn the same way, the hand shifting the camera by a
    few centimetres), looking a little down, its height drifting slowly."""
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, scene.scene_index, 1]))
    room = scene.room
    xs = np.linspace(config.camera_wall_margin, room.width - config.camera_wall_margin, 25)
    ys = np.linspace(config.camera_wall_margin, room.depth - config.camera_wall_margin, 25)
    candidates = sorted(
        (np.array([x, y]) for x in xs for y in ys),
        key=lambda point: float(np.linalg.norm(point - room.centre[:2])),
    )
    spot = next(
        (point for point in candidates if clear_of_objects(scene, point, CAMERA_OBJECT_CLEARANCE + 0.2)), None
    )
    if spot is None:
        spot = candidates[0]
        logger.warning("%s: the look-around stands close to an object", scene.scene_id)
    low, high = config.camera_height_range
    height = float(rng.uniform(low + 0.3 * (high - low), high - 0.3 * (high - low)))
    start = float(rng.uniform(0.0, 2.0 * math.pi))
    turn = (1.0 if rng.uniform() < 0.5 else -1.0) * 2.0 * math.pi / config.views_per_scene
    views = []
    for frame in range(config.views_per_scene):
        yaw = start + turn * frame
        pitch = math.radians(float(rng.uniform(-25.0, -10.0)))
        xy = spot + rng.normal(0.0, 0.03, size=2)
        if not clear_of_objects(scene, xy):
            xy = spot
        eye = np.array([xy[0], xy[1], float(np.clip(height + rng.normal(0.0, 0.02), low, high))])
        ahead = np.array([math.cos(yaw) * math.cos(pitch), math.sin(yaw) * math.cos(pitch), math.sin(pitch)])
        views.append(_view(config, frame, look_at(eye, eye + ahead)))
    return views


PAN_STEP_DEGREES = (30.0, 60.0)
"""Least and most heading change between consecutive frames of a pan in place (hand-held path)."""
WALK_STRIDE_M = (0.5, 0.7)
"""Range of the distance between consecutive frames of a walk (hand-held path)."""
WALK_END_INSET_M = 1.0
"""A walk ends at least this far from the walls, so the camera does not stare at a wall from up close."""
WALK_LOOK_AHEAD_M = 0.5
"""A forward walk stops where the floor this far ahead of the camera is not clear of objects."""


@dataclass(frozen=True)
class _Pose2D:
    """A camera on the hand-held path: floor position, heading (radians), pitch (radians, down < 0), height."""

    xy: np.ndarray
    yaw: float
    pitch: float
    height: float


def _inside(room: Room, point_xy: np.ndarray, inset: float) -> bool:
    return bool(inset <= point_xy[0] <= room.width - inset and inset <= point_xy[1] <= room.depth - inset)


def _wrap(angle: float) -> float:
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


def _walk_positions(
    config: SampleWorldConfig,
    scene: Scene,
    start: np.ndarray,
    rng: np.random.Generator,
    forward: bool,
    across: bool,
) -> tuple[float, list[np.ndarray]]:
    """A walk from `start` toward a point on the far side of the room's centre (`across`) or anywhere near the walls:
    its direction and the clear frame positions."""
    room = scene.room
    inset = min(max(config.camera_wall_margin, WALK_END_INSET_M), min(room.width, room.depth) / 2.0 - 0.5)
    away = math.atan2(start[1] - room.centre[1], start[0] - room.centre[0])
    angle = (
        away + math.pi + float(rng.uniform(-0.7, 0.7)) if across else float(rng.uniform(0.0, 2.0 * math.pi))
    )
    target = _point_on_inset_rectangle(room, inset, angle)
    direction = math.atan2(target[1] - start[1], target[0] - start[0])
    unit = np.array([math.cos(direction), math.sin(direction)])
    length = float(np.linalg.norm(target - start))
    positions: list[np.ndarray] = []
    travelled = 0.0
    while True:
        travelled += float(rng.uniform(*WALK_STRIDE_M))
        if travelled > length:
            break
        point = start + unit * travelled
        if not (_inside(room, point, config.camera_wall_margin) and clear_of_objects(scene, point)):
            break
        if forward and not clear_of_objects(scene, point + unit * WALK_LOOK_AHEAD_M, 0.0):
            break
        positions.append(point)
    return direction, positions


def _handheld_path(config: SampleWorldConfig, scene: Scene, rng: np.random.Generator) -> list[_Pose2D]:
    """The hand-held path: alternately a pan in place toward the next walk's heading and the walk."""
    room = scene.room
    count = config.views_per_scene
    low, high = config.camera_height_range
    centre = np.mean([scene_object.centroid[:2] for scene_object in scene.objects], axis=0)
    start = None
    for _ in range(40):
        candidate = _point_on_inset_rectangle(
            room, config.camera_wall_margin + 0.3, float(rng.uniform(0.0, 2.0 * math.pi))
        )
        if clear_of_objects(scene, candidate):
            start = candidate
            break
    if start is None:
        start = candidate
        logger.warning("%s: hand-held path starts close to an object", scene.scene_id)
    toward_centre = math.atan2(centre[1] - start[1], centre[0] - start[0])
    height = float(rng.uniform(low + 0.2 * (high - low), high - 0.2 * (high - low)))
    path = [_Pose2D(start, toward_centre, math.radians(float(rng.uniform(-25, -10))), height)]
    while len(path) < count:
        here = path[-1]
        forward = bool(rng.uniform() < 0.6)
        best: tuple[float, list[np.ndarray]] = (0.0, [])
        forward_walk = forward
        for attempt in range(24):
            walks_forward = forward and attempt < 12
            direction, positions = _walk_positions(
                config, scene, here.xy, rng, walks_forward, across=attempt % 2 == 0
            )
            if len(positions) > len(best[1]):
                best, forward_walk = (direction, positions), walks_forward
            if len(positions) >= 2:
                break
        forward = forward_walk if best[1] else forward
        direction, positions = best
        if forward:
            heading = direction
        else:  # sideways: look at the room's objects while walking past them
            sides = (direction + math.pi / 2.0, direction - math.pi / 2.0)
            heading = max(
                sides,
                key=lambda yaw: math.cos(yaw - math.atan2(centre[1] - here.xy[1], centre[0] - here.xy[0])),
            )
        # Pan in place toward the walk's heading, each step at least PAN_STEP_DEGREES[0].
        turn = _wrap(heading - here.yaw)
        minimum, maximum = (math.radians(value) for value in PAN_STEP_DEGREES)
        if abs(turn) < minimum:  # glance aside and back
            aside = float(rng.uniform(minimum, maximum)) * (1.0 if rng.uniform() < 0.5 else -1.0)
            yaws = [here.yaw + aside, heading]
            if abs(_wrap(heading - yaws[0])) < minimum:
                yaws = [here.yaw + aside]
        else:
            steps = max(1, math.ceil(abs(turn) / maximum))
            yaws = [here.yaw + turn * (index + 1) / steps for index in range(steps)]
        for yaw in yaws:
            jitter = rng.normal(0.0, 0.02, size=2)
            xy = here.xy + jitter if clear_of_objects(scene, here.xy + jitter) else here.xy
            path.append(_Pose2D(xy, _wrap(yaw), here.pitch, here.height + float(rng.normal(0.0, 0.01))))
        if not positions:
            continue
        end_height = float(rng.uniform(low, high))
        pitch = math.radians(float(rng.uniform(-25, -10)))
        for index, xy in enumerate(positions):
            share = (index + 1) / len(positions)
            path.append(
                _Pose2D(
                    xy,
                    _wrap(heading + math.radians(float(rng.normal(0.0, 1.5)))),
                    pitch,
                    here.height + share * (end_height - here.height),
                )
            )
    return path[:count]


def _handheld_views(config: SampleWorldConfig, scene: Scene) -> list[View]:
    """The `"handheld"` camera path (see `SampleWorldConfig.camera_path`)."""
    rng = np.random.default_rng(np.random.SeedSequence([config.seed, scene.scene_index, 1]))
    low, high = config.camera_height_range
    views = []
    for frame, pose in enumerate(_handheld_path(config, scene, rng)):
        eye = np.array([pose.xy[0], pose.xy[1], float(np.clip(pose.height, low, high))])
        ahead = np.array(
            [
                math.cos(pose.yaw) * math.cos(pose.pitch),
                math.sin(pose.yaw) * math.cos(pose.pitch),
                math.sin(pose.pitch),
            ]
        )
        views.append(_view(config, frame, look_at(eye, eye + ahead)))
    return views
