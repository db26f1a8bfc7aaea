"""Which frames of a scan its geometry is built from: keyframes chosen from the camera poses alone.

A ScanNet scan holds 1-5 thousand frames taken at 30 per second: consecutive frames stand about a centimetre
and a degree apart, and each adds almost nothing the previous one did not see. Reading, back-projecting and
ray casting every one would cost 50-250 CPU-s per scan. The geometry is built from keyframes instead, chosen
before any image is read: walking the frames in order, a frame is kept when its camera moved at least
:attr:`KeyframeSettings.keyframe_translation_m` or turned at least
:attr:`KeyframeSettings.keyframe_rotation_deg` from the last kept one (the first frame is always kept), so
the kept frames cover every place and direction the capture did; when more than
:attr:`KeyframeSettings.max_keyframes` are kept, an even spread of them (the first and the last included)
is used. Frames whose pose is not finite are passed on as they are (fusion quarantines them).

The sample world's captures move 0.3-1 m or turn 30-60 degrees between frames, so every one of its frames is
a keyframe; a dense capture keeps one frame in every 10-40.

>>> import numpy as np
>>> poses = [np.eye(4) for _ in range(5)]
>>> for index, pose in enumerate(poses):
...     pose[0, 3] = 0.04 * index  # 4 cm a frame
>>> keyframe_indices(poses, KeyframeSettings())
[0, 4]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field


class KeyframeSettings(BaseModel):
    """How many frames of a scan its geometry reads (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_keyframes: int = Field(
        default=120,
        ge=1,
        description="Most frames a scan's geometry and visibility are built from: the keyframes (a frame is kept "
        "when the camera moved or turned enough since the last kept one), thinned evenly beyond this.",
    )

    keyframe_translation_m: ClassVar[float] = 0.15
    """A frame whose camera moved at least this far from the last keyframe is a keyframe."""
    keyframe_rotation_deg: ClassVar[float] = 10.0
    """A frame whose camera turned at least this much from the last keyframe is a keyframe."""


def _turn_deg(rotation_a: np.ndarray, rotation_b: np.ndarray) -> float:
    """The angle (degrees) of the rotation between two camera orientations."""
    cosine = (np.trace(rotation_a.T @ rotation_b) - 1.0) / 2.0
    return math.degrees(math.acos(min(1.0, max(-1.0, float(cosine)))))


def keyframe_indices(poses: Sequence[np.ndarray], settings: KeyframeSettings) -> list[int]:
    """Positions (in ``poses``, frames in capture order) of the keyframes; non-finite poses are kept."""
    moved: list[int] = []
    last: np.ndarray | None = None
    for position, pose in enumerate(poses):
        if not np.all(np.isfinite(pose)):
            moved.append(position)
            continue
        if (
            last is None
            or np.linalg.norm(pose[:3, 3] - last[:3, 3]) >= settings.keyframe_translation_m
            or _turn_deg(last[:3, :3], pose[:3, :3]) >= settings.keyframe_rotation_deg
        ):
            moved.append(position)
            last = pose
    if len(moved) <= settings.max_keyframes:
        return moved
    spread = np.linspace(0, len(moved) - 1, settings.max_keyframes).round().astype(int)
    return [moved[index] for index in sorted(set(spread.tolist()))]
