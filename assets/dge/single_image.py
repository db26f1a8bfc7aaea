"""Single-image mode: DGE questions for images without a scan (Visual Genome, OmniSpatial).

Depth comes from a depth file (metric: 16-bit PNG in ``1 / depth_scale`` metres, or ``.npy`` in
metres) or, when configured, from a monocular depth model through transformers'
``depth-estimation`` pipeline (a local checkpoint; nothing is downloaded). Models that predict
relative inverse depth (DPT, Depth Anything) give depth only up to scale: their output is
normalised to the image's median (depth 1 = median depth) and only ordinal questions are asked.

Each object of the image's scene graph (a pixel box) gets a 3D centre: the median depth of the
valid pixels in the central part of its box, back-projected at the box centre through pinhole
intrinsics (from a horizontal field of view when the image has none). Its *validity* in [0, 1] is
``prior x valid-pixel share x (1 - relative depth spread)``, where the prior is 1 for depth files
and configurable for models; objects below ``min_validity`` are not named. The geometry is flagged
``estimated`` in every row it produces (``geometry_source``) and never merged with scanned scenes.

>>> import numpy as np
>>> depth = np.full((40, 60), 2.0)
>>> objects = estimate_objects(depth, pinhole_intrinsics(60, 40, 60.0), [(0, "cup", [20, 10, 40, 30])], prior=1.0)
>>> round(float(objects[0].centroid_camera[2]), 3), objects[0].validity
(2.0, 1.0)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
import polars as pl
import pydantic
from PIL import Image
from pydantic import ConfigDict, Field

from assets.dge.fusion import FrameError, read_depth_m
from assets.dge.tasks import (
    CameraFact,
    ObjectFact,
    SceneFacts,
    SeenFact,
    TaskSettings,
    generate_tasks,
    tasks_to_frame,
)
from data_contracts.boxes import BoxError, pixels_to_grid
from data_contracts.dge_tasks import DgeTasks
from data_contracts.images import decode_image
from data_contracts.quarantine import QuarantineLog
from data_contracts.scan_datasets import IMAGE_DATASET
from data_contracts.validation import polars_schema

if TYPE_CHECKING:
    from transformers import DepthEstimationPipeline

logger = logging.getLogger(__name__)

METRIC_TASK_TYPES = (
    "depth_order",
    "relative_direction_image",
    "camera_region_position",
    "camera_object_distance",
    "absolute_distance",
)
ORDINAL_TASK_TYPES = ("depth_order", "relative_direction_image", "camera_region_position")

# An OpenCV camera looking along +y of a z-up frame: camera x -> x, camera y (down) -> -z, camera z -> y.
CAMERA_TO_UPRIGHT = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]])


class OneImageTaskSettings(TaskSettings):
    """The question settings of one image: its few questions are too small a group to hold to
    ``max_answer_share`` (a lone question would hold all of it); answer values balance across images."""

    max_answer_share: ClassVar[float] = 1.0


class SingleImageSettings(pydantic.BaseModel):
    """Where single-image depth comes from and how much it is trusted (nothing is produced without a source).

    The fields are the run configuration of ``dge_image_tasks``; ``box_core_fraction`` is a constant of the
    method (a ``ClassVar``, not run configuration), and the question margins are :class:`TaskSettings`'.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    depth_dir: str | None = Field(
        default=None, description="Folder of depth files <image_id>.png (uint16) or .npy (metres)."
    )
    depth_scale: float = Field(default=1000.0, description="PNG depth units per metre.")
    depth_model_path: str | None = Field(
        default=None,
        description="Local transformers depth-estimation checkpoint (used when an image has no depth file).",
    )
    depth_model_output: Literal["metric", "relative"] = Field(
        default="relative",
        description="What the model predicts: metric (metres) or relative (relative inverse depth, as DPT and "
        "Depth Anything predict).",
    )
    device: str = Field(default="cpu", description="Device of the depth model.")
    horizontal_fov_deg: float = Field(default=60.0, description="Field of view assumed for the intrinsics.")
    model_validity: float = Field(default=0.6, description="Validity prior of model depth.")
    min_validity: float = Field(default=0.5, description="Objects with lower validity are not named.")
    max_tasks_per_type: int = Field(default=2, description="Questions per type and image.")

    # Constant of the method (not run configuration; a test may override it in a subclass).
    box_core_fraction: ClassVar[float] = 0.5
    """The central share (per side) of a box whose depth is used (the rest is often background)."""

    @property
    def enabled(self) -> bool:
        """Whether any depth source is configured."""
        return self.depth_dir is not None or self.depth_model_path is not None


@dataclass
class DepthMap:
    """A depth image and what kind it is: ``file`` (metric), ``model_metric`` or ``model_relative``."""

    depth: np.ndarray
    kind: Literal["file", "model_metric", "model_relative"]

    @property
    def metric(self) -> bool:
        """True when the depth is in metres."""
        return self.kind != "model_relative"


def pinhole_intrinsics(width: int, height: int, horizontal_fov_deg: float) -> np.ndarray:
    """Square-pixel intrinsics with the principal point at the image centre (pixel centres at integers).

    >>> pinhole_intrinsics(100, 50, 90.0).round(3).tolist()
    [[50.0, 0.0, 49.5], [0.0, 50.0, 24.5], [0.0, 0.0, 1.0]]
    """
    focal = width / (2.0 * math.tan(math.radians(horizontal_fov_deg) / 2.0))
    return np.array([[focal, 0.0, (width - 1) / 2.0], [0.0, focal, (height - 1) / 2.0], [0.0, 0.0, 1.0]])


def read_depth_file(path: str | Path, depth_scale: float = 1000.0) -> np.ndarray:
    """Metric depth from a 16-bit PNG (units / ``depth_scale``) or a ``.npy`` array (metres)."""
    path = Path(path)
    if path.suffix.lower() == ".npy":
        try:
            array = np.load(path)
        except (OSError, ValueError) as error:
            raise FrameError(f"unreadable depth array: {error}", str(path)) from error
        if array.ndim != 2:
            raise FrameError(f"depth array has shape {array.shape}, expected 2D", str(path))
        return array.astype(np.float32)
    return read_depth_m(path, depth_scale)


class DepthEstimator:
    """A transformers ``depth-estimation`` pipeline from a local checkpoint (loaded once, lazily).

    The model is loaded from ``model_path`` only; set ``HF_HUB_OFFLINE=1`` to make sure nothing is
    fetched.
    """

    def __init__(
        self, model_path: str, output: Literal["metric", "relative"] = "relative", device: str = "cpu"
    ):
        self.model_path = model_path
        self.output = output
        self.device = device
        self._pipeline: DepthEstimationPipeline | None = None

    def _load(self) -> DepthEstimationPipeline:
        """The depth-estimation pipeline, loaded on first use."""
        if self._pipeline is None:
            from transformers import pipeline

            self._pipeline = pipeline("depth-estimation", model=self.model_path, device=self.device)
        return self._pipeline

    def __call__(self, image: Image.Image) -> DepthMap:
        """Predict depth at the image's resolution."""
        result = self._load()(image.convert("RGB"))
        predicted = result["predicted_depth"]
        array = (
            predicted.detach().float().cpu().numpy()
            if hasattr(predicted, "detach")
            else np.asarray(predicted)
        )
        array = np.squeeze(array).astype(np.float32)
        if array.shape != (image.height, image.width):
            array = np.asarray(
                Image.fromarray(array).resize((image.width, image.height), Image.Resampling.BILINEAR)
            )
        if self.output == "metric":
            return DepthMap(array, "model_metric")
        return DepthMap(relative_inverse_to_depth(array), "model_relative")


def relative_inverse_to_depth(inverse: np.ndarray) -> np.ndarray:
    """Relative inverse depth to depth relative to the image's median (1.0), 0 where not positive.

    >>> relative_inverse_to_depth(np.array([[2.0, 1.0], [4.0, 0.0]])).round(3).tolist()
    [[1.0, 2.0], [0.5, 0.0]]
    """
    positive = inverse[np.isfinite(inverse) & (inverse > 0)]
    if positive.size == 0:
        return np.zeros_like(inverse, dtype=np.float32)
    median = float(np.median(positive))
    with np.errstate(divide="ignore", invalid="ignore"):
        depth = np.where(np.isfinite(inverse) & (inverse > 0), median / inverse, 0.0)
    return depth.astype(np.float32)


@dataclass
class EstimatedObject:
    """An object's estimated camera-frame centre and how far it can be trusted."""

    object_id: int
    name: str
    bbox_px: list[float]
    centroid_camera: np.ndarray
    depth: float
    valid_fraction: float
    spread: float
    validity: float


def estimate_objects(
    depth: np.ndarray,
    intrinsics: np.ndarray,
    objects: Sequence[tuple[int, str, Sequence[float]]],
    prior: float,
    core_fraction: float = 0.5,
) -> list[EstimatedObject]:
    """Centres and validities of ``(object_id, name, pixel box)`` objects from a depth image (see the module docstring).

    ``intrinsics`` belong to the depth image's resolution.
    """
    height, width = depth.shape
    results = []
    for object_id, name, box in objects:
        x1, y1, x2, y2 = (float(v) for v in box)
        centre_u, centre_v = (x1 + x2) / 2.0, (y1 + y2) / 2.0
        half_w = max(0.5, (x2 - x1) * core_fraction / 2.0)
        half_h = max(0.5, (y2 - y1) * core_fraction / 2.0)
        c1 = int(np.clip(math.floor(centre_u - half_w), 0, width - 1))
        c2 = int(np.clip(math.ceil(centre_u + half_w), c1 + 1, width))
        r1 = int(np.clip(math.floor(centre_v - half_h), 0, height - 1))
        r2 = int(np.clip(math.ceil(centre_v + half_h), r1 + 1, height))
        patch = depth[r1:r2, c1:c2]
        valid = patch[np.isfinite(patch) & (patch > 0)]
        valid_fraction = valid.size / patch.size if patch.size else 0.0
        if valid.size == 0:
            results.append(
                EstimatedObject(
                    object_id, name, [x1, y1, x2, y2], np.full(3, np.nan), float("nan"), 0.0, 1.0, 0.0
                )
            )
            continue
        median = float(np.median(valid))
        spread = float(np.median(np.abs(valid - median)) / median) if median > 0 else 1.0
        validity = float(np.clip(prior * valid_fraction * (1.0 - min(1.0, spread)), 0.0, 1.0))
        x = (centre_u - 0.5 - intrinsics[0, 2]) * median / intrinsics[0, 0]
        y = (centre_v - 0.5 - intrinsics[1, 2]) * median / intrinsics[1, 1]
        results.append(
            EstimatedObject(
                object_id,
                name,
                [x1, y1, x2, y2],
                np.array([x, y, median]),
                median,
                valid_fraction,
                spread,
                validity,
            )
        )
    return results


def image_scene_facts(
    image_id: str,
    width: int,
    height: int,
    intrinsics: np.ndarray,
    estimated: Sequence[EstimatedObject],
    depth_kind: str,
    min_validity: float,
    origin: str,
) -> SceneFacts:
    """:class:`SceneFacts` of one image: one camera (frame 0) looking along +y of an upright frame.

    ``origin`` is the image's ``scene_graphs.origin`` ('sample_world' or 'real').
    """
    pose = np.eye(4)
    pose[:3, :3] = CAMERA_TO_UPRIGHT
    camera = CameraFact(frame_index=0, pose=pose, intrinsics=intrinsics, width=width, height=height)
    objects: dict[int, ObjectFact] = {}
    seen: dict[tuple[int, int], SeenFact] = {}
    for item in estimated:
        if not item.validity >= min_validity or not np.all(np.isfinite(item.centroid_camera)):
            continue
        try:
            x1, y1, x2, y2 = pixels_to_grid(item.bbox_px, width, height)
        except BoxError:
            continue
        key = len(objects)
        objects[key] = ObjectFact(key, item.name, CAMERA_TO_UPRIGHT @ item.centroid_camera, np.zeros(3))
        seen[(0, key)] = SeenFact(visibility=1.0, in_frame=1.0, bbox=(x1, y1, x2, y2))
    return SceneFacts(
        scene_id=image_id,
        objects=objects,
        cameras={0: camera},
        seen=seen,
        room_area_m2=None,
        unmeasured_labels={
            item.name
            for item in estimated
            if not item.validity >= min_validity or not np.all(np.isfinite(item.centroid_camera))
        },
        geometry_source="estimated",
        origin=origin,
        dataset=IMAGE_DATASET,
        provenance={
            "depth_kind": depth_kind,
            "validity": {item.name: round(item.validity, 4) for item in estimated},
        },
    )


def depth_for_image(
    image_id: str, image: Image.Image, config: SingleImageSettings, estimator: DepthEstimator | None
) -> DepthMap | None:
    """The image's depth: its depth file when there is one, else the model's estimate, else None."""
    if config.depth_dir is not None:
        for suffix in (".png", ".npy"):
            path = Path(config.depth_dir) / f"{image_id}{suffix}"
            if path.exists():
                return DepthMap(read_depth_file(path, config.depth_scale), "file")
    if estimator is not None:
        return estimator(image)
    return None


def single_image_tasks(
    scene_graphs: pl.DataFrame,
    config: SingleImageSettings,
    quarantine: QuarantineLog | None = None,
    estimator: DepthEstimator | None = None,
) -> pl.DataFrame:
    """``dge_tasks`` rows (``geometry_source = "estimated"``) for the images of a ``scene_graphs`` table.

    Images without depth (no file and no model configured) get no rows; unreadable depth and
    images are quarantined.
    """
    if estimator is None and config.depth_model_path is not None:
        estimator = DepthEstimator(config.depth_model_path, config.depth_model_output, config.device)
    frames = []
    for row in scene_graphs.iter_rows(named=True):
        image_id = str(row["image_id"])
        try:
            image = decode_image(row["image"])
            depth = depth_for_image(image_id, image, config, estimator)
        except (FrameError, ValueError, OSError) as error:
            if quarantine is not None:
                quarantine.add(
                    image_id, f"no usable depth: {error}", source_file=(row.get("image") or {}).get("path")
                )
            continue
        if depth is None:
            continue
        width, height = int(row["image_width"]), int(row["image_height"])
        depth_array = depth.depth
        if depth_array.shape != (height, width):
            depth_array = np.asarray(
                Image.fromarray(depth_array).resize((width, height), Image.Resampling.NEAREST)
            )
        intrinsics = pinhole_intrinsics(width, height, config.horizontal_fov_deg)
        prior = 1.0 if depth.kind == "file" else config.model_validity
        estimated = estimate_objects(
            depth_array, intrinsics, scene_graph_objects(row), prior, config.box_core_fraction
        )
        facts = image_scene_facts(
            image_id, width, height, intrinsics, estimated, depth.kind, config.min_validity, row["origin"]
        )
        task_types = METRIC_TASK_TYPES if depth.metric else ORDINAL_TASK_TYPES
        task_settings = OneImageTaskSettings(
            task_types=list(task_types), max_tasks_per_type=config.max_tasks_per_type, max_images=1
        )
        tasks = generate_tasks(facts, task_settings)
        if tasks:
            frames.append(tasks_to_frame(tasks, facts, task_settings, images={0: row["image"]}))
    if not frames:
        return pl.DataFrame(schema=polars_schema(DgeTasks))
    return pl.concat(frames)


def scene_graph_objects(row: Mapping[str, Any]) -> list[tuple[int, str, list[float]]]:
    """``(index, name, pixel box)`` of a ``scene_graphs`` row's objects."""
    return [(index, str(obj["name"]), list(obj["bbox_px"])) for index, obj in enumerate(row["objects"])]
