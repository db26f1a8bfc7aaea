"""Top-down plot of a scene: the room footprint, the fused cloud, objects' oriented boxes and the cameras.

>>> import numpy as np
>>> image = top_down_plot(room_footprint=np.array([[0, 0], [4, 0], [4, 3], [0, 3.0]]), objects=[],
...                       cameras=[(np.array([1.0, 1.0, 1.5]), np.array([1.0, 0.0]))], title="scene")
>>> image.size[0] > 0
True
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import cast

import numpy as np
from PIL import Image

from assets.dge.objects import ObjectGeometry

_MARGINS = {"left": 0.13, "right": 0.97, "bottom": 0.1, "top": 0.93}
"""Fixed margins (a fraction of the figure) that fit the axis labels and the title: one draw of the
figure, where a fitted layout (``tight_layout``) draws it twice."""


@functools.cache
def _object_colours() -> tuple[tuple[float, float, float], ...]:
    """The 20 colours of matplotlib's ``tab20`` map, one per object in turn.

    matplotlib is imported here, at the first plot, not with the module: the Dagster definitions import
    this module, and every process that loads them would pay for it.
    """
    import matplotlib
    from matplotlib.colors import ListedColormap

    return cast(
        "tuple[tuple[float, float, float], ...]", cast(ListedColormap, matplotlib.colormaps["tab20"]).colors
    )


def obb_footprint(center: np.ndarray, extents: np.ndarray, yaw: float) -> np.ndarray:
    """The 4 xy corners of a yaw-oriented box (counter-clockwise).

    >>> obb_footprint(np.zeros(3), np.array([2.0, 1.0, 1.0]), 0.0).tolist()
    [[-1.0, -0.5], [1.0, -0.5], [1.0, 0.5], [-1.0, 0.5]]
    """
    half_length, half_width = extents[0] / 2.0, extents[1] / 2.0
    local = np.array(
        [
            [-half_length, -half_width],
            [half_length, -half_width],
            [half_length, half_width],
            [-half_length, half_width],
        ]
    )
    cos_yaw, sin_yaw = math.cos(yaw), math.sin(yaw)
    rotation = np.array([[cos_yaw, -sin_yaw], [sin_yaw, cos_yaw]])
    return local @ rotation.T + center[:2]


def top_down_plot(
    room_footprint: np.ndarray,
    objects: Sequence[ObjectGeometry],
    cameras: Sequence[tuple[np.ndarray, np.ndarray | None]],
    title: str = "",
    cloud_points: np.ndarray | None = None,
    max_cloud_points: int = 20_000,
    size_inches: float = 5.0,
    dpi: int = 90,
) -> Image.Image:
    """Render the plot as a PIL image.

    Args:
        room_footprint (`np.ndarray`): ``(K, 2)`` polygon of the room (gravity frame).
        objects (`Sequence[ObjectGeometry]`): drawn as oriented footprints with their labels.
        cameras (`Sequence[tuple[np.ndarray, np.ndarray | None]]`): ``(position, horizontal heading)`` pairs.
        title (`str`, *optional*): the plot's title.
        cloud_points (`np.ndarray`, *optional*): fused cloud, drawn as light grey dots (a seeded subsample).
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # A figure of its own on the Agg canvas, not pyplot's: no global figure registry to close, safe in threads.
    figure = Figure(figsize=(size_inches, size_inches), dpi=dpi)
    canvas = FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    if cloud_points is not None and len(cloud_points):
        points = cloud_points
        if len(points) > max_cloud_points:
            rng = np.random.default_rng(0)
            points = points[rng.choice(len(points), size=max_cloud_points, replace=False)]
        axes.scatter(points[:, 0], points[:, 1], s=0.2, c="#bbbbbb", linewidths=0)
    if len(room_footprint) >= 3:
        closed = np.vstack([room_footprint, room_footprint[:1]])
        axes.plot(closed[:, 0], closed[:, 1], color="black", linewidth=1.2)
    colours = _object_colours()
    for index, obj in enumerate(objects):
        colour = colours[index % len(colours)]
        corners = obb_footprint(obj.obb_center, obj.obb_extents, obj.obb_yaw)
        axes.fill(corners[:, 0], corners[:, 1], color=colour, alpha=0.55, linewidth=0.8, edgecolor="black")
        axes.annotate(
            f"{obj.object_id}:{obj.label}",
            (float(obj.centroid[0]), float(obj.centroid[1])),
            fontsize=6,
            ha="center",
            va="center",
        )
    for number, (position, heading) in enumerate(cameras):
        axes.plot(position[0], position[1], marker="o", markersize=3, color="tab:red")
        if heading is not None:
            axes.arrow(
                position[0],
                position[1],
                0.35 * heading[0],
                0.35 * heading[1],
                head_width=0.08,
                color="tab:red",
                length_includes_head=True,
            )
        if number % max(1, len(cameras) // 10) == 0:
            axes.annotate(
                str(number),
                (float(position[0]), float(position[1])),
                fontsize=5,
                color="tab:red",
                xytext=(2, 2),
                textcoords="offset points",
            )
    axes.set_aspect("equal")
    axes.set_xlabel("x (m)")
    axes.set_ylabel("y (m)")
    axes.set_title(title, fontsize=9)
    axes.grid(True, linewidth=0.3)
    figure.subplots_adjust(**_MARGINS)
    canvas.draw()
    image = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba())
    return image.convert("RGB")
