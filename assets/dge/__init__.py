"""SpatialEvo's Deterministic Geometric Environment (DGE): exact spatial answers from RGB-D scans.

Pure functions carry the work: :mod:`~assets.dge.fusion` (RGB-D to a fused voxel cloud),
:mod:`~assets.dge.floor` (RANSAC floor, gravity frame), :mod:`~assets.dge.objects` (per-object
points, cleaning, boxes), :mod:`~assets.dge.room` (room size, floor area),
:mod:`~assets.dge.geometry` (a scan end to end, objects from a segmented mesh or instance masks),
:mod:`~assets.dge.visibility` (per-frame boxes, visibility, truncation, occlusion),
:mod:`~assets.dge.tasks` (a package: one registry entry per task type, 16 types with exact answers,
in one module per task family), :mod:`~assets.dge.single_image` (estimated depth for images without
scans) and :mod:`~assets.dge.plots` (top-down plots). :mod:`~assets.dge.assets` wraps them as Dagster
assets (group ``dge``, one partition per scan).

Each stage's knobs are written once, as a pydantic settings model beside the stage
(:class:`~assets.dge.geometry.SceneGeometrySettings`, :class:`~assets.dge.visibility.VisibilitySettings`,
:class:`~assets.dge.tasks.TaskSettings`, :class:`~assets.dge.single_image.SingleImageSettings`); each
asset's run configuration is a ``dg.Config`` that inherits its stage's settings, so the asset passes
its config straight to the pure functions. The models' fields are the run configuration (what a user
sets per data set); the method's constants (voxel sizes, RANSAC, outlier tests, margins) are ``ClassVar``
attributes of the same models, read the same way but not run configuration (``assets/dge/README.md``,
"Run configuration and constants").
"""
