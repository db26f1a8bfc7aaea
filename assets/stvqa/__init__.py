"""STVQA: SpatialThinker's spatial VQA generated from scene graphs, filtered by pass@2, balanced and split.

Modules: :mod:`~assets.stvqa.scene` (checked, filtered scene graphs), :mod:`~assets.stvqa.facts` and
:mod:`~assets.stvqa.templates` (offline questions and the scene-graph solver), :mod:`~assets.stvqa.prompts`
(versioned model prompts and schemas), :mod:`~assets.stvqa.generate`, :mod:`~assets.stvqa.validation`,
:mod:`~assets.stvqa.gt_scene`, :mod:`~assets.stvqa.pass_at_2`, :mod:`~assets.stvqa.dataset`,
:mod:`~assets.stvqa.shards` and the Dagster wiring in :mod:`~assets.stvqa.assets`.
"""
