"""Images inside Parquet, stored the way Hugging Face ``datasets`` stores them.

An image cell is a struct ``{"bytes": <encoded PNG/JPEG bytes>, "path": <file name or None>}``.
A table written through :func:`to_huggingface_arrow` carries the ``huggingface`` schema metadata, so it loads with ``datasets.load_dataset("parquet", ...)`` and
decodes those cells as ``PIL.Image`` objects.

>>> from PIL import Image
>>> cell = encode_image(Image.new("RGB", (4, 3)), path="x.png")
>>> decode_image(cell).size
(4, 3)
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import polars as pl
import pyarrow as pa
from PIL import Image, UnidentifiedImageError

IMAGE_DTYPE = pl.Struct({"bytes": pl.Binary, "path": pl.String})

_SIGNATURES = {
    b"\x89PNG\r\n\x1a\n": "png",
    b"\xff\xd8\xff": "jpeg",
    b"GIF87a": "gif",
    b"GIF89a": "gif",
    b"BM": "bmp",
}


class ImageDecodeError(ValueError):
    """Bytes that are not a readable image (names the file when one is known)."""


def sniff_format(data: bytes) -> str | None:
    """Return the image format from the leading bytes (``"png"``, ``"jpeg"``, ...), not the file name.

    >>> sniff_format(b"\\xff\\xd8\\xff\\xe0rest")
    'jpeg'
    """
    for signature, name in _SIGNATURES.items():
        if data.startswith(signature):
            return name
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "webp"
    return None


def encode_image(image: Image.Image | str | Path | bytes, path: str | None = None, fmt: str = "PNG") -> dict:
    """Make an image cell: files and bytes are kept as they are, PIL images are encoded as ``fmt``."""
    if isinstance(image, (str, Path)):
        file_path = Path(image)
        return {"bytes": file_path.read_bytes(), "path": path if path is not None else file_path.name}
    if isinstance(image, bytes):
        return {"bytes": image, "path": path}
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return {"bytes": buffer.getvalue(), "path": path}


def decode_image(cell: dict, mode: str | None = "RGB") -> Image.Image:
    """Open an image cell (or raise :class:`ImageDecodeError` naming its path)."""
    data = cell.get("bytes") if cell else None
    name = (cell or {}).get("path")
    if not data:
        raise ImageDecodeError(f"image cell {name!r} has no bytes")
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except (UnidentifiedImageError, OSError, SyntaxError) as error:
        raise ImageDecodeError(f"cannot decode image {name!r}: {error}") from error
    return image.convert(mode) if mode else image


def read_image_file(path: str | Path) -> tuple[dict, int, int]:
    """Read and verify an image file; return ``(cell, width, height)``.

    Raises ``FileNotFoundError`` for a missing file and :class:`ImageDecodeError` for a corrupt one.
    """
    file_path = Path(path)
    data = file_path.read_bytes()
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            width, height = image.size
    except (UnidentifiedImageError, OSError, SyntaxError) as error:
        raise ImageDecodeError(f"cannot decode image {file_path}: {error}") from error
    return {"bytes": data, "path": file_path.name}, width, height


def image_sha256(cell_or_bytes: dict | bytes) -> str:
    """Content hash of an image's bytes (the key used by response caches)."""
    data = cell_or_bytes["bytes"] if isinstance(cell_or_bytes, dict) else cell_or_bytes
    return hashlib.sha256(data or b"").hexdigest()


def to_huggingface_arrow(frame: pl.DataFrame) -> pa.Table:
    """Convert a frame to Arrow with ``datasets`` feature metadata, so image columns decode as images.

    Struct ``{bytes, path}`` columns become ``Image`` features and lists of them ``List(Image)``; the
    other columns keep their Arrow types. Polars reads the result back unchanged.
    """
    table = frame.to_arrow()
    image_columns = [name for name, dtype in frame.schema.items() if dtype == IMAGE_DTYPE]
    image_list_columns = [
        name
        for name, dtype in frame.schema.items()
        if isinstance(dtype, pl.List) and dtype.inner == IMAGE_DTYPE
    ]
    if not image_columns and not image_list_columns:
        return table
    from datasets import Features
    from datasets import Image as ImageFeature
    from datasets import List as ListFeature

    features = Features.from_arrow_schema(table.schema)
    for name in image_columns:
        features[name] = ImageFeature()
    for name in image_list_columns:
        features[name] = ListFeature(ImageFeature())
    return table.cast(features.arrow_schema)
