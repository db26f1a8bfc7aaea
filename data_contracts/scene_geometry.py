"""Contract for ``scene_geometry``: one row per scanned scene, the DGE's cached 3D geometry.

Everything is in the scene's gravity-aligned frame (metres, ``z`` up along the floor normal, the
floor at ``z = 0``); ``world_to_gravity`` maps the scan's world frame into it. The row holds the
floor plane, the room's size, a downsampled copy of the fused cloud, and per object its cleaned
points (flattened ``x, y, z`` triples with normals and the surface area each point stands for),
axis-aligned and yaw-oriented boxes, centroid (the oriented box's centre), size (its largest
extent) and point count. Objects that could not be measured are listed with the reason.
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

CONTRACT_VERSION = "1.4.0"  # 1.4: floor sources world_up, axis_alignment, camera_poses; 1.3: annotated_boxes

GEOMETRY_SOURCES = ["scanned", "estimated"]
OBJECT_POINT_SOURCES = ["mesh", "instance_masks", "annotated_boxes", "none"]
FLOOR_SOURCES = ["ransac", "world_up", "axis_alignment", "camera_poses", "fallback"]


def _vector(size: int, description: str | None = None) -> dy.List:
    return dy.List(
        dy.Float64(nullable=False),
        nullable=False,
        min_length=size,
        max_length=size,
        description=description,
    )


def _flat_floats(description: str | None = None) -> dy.List:
    return dy.List(dy.Float32(nullable=False), nullable=False, description=description)


OBJECT_FIELDS = {
    "object_id": dy.Int64(nullable=False, min=0),
    "label": dy.String(nullable=False),
    "point_count": dy.Int64(nullable=False, min=1),
    "centroid": _vector(3),
    "aabb_min": _vector(3),
    "aabb_max": _vector(3),
    "obb_center": _vector(3),
    "obb_extents": _vector(3),
    "obb_yaw": dy.Float64(nullable=False),
    "size_m": dy.Float64(nullable=False, min=0.0),
    "points": _flat_floats(),
    "normals": _flat_floats(),
    "point_areas": _flat_floats(),
    "observed_views": dy.Int64(
        nullable=False,
        min=0,
        description="Frames in which the object contributed valid depth points: at least 5 (and 3%) of its "
        "tested points project into the frame unoccluded by the scene cloud.",
    ),
    "extent_coverage": dy.Float64(
        nullable=False,
        min=0.0,
        max=1.0,
        description="Share of the oriented box's five exposed sides (four vertical sides and the top) that some "
        "frame saw (facing the camera, most of a 3 x 3 grid on the side unoccluded): 1 for an object seen "
        "from all around, at most 0.6 for one seen in a single frame, 0 when never seen; 1 for points sampled on "
        "the segmented mesh (the mesh holds every side of the object).",
    ),
    "depth_noise_m": dy.Float64(
        nullable=False,
        min=0.0,
        description="Depth noise at the object's distance, metres: the larger of the Kinect-style model "
        "sigma(z) = 0.0012 + 0.0019 (z - 0.4)^2 at its median depth in the frames that saw it and the spread "
        "of its points about their local planes (0 for mesh samples).",
    ),
    "position_uncertainty_m": dy.Float64(
        nullable=False,
        min=0.0,
        description="1-sigma-like uncertainty of the centroid, metres: depth_noise_m / sqrt(max(observed_views, "
        "1)) + (1 - extent_coverage) * size_m / 4 + blur / 2 + unseen / 2, where blur (points fused from depth "
        "frames only, else 0) is, on the box axis where it is larger, the summed distance from each end without a "
        "detected face to the 5% quantile of the points along the axis, and unseen is max(size_m, 0.5) for an "
        "object cut off by every frame that observed it (cut_off_views = observed_views > 0), else 0.",
    ),
    "size_uncertainty_m": dy.Float64(
        nullable=False,
        min=0.0,
        description="1-sigma-like uncertainty of each box extent and of size_m, metres: 2 * depth_noise_m / "
        "sqrt(max(observed_views, 1)) + (1 - extent_coverage) * size_m / 2 + blur + unseen (see "
        "position_uncertainty_m).",
    ),
    "cut_off_views": dy.Int64(
        nullable=False,
        min=0,
        description="Observing frames (of observed_views) whose image border cuts the object off: some of its "
        "points project outside the image or within 1.5% of its width from the border. Equal to observed_views: "
        "every frame saw a cut-off part, so the box is a lower bound (instance-mask points; always 0 for the "
        "mesh, whose objects are whole).",
    ),
}

DROPPED_OBJECT_FIELDS = {
    "object_id": dy.Int64(nullable=False, min=0),
    "label": dy.String(nullable=False),
    "reason": dy.String(nullable=False, min_length=1),
}


class SceneGeometry(dy.Schema):
    """A scanned scene's fused geometry, floor, room and measured objects."""

    scene_id = dy.String(
        primary_key=True,
        min_length=1,
        description="Scan id (rgbd_scenes.scene_id), also the asset's partition key.",
    )
    geometry_source = dy.String(
        nullable=False,
        description="Where the geometry comes from: always 'scanned' here (fused RGB-D frames); 'estimated' "
        "(one image's depth) exists only in dge_tasks.",
    )
    object_points_source = dy.String(
        nullable=False,
        description="Where the objects' points come from: 'mesh' (sampled on the segmented mesh, every "
        "surface: ScanNet, ScanNet++), 'instance_masks' (fused frame points labelled by the instance images, only "
        "what the cameras saw), 'annotated_boxes' (the points of the mesh, or of the fused cloud, inside each "
        "annotated oriented box: ARKitScenes) or 'none' (none is available: no objects).",
    )
    world_to_gravity = _vector(
        16,
        "4x4 row-major rigid transform from the scan's world frame (rgbd_frames.pose) to the gravity-aligned "
        "frame: z along the floor normal, floor at z = 0, x the world x axis projected onto the floor. Close to "
        "the identity for ScanNet and the sample world.",
    )
    floor_source = dy.String(
        nullable=False,
        description="How the floor (and 'up') was found: 'ransac' (lowest well-supported upward plane, refined by "
        "least squares; levelled on rgbd_scenes.world_up where the data set gives one); when no plane qualified, the "
        "1st percentile of heights along the scan's gravity, 'world_up' (rgbd_scenes.world_up), 'axis_alignment' "
        "(rgbd_scenes.axis_alignment) or 'camera_poses' (the cameras' common up axis); else "
        "'fallback' (along the cameras' mean up direction, a guess: questions that depend on 'up' are withheld).",
    )
    floor_normal = _vector(
        3,
        "Unit normal of the floor plane in the scan's world frame, pointing up (the plane is normal . x + "
        "floor_offset = 0).",
    )
    floor_offset = dy.Float64(
        nullable=False,
        description="Offset of the floor plane normal . x + offset = 0 in the world frame, metres: minus the "
        "floor's height along floor_normal.",
    )
    floor_tilt_deg = dy.Float64(
        nullable=False,
        min=0.0,
        max=180.0,
        description="Angle in degrees between floor_normal and the world frame's +z axis (0 when the scan is "
        "already z-up).",
    )
    floor_inliers = dy.Int64(
        nullable=False,
        min=0,
        description="Points supporting the floor plane (within the RANSAC distance after refinement); 0 for the "
        "fallback floor.",
    )
    floor_rmse_m = dy.Float64(
        nullable=False,
        min=0.0,
        description="Root-mean-square distance of the floor inliers to the plane, metres; 0 for the fallback "
        "floor.",
    )
    room_length_m = dy.Float64(
        nullable=False,
        min=0.0,
        description="Longer side of the room, metres (gravity frame, horizontal): the distance between the two "
        "opposite walls (vertical planes found in the cloud along the sides of the footprint's minimum-area "
        "rectangle, each at the median of its points) or, where no wall was found, the footprint's extreme "
        "(see room_walled_sides).",
    )
    room_width_m = dy.Float64(
        nullable=False,
        min=0.0,
        description="Shorter side of the room between its walls, metres, measured like room_length_m "
        "(room_width_m <= room_length_m).",
    )
    room_height_m = dy.Float64(
        nullable=False,
        min=0.0,
        description="Height of the highest point of the cleaned cloud above the floor (z), metres: the ceiling "
        "where the cameras saw it.",
    )
    room_area_m2 = dy.Float64(
        nullable=False,
        min=0.0,
        description="Area of the room's footprint (convex hull of every cloud point's x, y, clipped to the walls), "
        "square metres.",
    )
    floor_area_m2 = dy.Float64(
        nullable=False,
        min=0.0,
        description="Area of the convex hull of the floor points (|z| <= 0.03 m by default), square metres: "
        "the floor that was seen.",
    )
    room_footprint = _flat_floats(
        "The footprint's convex hull (clipped to the walls) as flattened (x, y) pairs, counter-clockwise, gravity "
        "frame, metres."
    )
    room_walled_sides = dy.Int64(
        nullable=False,
        min=0,
        max=4,
        description="Sides of the room's rectangle bounded by a wall found in the cloud (a dense vertical slab "
        "near the side whose points cover at least a quarter of it): 4 when the frames saw every wall; a capture "
        "of part of the room leaves the sides it never saw at the footprint's extreme, so room_length_m, "
        "room_width_m and room_area_m2 are then the seen part's, not the room's (room-size questions need 4).",
    )
    cloud_voxel_size_m = dy.Float64(
        nullable=False,
        min_exclusive=0.0,
        description="Voxel edge of the stored cloud copy, metres (default 0.05).",
    )
    num_cloud_points = dy.Int64(nullable=False, min=0, description="Points in cloud_points (triples).")
    cloud_points = _flat_floats(
        "The fused scene cloud, outliers removed and voxel-downsampled to cloud_voxel_size_m, as flattened x, "
        "y, z triples in the gravity frame, metres (float32)."
    )
    cloud_colors = dy.List(
        dy.UInt8(nullable=False),
        nullable=True,
        description="RGB colour 0-255 of each cloud point, flattened triples aligned with cloud_points; null "
        "unless the build stored colours (store_cloud_colors, off by default).",
    )
    used_frames = dy.List(
        dy.Int64(nullable=False),
        nullable=False,
        min_length=1,
        description="rgbd_frames.frame_index of the frames fused into the cloud, ascending.",
    )
    num_quarantined_frames = dy.Int64(
        nullable=False,
        min=0,
        description="Frames of the scan rejected during fusion (unreadable or empty depth, bad files), listed "
        "in the quarantine.",
    )
    num_objects = dy.Int64(nullable=False, min=0, description="Measured objects: the length of objects.")
    objects = dy.List(
        dy.Struct(OBJECT_FIELDS, nullable=False),
        nullable=False,
        description="Measured objects, gravity frame, metres, by object id: object_id (rgbd_scenes objectId, "
        "0-based), label, point_count (points after cleaning: outlier removal, largest DBSCAN cluster), "
        "aabb_min / aabb_max (axis-aligned box corners), obb_center / obb_extents / obb_yaw (yaw-only oriented "
        "box: extents are length along the yaw axis, width across it, full height; yaw in radians in [0, pi) "
        "from +x to the length axis), centroid (the oriented box's centre), size_m (its largest extent), and "
        "the stored points (at most 6000 by default, seeded subsample) as flattened x, y, z triples with "
        "normals (0, 0, 0 where unknown) and point_areas (the surface area in square metres each point stands "
        "for); measurement confidence: observed_views, extent_coverage, depth_noise_m, position_uncertainty_m "
        "and size_uncertainty_m (see their field descriptions).",
    )
    dropped_objects = dy.List(
        dy.Struct(DROPPED_OBJECT_FIELDS, nullable=False),
        nullable=False,
        description="Objects of the scan that could not be measured, each {object_id, label, reason} (e.g. "
        "'no points: never seen in a usable frame', 'too few points after cleaning ...'); an instance id missing "
        "from the object list is labelled 'object_<id>'.",
    )

    @dy.rule()
    def known_sources(cls) -> pl.Expr:
        """Geometry, object-point and floor sources take their documented values."""
        return (
            cls.geometry_source.col.is_in(GEOMETRY_SOURCES)
            & cls.object_points_source.col.is_in(OBJECT_POINT_SOURCES)
            & cls.floor_source.col.is_in(FLOOR_SOURCES)
        )

    @dy.rule()
    def cloud_is_triples(cls) -> pl.Expr:
        """The flattened cloud holds ``num_cloud_points`` xyz triples (and colours, when present, as many)."""
        points_ok = cls.cloud_points.col.list.len() == 3 * cls.num_cloud_points.col
        colors_ok = cls.cloud_colors.col.is_null() | (
            cls.cloud_colors.col.list.len() == cls.cloud_points.col.list.len()
        )
        return points_ok & colors_ok

    @dy.rule()
    def object_count_matches(cls) -> pl.Expr:
        """``num_objects`` is the length of ``objects``."""
        return cls.objects.col.list.len() == cls.num_objects.col

    @dy.rule()
    def object_points_are_triples(cls) -> pl.Expr:
        """Every object's points and normals are xyz triples, with one area per point."""
        points = cls.objects.col.list.eval(pl.element().struct.field("points").list.len())
        normals = cls.objects.col.list.eval(pl.element().struct.field("normals").list.len())
        areas = cls.objects.col.list.eval(pl.element().struct.field("point_areas").list.len())
        return (
            ((points - normals).list.eval(pl.element().abs()).list.sum() == 0)
            & ((points - 3 * areas).list.eval(pl.element().abs()).list.sum() == 0)
            & (points.list.eval(pl.element() % 3).list.sum() == 0)
        )

    @dy.rule()
    def boxes_are_ordered(cls) -> pl.Expr:
        """Every object's axis-aligned box has ``aabb_min <= aabb_max`` on every axis."""
        low = pl.element().struct.field("aabb_min")
        high = pl.element().struct.field("aabb_max")
        gaps = cls.objects.col.list.eval(
            pl.min_horizontal(*(high.list.get(axis) - low.list.get(axis) for axis in range(3)))
        )
        return gaps.list.min().fill_null(0.0) >= 0.0

    @dy.rule()
    def object_ids_unique(cls) -> pl.Expr:
        """Object ids are unique within the scene, and a dropped object is not also measured."""
        measured = cls.objects.col.list.eval(pl.element().struct.field("object_id"))
        dropped = cls.dropped_objects.col.list.eval(pl.element().struct.field("object_id"))
        return (measured.list.n_unique() == measured.list.len()) & (
            measured.list.set_intersection(dropped).list.len() == 0
        )
