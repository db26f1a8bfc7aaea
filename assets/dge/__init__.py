"""SpatialEvo's Deterministic Geometric Environment (DGE): exact spatial answers from RGB-D scans.

Pure functions carry the work: :mod:`~assets.dge.fusion` (RGB-D to a fused voxel cloud),
:mod:`~assets.dge.floor` (RANSAC floor, gravity frame), :mod:`~assets.dge.objects` (per-object
points, cleaning, boxes), :mod:`~assets.dge.room` (room size, floor area),
:mod:`~assets.dge.geometry` (a scan end to end), :mod:`~assets.dge.visibility` (per-frame boxes,
visibility, truncation, occlusion), :mod:`~assets.dge.tasks` (16 task types with exact answers),
:mod:`~assets.dge.single_image` (estimated depth for images without scans) and
:mod:`~assets.dge.plots` (top-down plots). :mod:`~assets.dge.assets` wraps them as Dagster assets
(group ``dge``, one partition per scan).
"""
