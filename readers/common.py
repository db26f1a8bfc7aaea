"""What every raw-format reader shares: the missing-input error, image reading with quarantine reasons, JSON files.

A missing input folder is the only thing a reader raises (:class:`MissingInputError`, one sentence
naming the path and the config field); everything else wrong with a record becomes a quarantine reason.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from data_contracts import mcq_questions
from data_contracts.images import ImageDecodeError, read_image_file
from data_contracts.quarantine import QuarantineLog

logger = logging.getLogger(__name__)

LETTERS = mcq_questions.LETTERS
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif")


class MissingInputError(FileNotFoundError):
    """A configured input folder or file does not exist."""


def require_path(path: str | Path | None, config_field: str, what: str) -> Path:
    """Return ``path`` as a ``Path`` or raise :class:`MissingInputError` naming it and its config field."""
    if path is None or not Path(path).exists():
        raise MissingInputError(
            f"{what} not found at {path!s}: set the config field `{config_field}` to an existing path."
        )
    return Path(path)


class ImageCache:
    """Reads each image file once (several questions share an image)."""

    def __init__(self) -> None:
        self._cells: dict[Path, tuple[dict, int, int]] = {}
        self._errors: dict[Path, str] = {}

    def get(self, path: Path) -> tuple[dict, int, int]:
        if path in self._errors:
            raise ImageDecodeError(self._errors[path])
        if path not in self._cells:
            try:
                self._cells[path] = read_image_file(path)
            except ImageDecodeError as error:
                self._errors[path] = str(error)
                raise
        return self._cells[path]


def image_problem(
    cache: ImageCache, path: Path | None, record_id: str
) -> tuple[tuple[dict, int, int] | None, str]:
    if path is None or not path.exists():
        return None, f"missing image: {path if path is not None else 'no file for ' + record_id}"
    try:
        return cache.get(path), ""
    except ImageDecodeError as error:
        return None, f"corrupt image: {error}"


def load_json(path: Path, log: QuarantineLog) -> Any | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        log.add(path.name, f"malformed JSON: {error}", source_file=str(path))
        return None
    except UnicodeDecodeError as error:
        log.add(path.name, f"malformed JSON: not UTF-8 ({error})", source_file=str(path))
        return None


# --------------------------------------------------------------------------------------------------
# OmniSpatial and SpatiaLab
# --------------------------------------------------------------------------------------------------


def read_jsonl(path: Path, log: QuarantineLog) -> list[dict]:
    """The records of a JSON Lines file; a malformed line is quarantined with its line number, the rest kept."""
    records = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as error:
            log.add(f"line {number}", f"malformed JSON: {error}", source_file=str(path))
    return records
