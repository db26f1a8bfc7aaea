"""Previews for asset metadata: Markdown tables and images with boxes drawn.

>>> import polars as pl
>>> print(markdown_preview(pl.DataFrame({"a": [1, 2]}), limit=1))
| a |
|---|
| 1 |
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from pathlib import Path

import polars as pl
from PIL import Image, ImageDraw

from data_contracts.boxes import grid_to_pixels
from data_contracts.images import decode_image
from data_contracts.storage import atomic_write

_PALETTE = ["#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6", "#bfef45"]
_MAX_CELL = 60


def _readable(value: object) -> object:
    """Floats to 4 significant digits, inside lists and dicts too (5.801183333074303 reads 5.801)."""
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, list | tuple):
        return [_readable(item) for item in value]
    if isinstance(value, dict):
        return {key: _readable(item) for key, item in value.items()}
    return value


def _cell_text(value: object) -> str:
    """A table cell as short Markdown text.

    >>> _cell_text(5.801183333074303), _cell_text([0.123456, 2]), _cell_text("a|b")
    ('5.801', '[0.1235, 2]', 'a\\\\|b')
    """
    if isinstance(value, dict) and "bytes" in value:
        return f"<image {value.get('path') or ''}>"
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    text = str(_readable(value)).replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= _MAX_CELL else text[: _MAX_CELL - 1] + "…"


def markdown_preview(frame: pl.DataFrame, limit: int = 5, columns: Sequence[str] | None = None) -> str:
    """The first ``limit`` rows of ``frame`` as a Markdown table (images and long cells abbreviated)."""
    selected = frame.select(list(columns)) if columns else frame
    header = "| " + " | ".join(selected.columns) + " |"
    rule = "|" + "|".join("---" for _ in selected.columns) + "|"
    rows = ["| " + " | ".join(_cell_text(v) for v in row) + " |" for row in selected.head(limit).iter_rows()]
    return "\n".join([header, rule, *rows])


def draw_boxes(
    image_cell: dict,
    boxes: Sequence[Sequence[float]],
    labels: Sequence[str] = (),
    max_side: int = 384,
) -> Image.Image:
    """Draw canonical (0..1000 grid) boxes with labels on a copy of the image, downscaled to ``max_side``."""
    image = decode_image(image_cell)
    scale = min(1.0, max_side / max(image.size))
    if scale < 1.0:
        image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))))
    draw = ImageDraw.Draw(image)
    taken: list[tuple[int, int, int, int]] = []
    for index, box in enumerate(boxes):
        colour = _PALETTE[index % len(_PALETTE)]
        x1, y1, x2, y2 = grid_to_pixels(box, image.width, image.height)
        draw.rectangle([x1, y1, x2, y2], outline=colour, width=2)
        if index < len(labels) and labels[index]:
            _draw_label(draw, str(labels[index]), (x1, y1), colour, image.size, taken)
    return image


def _draw_label(draw, text: str, corner, colour, size, taken: list[tuple[int, int, int, int]]) -> None:
    """A label on a dark band at a box's top-left corner, kept inside the image and off earlier labels."""
    left, top, right, bottom = draw.textbbox((0, 0), text)
    width, height = right - left + 4, bottom - top + 2
    x = min(max(0, corner[0]), max(0, size[0] - width))
    y = min(max(0, corner[1] - height), max(0, size[1] - height))
    for _ in range(len(taken) + 1):  # step down past labels already drawn
        clash = next(
            (t for t in taken if x < t[2] and t[0] < x + width and y < t[3] and t[1] < y + height), None
        )
        if clash is None:
            break
        y = min(clash[3], max(0, size[1] - height))
    draw.rectangle([x, y, x + width, y + height], fill=(0, 0, 0))
    draw.text((x + 2 - left, y + 1 - top), text, fill=colour)
    taken.append((x, y, x + width, y + height))


def with_caption(image: Image.Image, text: str) -> Image.Image:
    """``image`` under a dark band with ``text`` (a tile's title in a gallery); the text is cut to fit.

    >>> with_caption(Image.new("RGB", (40, 30)), "object_count").size[1] > 30
    True
    """
    probe = ImageDraw.Draw(image)
    shown = text
    left, top, right, bottom = probe.textbbox((0, 0), shown)
    while len(shown) > 1 and right - left + 4 > image.width:
        text = text[:-1]
        shown = text + "…"
        left, top, right, bottom = probe.textbbox((0, 0), shown)
    height = int(bottom - top) + 4  # whole pixels: the bbox of text drawn at (0, 0)
    titled = Image.new("RGB", (image.width, image.height + height), (0, 0, 0))
    titled.paste(image.convert("RGB"), (0, height))
    ImageDraw.Draw(titled).text((2 - left, 2 - top), shown, fill=(255, 255, 255))
    return titled


def gallery(images: Sequence[Image.Image], columns: int = 3) -> Image.Image:
    """Tile images into one picture (row-major)."""
    if not images:
        return Image.new("RGB", (1, 1), "white")
    cell_w = max(image.width for image in images)
    cell_h = max(image.height for image in images)
    rows = (len(images) + columns - 1) // columns
    sheet = Image.new("RGB", (cell_w * min(columns, len(images)), cell_h * rows), "white")
    for index, image in enumerate(images):
        sheet.paste(image, ((index % columns) * cell_w, (index // columns) * cell_h))
    return sheet


PNG_COMPRESS_LEVEL = 1
"""zlib level of preview and review PNGs: level 1 encodes 2-3x faster than Pillow's default 6, for files
about 1.4x larger (a preview is written at every materialization and read once)."""


def png_bytes(image: Image.Image) -> bytes:
    """Encode an image as PNG."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buffer.getvalue()


def save_preview(image: Image.Image, root: str | Path, name: str) -> Path:
    """Write a preview PNG under ``<root>/previews/`` atomically and return its path.

    Concurrent builds and killed ones leave a whole PNG (see :func:`data_contracts.storage.atomic_write`).
    """
    path = Path(root) / "previews" / f"{name}.png"
    with atomic_write(path) as handle:
        image.save(handle, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return path


INLINE_MAX_SIDE = 640
INLINE_JPEG_QUALITY = 80
"""An image inlined in materialization metadata is at most 640 pixels on its longer side, as JPEG: about 20-40
KB where the full-size PNG took 100-300 KB, written into the event log with every partition (the full-size PNG
stays on disk, ``preview_image_path``)."""


def markdown_image(image: Image.Image, alt: str = "preview") -> str:
    """Inline Markdown image (a JPEG data URI, at most :data:`INLINE_MAX_SIDE` pixels) for the Dagster UI.

    >>> markdown_image(Image.new("RGB", (1280, 20)), "wide").startswith("![wide](data:image/jpeg;base64,")
    True
    """
    scale = min(1.0, INLINE_MAX_SIDE / max(image.size))
    if scale < 1.0:
        image = image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))))
    buffer = io.BytesIO()
    image.convert("RGB").save(buffer, format="JPEG", quality=INLINE_JPEG_QUALITY)
    return f"![{alt}](data:image/jpeg;base64,{base64.b64encode(buffer.getvalue()).decode()})"
