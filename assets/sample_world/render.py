"""Ray casting of a scene with open3d (`open3d.t.geometry.RaycastingScene`, Embree).

One renderer per scene holds every triangle (room surfaces and object parts, one geometry per part).
Per view it casts:

- one ray per colour pixel (closest hit): shaded RGB, the instance mask (geometry id -> object id);
- one ray per depth pixel with the depth intrinsics: z-depth in metres;
- shadow rays from the colour hits towards the ceiling light;
- per object, rays at the object alone (a ray-casting scene of its own), only through the pixels
  inside its projected oriented box: the pixels it would cover if nothing hid it (its unoccluded
  pixel count; visibility = visible / unoccluded), and, on an image plane extended by one image
  width/height on each side sampled every `truncation_stride` pixels, how much of its silhouette
  falls outside the image (truncation).

Ray directions are `R @ K^-1 [u, v, 1]` with pixel centres at integer `(u, v)`, so the camera-z
component of every direction is 1 and the hit distance `t` equals the z-depth.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from assets.sample_world.scene import Scene, View

if TYPE_CHECKING:
    import open3d as o3d

# open3d is imported inside the functions that use it: importing it loads its dash/plotly UI (seconds).
logger = logging.getLogger(__name__)

NO_OBJECT = -1
"""Instance value of pixels that show no object (room surfaces)."""

SURFACE_OBJECT, SURFACE_FLOOR, SURFACE_WALL, SURFACE_CEILING = 0, 1, 2, 3
STRUCTURE_GRID = 0.5
"""Room surfaces are triangulated on a grid of this spacing (metres)."""

AMBIENT = 0.30
DIFFUSE = 0.55
HEADLIGHT = 0.20
FLOOR_TILE = 0.5
FLOOR_TILE_CONTRAST = 0.07
SHADOW_OFFSET = 2e-3


def _open3d_tensor(array: np.ndarray) -> o3d.core.Tensor:
    """``array`` copied into an open3d tensor of the same dtype on the CPU."""
    import open3d as o3d

    # open3d's stubs declare the constructor's dtype and device as required; at run time both are optional.
    return o3d.core.Tensor(array)  # type: ignore[call-overload]


@dataclass(frozen=True)
class MeshPiece:
    """One triangle mesh of the scene in world coordinates.

    Args:
        vertices (`np.ndarray`): float64 `(n, 3)`.
        triangles (`np.ndarray`): int64 `(m, 3)`.
        rgb (`tuple[float, float, float]`): albedo in 0..1.
        object_id (`int`): the object the piece belongs to, or -1 for room surfaces.
        surface (`int`): `SURFACE_OBJECT`, `SURFACE_FLOOR`, `SURFACE_WALL` or `SURFACE_CEILING`.
    """

    vertices: np.ndarray
    triangles: np.ndarray
    rgb: tuple[float, float, float]
    object_id: int
    surface: int


def grid_quad(
    origin: np.ndarray, axis_u: np.ndarray, axis_v: np.ndarray, spacing: float
) -> tuple[np.ndarray, np.ndarray]:
    """A planar rectangle `origin + a * axis_u + b * axis_v` (a, b in [0, 1]) as a triangle grid.

    Triangles wind counter-clockwise around `axis_u x axis_v`.

    >>> vertices, triangles = grid_quad(np.zeros(3), np.array([1.0, 0, 0]), np.array([0, 1.0, 0]), 0.5)
    >>> vertices.shape, triangles.shape
    ((9, 3), (8, 3))
    """
    steps_u = max(1, math.ceil(np.linalg.norm(axis_u) / spacing - 1e-9))
    steps_v = max(1, math.ceil(np.linalg.norm(axis_v) / spacing - 1e-9))
    a = np.linspace(0.0, 1.0, steps_u + 1)
    b = np.linspace(0.0, 1.0, steps_v + 1)
    grid_a, grid_b = np.meshgrid(a, b, indexing="ij")
    vertices = origin + grid_a.reshape(-1, 1) * axis_u + grid_b.reshape(-1, 1) * axis_v
    index = np.arange((steps_u + 1) * (steps_v + 1)).reshape(steps_u + 1, steps_v + 1)
    corner = index[:-1, :-1].ravel()
    right = index[1:, :-1].ravel()
    up = index[:-1, 1:].ravel()
    diagonal = index[1:, 1:].ravel()
    triangles = np.concatenate([np.stack([corner, right, diagonal], 1), np.stack([corner, diagonal, up], 1)])
    return vertices, triangles.astype(np.int64)


def scene_pieces(scene: Scene) -> list[MeshPiece]:
    """Every triangle mesh of the scene: floor, four walls, ceiling, then each object's parts.

    Room surfaces face into the room.

    >>> from assets.sample_world.config import SampleWorldConfig
    >>> from assets.sample_world.scene import sample_scene
    >>> pieces = scene_pieces(sample_scene(SampleWorldConfig(num_scenes=1), 0))
    >>> [piece.surface for piece in pieces[:6]]
    [1, 2, 2, 2, 2, 3]
    """
    room = scene.room
    width, depth, height = room.width, room.depth, room.height
    x_axis = np.array([width, 0.0, 0.0])
    y_axis = np.array([0.0, depth, 0.0])
    z_axis = np.array([0.0, 0.0, height])
    surfaces = [
        (np.zeros(3), x_axis, y_axis, room.floor_rgb, SURFACE_FLOOR),
        (np.zeros(3), z_axis, x_axis, room.wall_rgb, SURFACE_WALL),
        (np.array([width, 0.0, 0.0]), z_axis, y_axis, room.wall_rgb, SURFACE_WALL),
        (np.array([width, depth, 0.0]), z_axis, -x_axis, room.wall_rgb, SURFACE_WALL),
        (np.array([0.0, depth, 0.0]), z_axis, -y_axis, room.wall_rgb, SURFACE_WALL),
        (np.array([0.0, 0.0, height]), y_axis, x_axis, room.ceiling_rgb, SURFACE_CEILING),
    ]
    pieces = []
    for origin, axis_u, axis_v, rgb, surface in surfaces:
        vertices, triangles = grid_quad(origin, axis_u, axis_v, STRUCTURE_GRID)
        pieces.append(MeshPiece(vertices, triangles, rgb, NO_OBJECT, surface))
    for scene_object in scene.objects:
        for part in scene_object.parts:
            pieces.append(
                MeshPiece(
                    scene_object.to_world(part.vertices),
                    part.triangles,
                    part.rgb,
                    scene_object.object_id,
                    SURFACE_OBJECT,
                )
            )
    return pieces


@dataclass(frozen=True)
class ObjectVisibility:
    """What one view shows of one object.

    Args:
        object_id (`int`): the object.
        visible_pixels (`int`): pixels of the instance mask.
        unoccluded_pixels (`int`): in-image pixels whose ray meets the object at all (what the mask
            would be if nothing hid it).
        bbox_px (`tuple[int, int, int, int] | None`): `(x1, y1, x2, y2)` pixel-edge box of the mask:
            columns `x1 .. x2 - 1` and rows `y1 .. y2 - 1`; None when not visible.
        mask_centroid (`tuple[float, float] | None`): mean `(u, v)` of the mask pixels.
        truncation (`float`): fraction of the object's unoccluded silhouette on the extended image
            plane that lies outside the image (0 = fully inside, 1 = fully outside).
        truncated (`bool`): the unoccluded silhouette touches the image border.
    """

    object_id: int
    visible_pixels: int
    unoccluded_pixels: int
    bbox_px: tuple[int, int, int, int] | None
    mask_centroid: tuple[float, float] | None
    truncation: float
    truncated: bool

    @property
    def visibility(self) -> float:
        """Visible over unoccluded pixels (0 when the object is not in the image)."""
        return self.visible_pixels / self.unoccluded_pixels if self.unoccluded_pixels else 0.0


@dataclass(frozen=True, eq=False)
class ViewRender:
    """The images of one view.

    Args:
        rgb (`np.ndarray`): uint8 `(height, width, 3)`.
        instance (`np.ndarray`): int32 `(height, width)`, object id or -1.
        surface (`np.ndarray`): uint8 `(height, width)`, the `SURFACE_*` kind of each pixel's hit.
        depth (`np.ndarray`): float32 `(depth_height, depth_width)` z-depth in metres (0 = no hit).
        objects (`dict[int, ObjectVisibility]`): per object of the scene.
    """

    rgb: np.ndarray
    instance: np.ndarray
    surface: np.ndarray
    depth: np.ndarray
    objects: dict[int, ObjectVisibility]


def _rays_from_camera_directions(camera_directions: np.ndarray, pose: np.ndarray) -> np.ndarray:
    """World rays for camera-frame directions `(n, 3)` (elementwise: no BLAS threads)."""
    rotation = pose[:3, :3].astype(np.float32)
    rays = np.empty((len(camera_directions), 6), dtype=np.float32)
    rays[:, :3] = pose[:3, 3]
    rays[:, 3:] = (
        camera_directions[:, 0:1] * rotation[:, 0]
        + camera_directions[:, 1:2] * rotation[:, 1]
        + camera_directions[:, 2:3] * rotation[:, 2]
    )
    return rays


@dataclass(frozen=True, eq=False)
class PixelGrid:
    """A regular grid of pixel centres and their camera-frame ray directions (camera z = 1).

    Args:
        start_u, start_v (`int`): the first pixel centre.
        stride (`int`): spacing of the grid in pixels.
        camera_directions (`np.ndarray`): float32 `(rows, columns, 3)`.
    """

    start_u: int
    start_v: int
    stride: int
    camera_directions: np.ndarray

    @classmethod
    def build(
        cls,
        intrinsics: np.ndarray,
        width: int,
        height: int,
        start_u: int = 0,
        start_v: int = 0,
        stride: int = 1,
    ) -> PixelGrid:
        """The grid `u = start_u, start_u + stride, ... < start_u + width` (same for v)."""
        us = np.arange(start_u, start_u + width, stride, dtype=np.float64)
        vs = np.arange(start_v, start_v + height, stride, dtype=np.float64)
        grid_u, grid_v = np.meshgrid(us, vs)
        directions = np.stack(
            [
                (grid_u - intrinsics[0, 2]) / intrinsics[0, 0],
                (grid_v - intrinsics[1, 2]) / intrinsics[1, 1],
                np.ones_like(grid_u),
            ],
            axis=-1,
        ).astype(np.float32)
        return cls(start_u, start_v, stride, directions)

    @property
    def shape(self) -> tuple[int, int]:
        """`(rows, columns)`."""
        return self.camera_directions.shape[:2]

    def us(self, first: int = 0, last: int | None = None) -> np.ndarray:
        """Pixel u of columns `first .. last - 1`."""
        last = self.shape[1] if last is None else last
        return self.start_u + self.stride * np.arange(first, last)

    def vs(self, first: int = 0, last: int | None = None) -> np.ndarray:
        """Pixel v of rows `first .. last - 1`."""
        last = self.shape[0] if last is None else last
        return self.start_v + self.stride * np.arange(first, last)

    def index_range(self, low: float, high: float, axis: int) -> tuple[int, int]:
        """Rows (axis 0) or columns (axis 1) whose pixel centres lie within `[low, high]`."""
        start = self.start_v if axis == 0 else self.start_u
        first = max(0, math.ceil((low - start) / self.stride))
        last = min(self.shape[axis], math.floor((high - start) / self.stride) + 1)
        return first, max(first, last)

    def rays(self, pose: np.ndarray) -> np.ndarray:
        """Rays `(rows * columns, 6)` float32 for a camera pose, row-major."""
        return _rays_from_camera_directions(self.camera_directions.reshape(-1, 3), pose)

    def window_rays(self, pose: np.ndarray, rows: tuple[int, int], columns: tuple[int, int]) -> np.ndarray:
        """Rays of a window of the grid, row-major."""
        window = self.camera_directions[rows[0] : rows[1], columns[0] : columns[1]].reshape(-1, 3)
        return _rays_from_camera_directions(window, pose)


class SceneRenderer:
    """Renders views of one scene (the ray-casting scene is built once).

    >>> from assets.sample_world.config import SampleWorldConfig
    >>> from assets.sample_world.scene import sample_scene, sample_views
    >>> config = SampleWorldConfig(num_scenes=1, views_per_scene=1, width=64, height=48)
    >>> scene = sample_scene(config, 0)
    >>> render = SceneRenderer(scene).render(sample_views(config, scene)[0], truncation_stride=4)
    >>> render.rgb.shape, render.depth.shape
    ((48, 64, 3), (24, 32))
    """

    def __init__(self, scene: Scene) -> None:
        import open3d as o3d

        self.scene = scene
        self.pieces = scene_pieces(scene)
        self._raycasting = o3d.t.geometry.RaycastingScene()
        geometry_ids = []
        for piece in self.pieces:
            geometry_ids.append(
                self._raycasting.add_triangles(
                    _open3d_tensor(piece.vertices.astype(np.float32)),
                    _open3d_tensor(piece.triangles.astype(np.uint32)),
                )
            )
        if geometry_ids != list(range(len(self.pieces))):
            raise RuntimeError(f"Unexpected open3d geometry ids {geometry_ids[:5]}...")
        self._invalid_id = o3d.t.geometry.RaycastingScene.INVALID_ID
        self._object_of = np.array([piece.object_id for piece in self.pieces] + [NO_OBJECT], dtype=np.int32)
        self._surface_of = np.array(
            [piece.surface for piece in self.pieces] + [SURFACE_OBJECT], dtype=np.uint8
        )
        self._albedo_of = np.array([piece.rgb for piece in self.pieces] + [(0.0, 0.0, 0.0)], dtype=np.float32)
        room = scene.room
        self.light_position = np.array([room.width / 2.0, room.depth / 2.0, room.height - 0.05])
        self._grids: dict[tuple, PixelGrid] = {}
        self._object_scenes = []
        for scene_object in scene.objects:
            alone = o3d.t.geometry.RaycastingScene()
            for piece in self.pieces:
                if piece.object_id == scene_object.object_id:
                    alone.add_triangles(
                        _open3d_tensor(piece.vertices.astype(np.float32)),
                        _open3d_tensor(piece.triangles.astype(np.uint32)),
                    )
            self._object_scenes.append(alone)

    def _pixel_grid(
        self,
        intrinsics: np.ndarray,
        width: int,
        height: int,
        start_u: int = 0,
        start_v: int = 0,
        stride: int = 1,
    ) -> PixelGrid:
        key = (tuple(np.asarray(intrinsics).ravel().tolist()), width, height, start_u, start_v, stride)
        if key not in self._grids:
            self._grids[key] = PixelGrid.build(intrinsics, width, height, start_u, start_v, stride)
        return self._grids[key]

    def _geometry_index(self, geometry_ids: np.ndarray) -> np.ndarray:
        index = geometry_ids.astype(np.int64)
        index[geometry_ids == self._invalid_id] = len(self.pieces)
        return index

    def render(self, view: View, truncation_stride: int = 4) -> ViewRender:
        """Render one view (colour, instance mask, depth, per-object visibility)."""
        width, height = view.width, view.height
        rays = self._pixel_grid(view.color_intrinsics, width, height).rays(view.pose)
        hits = self._raycasting.cast_rays(_open3d_tensor(rays))
        geometry = self._geometry_index(hits["geometry_ids"].numpy())
        distance = hits["t_hit"].numpy()
        hit_mask = geometry < len(self.pieces)
        instance = self._object_of[geometry]
        surface = self._surface_of[geometry]
        rgb = self._shade(rays, distance, hits["primitive_normals"].numpy(), geometry, hit_mask)

        depth_rays = self._pixel_grid(view.depth_intrinsics, view.depth_width, view.depth_height).rays(
            view.pose
        )
        depth_hits = self._raycasting.cast_rays(_open3d_tensor(depth_rays))
        depth = depth_hits["t_hit"].numpy().astype(np.float32)
        depth[~np.isfinite(depth)] = 0.0

        objects = self._visibility(view, instance, truncation_stride)
        return ViewRender(
            rgb=rgb.reshape(height, width, 3),
            instance=instance.reshape(height, width),
            surface=surface.reshape(height, width),
            depth=depth.reshape(view.depth_height, view.depth_width),
            objects=objects,
        )

    def _shade(
        self,
        rays: np.ndarray,
        distance: np.ndarray,
        normals: np.ndarray,
        geometry: np.ndarray,
        hit_mask: np.ndarray,
    ) -> np.ndarray:
        origins = rays[:, :3]
        directions = rays[:, 3:]
        safe_distance = np.where(hit_mask, distance, 0.0).astype(np.float32)
        points = origins + directions * safe_distance[:, None]
        cosine = np.einsum("ij,ij->i", normals, directions)
        normals = np.where((cosine > 0.0)[:, None], -normals, normals)
        light = self.light_position.astype(np.float32)
        to_light = light - points
        light_distance = np.sqrt(np.einsum("ij,ij->i", to_light, to_light))
        lambert = np.clip(
            np.einsum("ij,ij->i", normals, to_light) / np.maximum(light_distance, 1e-6), 0.0, 1.0
        )
        shadow_origins = points + normals * np.float32(SHADOW_OFFSET)
        shadow_rays = np.concatenate([shadow_origins, light - shadow_origins], axis=1)
        shadowed = self._raycasting.test_occlusions(_open3d_tensor(shadow_rays), tnear=0.0, tfar=1.0).numpy()
        view_cosine = np.abs(cosine) / np.sqrt(np.einsum("ij,ij->i", directions, directions))
        albedo = self._albedo_of[geometry]
        floor = self._surface_of[geometry] == SURFACE_FLOOR
        tiles = (np.floor(points[floor, 0] / FLOOR_TILE) + np.floor(points[floor, 1] / FLOOR_TILE)) % 2
        albedo[floor] *= (1.0 - FLOOR_TILE_CONTRAST * tiles)[:, None]
        shading = AMBIENT + DIFFUSE * lambert * (~shadowed) + HEADLIGHT * view_cosine
        colour = np.clip(albedo * shading[:, None], 0.0, 1.0)
        colour[~hit_mask] = 0.0
        return np.round(colour * 255.0).astype(np.uint8)

    def _projected_range(self, view: View, object_id: int) -> tuple[float, float, float, float]:
        """`(u_min, u_max, v_min, v_max)` of the object's oriented box projected into the view
        (the whole extended plane when a corner is at or behind the camera plane)."""
        width, height = view.width, view.height
        corners = view.world_to_camera(self.scene.objects[object_id].obb_corners)
        if (corners[:, 2] < 1e-3).any():
            return -width, 2.0 * width, -height, 2.0 * height
        intrinsics = view.color_intrinsics
        us = intrinsics[0, 0] * corners[:, 0] / corners[:, 2] + intrinsics[0, 2]
        vs = intrinsics[1, 1] * corners[:, 1] / corners[:, 2] + intrinsics[1, 2]
        return float(us.min()) - 1.0, float(us.max()) + 1.0, float(vs.min()) - 1.0, float(vs.max()) + 1.0

    def _hits_alone(self, object_id: int, rays: np.ndarray) -> np.ndarray:
        if len(rays) == 0:
            return np.zeros(0, dtype=bool)
        hits = self._object_scenes[object_id].cast_rays(_open3d_tensor(rays))
        return np.isfinite(hits["t_hit"].numpy())

    def _visibility(self, view: View, instance: np.ndarray, stride: int) -> dict[int, ObjectVisibility]:
        """Per object: the mask's box and size, and (casting at the object alone, only over its
        projected box) the unoccluded silhouette in the image and on the extended plane."""
        width, height = view.width, view.height
        mask = instance.reshape(height, width)
        count = len(self.scene.objects)
        visible = np.bincount(instance[instance >= 0], minlength=count)
        full = self._pixel_grid(view.color_intrinsics, width, height)
        wide = self._pixel_grid(view.color_intrinsics, 3 * width, 3 * height, -width, -height, stride)
        results = {}
        for object_id in range(count):
            u_min, u_max, v_min, v_max = self._projected_range(view, object_id)
            rows = full.index_range(v_min, v_max, 0)
            columns = full.index_range(u_min, u_max, 1)
            unoccluded = 0
            touches_border = False
            if rows[0] < rows[1] and columns[0] < columns[1]:
                alone = self._hits_alone(object_id, full.window_rays(view.pose, rows, columns))
                alone = alone.reshape(rows[1] - rows[0], columns[1] - columns[0])
                alone |= mask[rows[0] : rows[1], columns[0] : columns[1]] == object_id
                unoccluded = int(alone.sum())
                touches_border = bool(
                    (rows[0] == 0 and alone[0].any())
                    or (rows[1] == height and alone[-1].any())
                    or (columns[0] == 0 and alone[:, 0].any())
                    or (columns[1] == width and alone[:, -1].any())
                )
            wide_rows = wide.index_range(v_min, v_max, 0)
            wide_columns = wide.index_range(u_min, u_max, 1)
            outside_samples = 0
            if wide_rows[0] < wide_rows[1] and wide_columns[0] < wide_columns[1]:
                grid_v, grid_u = np.meshgrid(wide.vs(*wide_rows), wide.us(*wide_columns), indexing="ij")
                outside = ((grid_u < 0) | (grid_u >= width) | (grid_v < 0) | (grid_v >= height)).ravel()
                rays = wide.window_rays(view.pose, wide_rows, wide_columns)[outside]
                outside_samples = int(self._hits_alone(object_id, rays).sum())
            total = unoccluded / float(stride * stride) + outside_samples
            truncation = float(outside_samples / total) if total > 0 else 0.0
            bbox = None
            centroid = None
            if visible[object_id] > 0:
                object_rows, object_columns = np.nonzero(mask == object_id)
                bbox = (
                    int(object_columns.min()),
                    int(object_rows.min()),
                    int(object_columns.max()) + 1,
                    int(object_rows.max()) + 1,
                )
                centroid = (float(object_columns.mean()), float(object_rows.mean()))
            results[object_id] = ObjectVisibility(
                object_id=object_id,
                visible_pixels=int(visible[object_id]),
                unoccluded_pixels=unoccluded,
                bbox_px=bbox,
                mask_centroid=centroid,
                truncation=truncation,
                truncated=touches_border,
            )
        return results
