"""Images inside Parquet, stored the way Hugging Face ``datasets`` stores them.

An image cell is a struct ``{"bytes": <encoded PNG/JPEG bytes>, "path": <file name or None>}``.
A table written through :func:`to_huggingface_arrow` carries the ``huggingface`` schema metadata, so it loads with ``datasets.load_dataset("parquet", ...)`` and
decodes those cells as ``PIL.Image`` objects (a table with no row at all only with ``streaming=True``: see
:mod:`data_contracts.parquet_files`).

>>> from PIL import Image
>>> cell = encode_image(Image.new("RGB", (4, 3)), path="x.png")
>>> decode_image(cell).size
(4, 3)
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np
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


def upright(pixels: np.ndarray, turns: int) -> np.ndarray:
    """An image array (rows first) turned ``turns`` quarter turns clockwise: ``rgbd_frames.upright_turns``
    makes a frame stored rotated (ARKitScenes' sky_direction) upright.

    >>> upright(np.array([[1, 2, 3], [4, 5, 6]]), 1).tolist()
    [[4, 1], [5, 2], [6, 3]]
    >>> upright(np.array([[1, 2, 3], [4, 5, 6]]), 2).tolist()
    [[6, 5, 4], [3, 2, 1]]
    """
    turns %= 4
    return np.ascontiguousarray(np.rot90(pixels, -turns)) if turns else pixels


def upright_image(image: Image.Image, turns: int) -> Image.Image:
    """A PIL image turned ``turns`` quarter turns clockwise (see :func:`upright`)."""
    return Image.fromarray(upright(np.asarray(image), turns)) if turns % 4 else image


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


JPEG_END_OF_IMAGE = b"\xff\xd9"
PNG_END_CHUNK = b"IEND\xaeB`\x82"
"""The last bytes of a whole PNG file: the ``IEND`` chunk's type and CRC."""
_TAIL_BYTES = 64


def truncation_problem(path: str | Path) -> str:
    """Why a JPEG or PNG file was cut short (``"truncated image: ..."``), or ``""``, from its first and last bytes.

    A JPEG must end with its end-of-image marker (``FF D9``; zero padding after it is allowed), a PNG with its
    ``IEND`` chunk. Reading 16 + 64 bytes costs a few microseconds where decoding a frame costs milliseconds,
    so per-frame readers call this beside a header read (``Image.open``, which gives the size) instead of a
    full decode; a file whose header PIL cannot read is reported by that read. Other formats give ``""``.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = Path(folder) / "0.jpg"
    ...     Image.new("RGB", (8, 8)).save(path)
    ...     whole = truncation_problem(path)
    ...     _ = path.write_bytes(path.read_bytes()[:-10])
    ...     cut = truncation_problem(path)
    >>> whole, cut.startswith("truncated image:")
    ('', True)
    """
    file_path = Path(path)
    with file_path.open("rb") as handle:
        head = handle.read(16)
        size = handle.seek(0, io.SEEK_END)
        handle.seek(max(0, size - _TAIL_BYTES))
        tail = handle.read()
    kind = sniff_format(head)
    if kind == "jpeg" and not tail.rstrip(b"\x00").endswith(JPEG_END_OF_IMAGE):
        return f"truncated image: {file_path} does not end with the JPEG end-of-image marker (FF D9)"
    if kind == "png" and not tail.endswith(PNG_END_CHUNK):
        return f"truncated image: {file_path} does not end with the PNG IEND chunk"
    return ""


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
