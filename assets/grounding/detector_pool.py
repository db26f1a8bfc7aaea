"""Grounding DINO on a Ray actor pool: Ray Data ``map_batches``, one model per actor.

The ``pseudo_gt_boxes`` asset uses this when its run config says ``compute: ray`` (see
:mod:`assets.compute`). The driver plans the forward passes exactly as local mode runs them
(:func:`plan_forward_batches`: chunks of ``batch_size`` questions in question order, an
(image, phrases) pair seen before not run again), so every forward pass sees the same images with the
same padding as in local mode and the boxes are the same bits. Each planned pass is one row of a Ray
dataset: the encoded images and their phrases. A :class:`DetectionActor` loads the model once,
decodes the images, runs the pass and returns the detections as JSON (or, for an image that does not
decode, nothing: the driver quarantines it with local mode's message).

Ray Data restarts an actor whose process dies and reruns the passes it had not returned (its actor pool
defaults: ``max_restarts=-1``, ``max_task_retries=-1``; Ray 2.60 deprecates setting them through
``map_batches``); the driver then checks that every planned pass came back exactly once.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from assets.compute import ComputeSettings, ray_cluster, remote_error_cause
from assets.grounding.detector import Detection, DetectorSettings, GroundingDinoDetector
from data_contracts.images import ImageDecodeError, decode_image

logger = logging.getLogger(__name__)

DetectionKey = tuple[str, tuple[str, ...]]
"""(SHA-256 of the image bytes, phrases): a pair that is detected once per shard."""


def detection_key(question: dict) -> DetectionKey:
    """The question's (image hash, phrases) key."""
    return hashlib.sha256(question["image"]["bytes"]).hexdigest(), tuple(question["phrases"])


@dataclass
class ForwardBatch:
    """The images of one forward pass: the first question of each new (image, phrases) pair in a chunk."""

    index: int
    keys: list[DetectionKey] = field(default_factory=list)
    images: list[bytes] = field(default_factory=list)
    paths: list[str | None] = field(default_factory=list)
    phrases: list[list[str]] = field(default_factory=list)

    def to_row(self) -> dict[str, Any]:
        """The Ray dataset row of this pass."""
        return {"index": self.index, "images": self.images, "paths": self.paths, "phrases": self.phrases}


def plan_forward_batches(records: Sequence[dict], batch_size: int) -> list[ForwardBatch]:
    """Split questions into the forward passes local mode runs.

    Local mode walks chunks of ``batch_size`` questions and runs, per chunk, the questions whose
    (image, phrases) pair is neither in an earlier chunk's results nor earlier in the chunk, minus those
    whose image does not decode. Decoding is deterministic, so leaving a pair out once it was planned
    (whether it decoded or not) and dropping undecodable images where they are decoded (on the actor)
    gives the same passes.

    Example:
        >>> cell = {"bytes": b"png", "path": "a.png"}
        >>> records = [{"image": cell, "phrases": ["cup"]}] * 3 + [{"image": cell, "phrases": ["dog"]}]
        >>> [len(batch.keys) for batch in plan_forward_batches(records, 2)]
        [1, 1]
    """
    planned: set[DetectionKey] = set()
    batches: list[ForwardBatch] = []
    for offset in range(0, len(records), batch_size):
        batch = ForwardBatch(index=len(batches))
        for question in records[offset : offset + batch_size]:
            key = detection_key(question)
            if key in planned:
                continue
            planned.add(key)
            batch.keys.append(key)
            batch.images.append(question["image"]["bytes"])
            batch.paths.append(question["image"].get("path"))
            batch.phrases.append(list(question["phrases"]))
        if batch.keys:
            batches.append(batch)
    return batches


def _detection_json(detection: Detection | None) -> dict | None:
    return None if detection is None else asdict(detection)


def _detection_from_json(item: dict | None) -> Detection | None:
    return None if item is None else Detection(**item)


def detect_row(detector: GroundingDinoDetector, row: dict[str, Any]) -> list[Detection | None]:
    """Run one planned forward pass: decode its images, detect, ``None`` where an image does not decode."""
    images, phrase_lists, positions = [], [], []
    for position, (data, path, phrases) in enumerate(
        zip(row["images"], row["paths"], row["phrases"], strict=True)
    ):
        try:
            images.append(decode_image({"bytes": data, "path": path}))
        except ImageDecodeError:
            continue
        phrase_lists.append([str(phrase) for phrase in phrases])
        positions.append(position)
    results: list[Detection | None] = [None] * len(row["images"])
    for position, detection in zip(positions, detector.detect(images, phrase_lists), strict=True):
        results[position] = detection
    return results


class DetectionActor:
    """A Ray Data actor: loads Grounding DINO once, then runs the forward passes it is given.

    Args:
        settings (`DetectorSettings`): model, thresholds, batch size, device (``auto`` finds the GPU Ray
            assigned to the actor).
    """

    def __init__(self, settings: DetectorSettings) -> None:
        self.detector = GroundingDinoDetector(settings)

    def __call__(self, batch):
        """Detect each row (one planned pass); returns ``index`` and the detections as JSON."""
        import pyarrow as pa

        out = [
            {
                "index": row["index"],
                "detections": json.dumps([_detection_json(item) for item in detect_row(self.detector, row)]),
            }
            for row in batch.to_pylist()
        ]
        return pa.Table.from_pylist(out)


def detect_on_ray(
    batches: Sequence[ForwardBatch],
    settings: DetectorSettings,
    compute: ComputeSettings,
    *,
    actor: type = DetectionActor,
    progress: bool = False,
) -> Iterator[tuple[ForwardBatch, list[Detection | None]]]:
    """Run the planned passes on a Ray actor pool; yields each pass with its detections, in plan order.

    Args:
        batches (`Sequence[ForwardBatch]`): from :func:`plan_forward_batches`.
        settings (`DetectorSettings`): what each actor loads.
        compute (`ComputeSettings`): cluster address, pool size, CPUs and GPUs per actor, retries.
        actor (`type`, *optional*): the actor class (:class:`DetectionActor` or a subclass).
        progress (`bool`, *optional*): Ray Data's progress bars.

    Raises:
        RuntimeError: a pass came back twice or not at all.
    """
    if not batches:
        return
    detector_settings = DetectorSettings.model_validate(
        settings.model_dump(include=set(DetectorSettings.model_fields))
    )
    with ray_cluster(compute) as ray:
        import ray.data

        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = progress
        dataset = ray.data.from_items(
            [batch.to_row() for batch in batches], override_num_blocks=len(batches)
        ).map_batches(
            actor,
            fn_constructor_kwargs={"settings": detector_settings},
            batch_size=1,
            batch_format="pyarrow",
            compute=ray.data.ActorPoolStrategy(size=min(compute.ray_actors, len(batches))),
            num_cpus=compute.num_cpus_per_actor,
            num_gpus=compute.num_gpus_per_actor or None,
        )
        try:
            returned = dataset.take_all()
        except ray.exceptions.RayTaskError as error:
            raise remote_error_cause(error) from None
    by_index: dict[int, list[Detection | None]] = {}
    for row in returned:
        if row["index"] in by_index:
            raise RuntimeError(f"forward pass {row['index']} came back twice from the Ray actor pool")
        by_index[row["index"]] = [_detection_from_json(item) for item in json.loads(row["detections"])]
    missing = [batch.index for batch in batches if batch.index not in by_index]
    if missing:
        raise RuntimeError(f"forward passes {missing} did not come back from the Ray actor pool")
    logger.info("Grounding DINO on Ray: %d forward passes on %d actors", len(batches), compute.ray_actors)
    for batch in batches:
        yield batch, by_index[batch.index]
