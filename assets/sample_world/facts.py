"""What one rendered view shows, in the terms questions and relations are computed from.

`ViewFacts` joins the 3D truth of a scene (object boxes, supports, facing directions) with one
view's camera and render (per-object visibility, masks) so that question templates and relation
rules are plain functions of it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from assets.sample_world.config import SampleWorldConfig
from assets.sample_world.render import ObjectVisibility, ViewRender
from assets.sample_world.scene import Scene, SceneObject, View

logger = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class ObjectInView:
    """One scene object as seen from one view."""

    scene_object: SceneObject
    visibility: ObjectVisibility
    centroid_camera: np.ndarray

    @property
    def object_id(self) -> int:
        """The object's id within its scene."""
        return self.scene_object.object_id

    @property
    def name(self) -> str:
        """The object's unique name in its scene (`"red chair"`)."""
        return self.scene_object.name

    @property
    def category(self) -> str:
        """The object's category noun."""
        return self.scene_object.category

    @cached_property
    def distance(self) -> float:
        """Euclidean distance from the camera centre to the object's centroid, in metres."""
        return float(np.linalg.norm(self.centroid_camera))

    @property
    def lateral(self) -> float:
        """The centroid's `x / z` in camera coordinates (image left < 0 < image right)."""
        return (
            float(self.centroid_camera[0] / self.centroid_camera[2])
            if self.centroid_camera[2] > 0
            else float("nan")
        )


@dataclass(frozen=True, eq=False)
class ViewFacts:
    """A scene, one of its views, and what that view shows of each object.

    Args:
        scene (`Scene`): the room and objects.
        view (`View`): the camera.
        objects (`tuple[ObjectInView, ...]`): every object of the scene, in id order.
        min_object_pixels (`int`): least visible pixels for `annotated`.
        min_question_pixels (`int`): least visible pixels for `nameable`.
        min_question_visibility (`float`): least visibility for `nameable`.
    """

    scene: Scene
    view: View
    objects: tuple[ObjectInView, ...]
    min_object_pixels: int
    min_question_pixels: int
    min_question_visibility: float

    @classmethod
    def build(cls, scene: Scene, view: View, render: ViewRender, config: SampleWorldConfig) -> ViewFacts:
        """Join a scene, a view and its render.

        >>> from assets.sample_world.render import SceneRenderer
        >>> from assets.sample_world.scene import sample_scene, sample_views
        >>> config = SampleWorldConfig(num_scenes=1, views_per_scene=1, width=64, height=48)
        >>> scene = sample_scene(config, 0)
        >>> view = sample_views(config, scene)[0]
        >>> facts = ViewFacts.build(scene, view, SceneRenderer(scene).render(view), config)
        >>> len(facts.objects) == len(scene.objects)
        True
        """
        objects = tuple(
            ObjectInView(
                scene_object=scene_object,
                visibility=render.objects[scene_object.object_id],
                centroid_camera=view.world_to_camera(scene_object.centroid[None, :])[0],
            )
            for scene_object in scene.objects
        )
        return cls(
            scene=scene,
            view=view,
            objects=objects,
            min_object_pixels=config.min_object_pixels,
            min_question_pixels=config.min_question_pixels,
            min_question_visibility=config.min_question_visibility,
        )

    @cached_property
    def annotated(self) -> tuple[ObjectInView, ...]:
        """Objects with enough visible pixels to be annotated (boxes, relations)."""
        return tuple(
            item for item in self.objects if item.visibility.visible_pixels >= self.min_object_pixels
        )

    @cached_property
    def nameable(self) -> tuple[ObjectInView, ...]:
        """Objects clearly visible enough to be named in a question."""
        return tuple(
            item
            for item in self.objects
            if item.visibility.visible_pixels >= self.min_question_pixels
            and item.visibility.visibility >= self.min_question_visibility
        )

    def by_id(self, object_id: int) -> ObjectInView:
        """The object with this id."""
        return self.objects[object_id]
