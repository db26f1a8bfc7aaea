"""The RGB-D scan data sets the sources read, and the column that says which one a row came from.

``rgbd_frames.source``, ``rgbd_scenes.source`` and ``dge_tasks.dataset`` hold one of these names (a
``dge_tasks`` row from one image's estimated depth holds ``visual_genome``, the data set of its image).

>>> SCAN_DATASETS
('scannet', 'arkitscenes', 'scannetpp')
"""

from __future__ import annotations

import dataframely as dy

SCANNET = "scannet"
"""ScanNet v2, the SensReader export (``scans/<scene>/color, depth, pose, intrinsic``)."""
ARKITSCENES = "arkitscenes"
"""ARKitScenes 3dod (``3dod/<Training|Validation>/<video_id>/``)."""
SCANNETPP = "scannetpp"
"""ScanNet++ v2, the iPhone stream as the official toolkit extracts it (``data/<scene_id>/iphone``)."""
SCAN_DATASETS = (SCANNET, ARKITSCENES, SCANNETPP)
DATASET_NAMES = {SCANNET: "ScanNet", ARKITSCENES: "ARKitScenes", SCANNETPP: "ScanNet++"}
"""How each data set is named in messages."""
IMAGE_DATASET = "visual_genome"
"""The data set of single images (``dge_tasks`` rows from estimated depth)."""


def dataset_column(what: str, extra: tuple[str, ...] = ()) -> dy.String:
    """A column holding the data set ``what`` came from: one of :data:`SCAN_DATASETS` (or ``extra``)."""
    names = (*SCAN_DATASETS, *extra)
    return dy.String(
        nullable=False,
        regex="^(?:" + "|".join(names) + ")$",
        description=f"The data set {what} came from: 'scannet' (ScanNet SensReader export), 'arkitscenes' "
        "(ARKitScenes 3dod) or 'scannetpp' (ScanNet++ iPhone stream)"
        + (f", or {', '.join(repr(name) for name in extra)}" if extra else "")
        + "; the sample world writes scans in all three layouts.",
    )
