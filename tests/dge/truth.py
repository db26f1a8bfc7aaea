"""The sample world's exact truth as :class:`~assets.dge.tasks.SceneFacts`, to audit DGE answers."""

import numpy as np

from assets.dge.tasks import CameraFact, ObjectFact, SceneFacts, SeenFact
from data_contracts.boxes import pixels_to_grid


def truth_scene_facts(scene_truth: dict) -> SceneFacts:
    """Facts computed only from the generator's object list, cameras and rendered masks.

    The sample world's frame has z up and the floor at z = 0, so it is its own gravity-aligned
    frame. Extents become ``(length, width, height)`` with length the longer horizontal side.
    """
    objects = {}
    for item in scene_truth["objects"]:
        extents = np.asarray(item["extents"], dtype=np.float64)
        horizontal = sorted(extents[:2], reverse=True)
        objects[item["object_id"]] = ObjectFact(
            object_id=item["object_id"],
            label=item["category"],
            centroid=np.asarray(item["centroid"], dtype=np.float64),
            extents=np.array([horizontal[0], horizontal[1], extents[2]]),
        )
    cameras, seen = {}, {}
    for view in scene_truth["views"]:
        frame = view["frame_index"]
        cameras[frame] = CameraFact(
            frame_index=frame,
            pose=np.asarray(view["pose"], dtype=np.float64),
            intrinsics=np.asarray(view["color_intrinsics"], dtype=np.float64),
            width=view["width"],
            height=view["height"],
        )
        for item in view["objects"]:
            if item["unoccluded_pixels"] == 0:
                continue
            box = item["bbox_px"]
            seen[(frame, item["object_id"])] = SeenFact(
                visibility=item["visibility"],
                in_frame=1.0 - item["truncation"],
                bbox=None if box is None else tuple(pixels_to_grid(box, view["width"], view["height"])),
            )
    room = scene_truth["room"]
    return SceneFacts(
        scene_id=scene_truth["scene_id"],
        objects=objects,
        cameras=cameras,
        seen=seen,
        room_area_m2=room["width"] * room["depth"],
    )
