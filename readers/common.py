"""What every raw-format reader shares: input locations (local or on the Hub), image reading, JSON and Parquet files.

A missing input folder is the only thing a reader raises (:class:`MissingInputError`, one sentence
naming the path and the config field); everything else wrong with a record becomes a quarantine reason
that names the problem and the file. Whoever calls a reader then checks, with :func:`require_rows`, that
the input gave at least one valid row: an input with no record at all (a ``data.json`` holding ``[]``, a
0-row Parquet file) and an input whose every record was quarantined (a wrong layout, a wrong image folder)
both fail with :class:`EmptySourceError`, so neither replaces the previous table with an empty one; only
an explicit switch of the caller's config lets an empty input through.

Wherever a folder or file is configured, a Hugging Face Hub dataset may be given instead, as
``hf://datasets/OWNER/NAME[@REVISION][/PATH/IN/REPO]`` (the ``HfFileSystem`` URL form): it is fetched
once by ``huggingface_hub.snapshot_download`` into the local Hub cache (``$HF_HUB_CACHE`` or
``$HF_HOME/hub``; with ``HF_HUB_OFFLINE=1`` only the cache is read) and the same readers read the
snapshot folder:

>>> parse_hub_location("hf://datasets/nyu-visionx/CV-Bench@main/test_2d.parquet")
HubLocation(repo_id='nyu-visionx/CV-Bench', revision='main', path_in_repo='test_2d.parquet')
>>> parse_hub_location("data/CV-Bench") is None
True

Every path a record names (an image file name, a task folder) is resolved, symlinks included, and must stay
inside the folder it is relative to (:func:`path_escape_problem`): one that escapes (``../../outside.png``,
``/etc/passwd``, a link inside the folder to a file outside) is quarantined and never opened. A scan folder
that is a symbolic link is listed only when :func:`linked_folder_problem` finds nothing wrong with it.

Text is bounded: a field longer than its bound (:data:`MAX_QUESTION_CHARS` and the others below; each reader
names its fields' bounds) is quarantined by :func:`text_field_problem` with the field, its length and the
bound, before any paid stage sees it. Text files (JSON, JSON Lines, CSV) are read as ``utf-8-sig``, so a
UTF-8 byte-order mark is accepted.
"""

from __future__ import annotations

import codecs
import json
import logging
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote

from data_contracts import mcq_questions
from data_contracts.images import ImageDecodeError, read_image_file
from data_contracts.quarantine import QuarantineLog

logger = logging.getLogger(__name__)

LETTERS = mcq_questions.LETTERS
IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".bmp", ".gif")


HUB_DATASET_PREFIX = "hf://datasets/"
TEXT_ENCODING = "utf-8-sig"
"""How JSON, JSON Lines and CSV inputs are read: UTF-8, a leading byte-order mark accepted."""

MAX_QUESTION_CHARS = 4_000
"""Longest question (a long multi-step OmniSpatial question is about 1,000 characters)."""
MAX_OPTION_CHARS = 1_000
"""Longest answer option."""
MAX_LABEL_CHARS = 200
"""Longest short label: a task type or category, an object name, an attribute, a predicate, a record id."""
MAX_FILE_NAME_CHARS = 1_024
"""Longest file name or relative path a record names (an image file)."""


class MissingInputError(FileNotFoundError):
    """A configured input folder or file does not exist (or a Hub dataset cannot be fetched).

    ``location`` and ``config_field``, when the raiser knows them, are kept for the step failure's metadata
    (:func:`assets.tables.input_failure`); the message already names them.
    """

    def __init__(
        self, message: str, *, location: str | Path | None = None, config_field: str | None = None
    ) -> None:
        super().__init__(message)
        self.location = None if location is None else str(location)
        self.config_field = config_field


class EmptySourceError(ValueError):
    """An input gave no valid row: it held no record at all, or every record was quarantined.

    Besides the message (one sentence), it keeps the input's ``location``, its ``config_field``, how many
    records were ``quarantined`` and the ``first_reasons`` (``"<record id>: <reason>"``), for the step
    failure's metadata (:func:`assets.tables.input_failure`).
    """

    def __init__(
        self,
        message: str,
        *,
        location: str | Path | None = None,
        config_field: str | None = None,
        quarantined: int = 0,
        first_reasons: list[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.location = None if location is None else str(location)
        self.config_field = config_field
        self.quarantined = quarantined
        self.first_reasons = list(first_reasons or [])


class MalformedInputError(EmptySourceError):
    """A configured input file cannot be parsed at all (a truncated or corrupt annotation file): the whole input
    fails, naming the file, rather than building a table from part of it."""


@dataclass(frozen=True)
class HubLocation:
    """A data set (or a file or folder inside it) on the Hugging Face Hub."""

    repo_id: str
    revision: str | None = None
    path_in_repo: str = ""

    def __str__(self) -> str:
        revision = f"@{self.revision}" if self.revision else ""
        path = f"/{self.path_in_repo}" if self.path_in_repo else ""
        return f"{HUB_DATASET_PREFIX}{self.repo_id}{revision}{path}"


def parse_hub_location(location: str | Path | None) -> HubLocation | None:
    """The Hub data set named by ``hf://datasets/OWNER/NAME[@REVISION][/PATH]``; ``None`` for a local path.

    A revision holding a slash is written URL-encoded (``@refs%2Fconvert%2Fparquet``). The form that
    ``pathlib`` makes of the URL (``hf:/datasets/...``) is read too.

    Raises:
        `MissingInputError`: when the location starts like a Hub id but names no ``OWNER/NAME``.

    >>> parse_hub_location("hf://datasets/BLINK-Benchmark/BLINK")
    HubLocation(repo_id='BLINK-Benchmark/BLINK', revision=None, path_in_repo='')
    >>> str(parse_hub_location(Path("hf://datasets/ccvl/3DSRBench@v1/data")))
    'hf://datasets/ccvl/3DSRBench@v1/data'
    """
    if location is None:
        return None
    text = str(location)
    for prefix in (HUB_DATASET_PREFIX, "hf:/datasets/"):
        if text.startswith(prefix):
            rest = text[len(prefix) :]
            break
    else:
        return None
    owner, _, rest = rest.partition("/")
    name, _, path_in_repo = rest.partition("/")
    name, _, revision = name.partition("@")
    if not owner or not name:
        raise MissingInputError(
            f"{text} is not a Hub dataset id: write {HUB_DATASET_PREFIX}OWNER/NAME[@REVISION][/PATH].",
            location=text,
        )
    return HubLocation(f"{owner}/{name}", unquote(revision) or None, path_in_repo.strip("/"))


def resolve_location(location: str | Path, config_field: str) -> Path:
    """A local path for a configured location: a local path as given, a Hub dataset as its cached snapshot.

    A Hub location is fetched with ``huggingface_hub.snapshot_download`` (only the named file or folder
    when the location names one) into the local Hub cache, or found there when ``HF_HUB_OFFLINE=1``.

    Raises:
        `MissingInputError`: when the Hub dataset, revision or path cannot be fetched or found in the cache,
            naming the location and ``config_field``.

    >>> resolve_location("data/OmniSpatial", "omnispatial_root")
    PosixPath('data/OmniSpatial')
    """
    hub = parse_hub_location(location)
    if hub is None:
        return Path(location)
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    patterns = [hub.path_in_repo, f"{hub.path_in_repo}/"] if hub.path_in_repo else None
    try:
        snapshot = Path(
            snapshot_download(
                hub.repo_id, repo_type="dataset", revision=hub.revision, allow_patterns=patterns
            )
        )
    except (LocalEntryNotFoundError, HfHubHTTPError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise MissingInputError(
            f"Hub dataset {hub} could not be fetched or found in the local Hub cache ({reason}): "
            f"check the config field `{config_field}`, the network or HF_HUB_OFFLINE, and the token.",
            location=str(hub),
            config_field=config_field,
        ) from error
    local = snapshot / hub.path_in_repo if hub.path_in_repo else snapshot
    if not local.exists():
        raise MissingInputError(
            f"{hub.path_in_repo} is not in Hub dataset {hub.repo_id} (snapshot {snapshot}): "
            f"fix the path in the config field `{config_field}`.",
            location=str(hub),
            config_field=config_field,
        )
    logger.info("Hub dataset %s resolved to %s", hub, local)
    return local


def require_path(path: str | Path | None, config_field: str, what: str) -> Path:
    """Return ``path`` (a local path or a Hub location, see :func:`resolve_location`) as an existing ``Path``.

    Raises:
        `MissingInputError`: naming the path and its config field when there is nothing there.
    """
    local = resolve_location(path, config_field) if path is not None else None
    if local is None or not local.exists():
        raise MissingInputError(
            f"{what} not found at {path!s}: set the config field `{config_field}` to an existing path.",
            location=path,
            config_field=config_field,
        )
    return local


def require_rows(
    rows: int,
    log: QuarantineLog,
    *,
    what: str,
    location: str | Path,
    config_field: str,
    allow_empty: bool = False,
    allow_empty_switch: str | None = None,
    remedy: str | None = None,
    shown: int = 3,
) -> None:
    """Raise :class:`EmptySourceError` when an input gave no valid row.

    Two cases, each one sentence naming the input, its location and its config field:

    - the input held no record at all (a file holding ``[]``, a 0-row Parquet file): it fails unless
      ``allow_empty`` (the caller's config switch, named by ``allow_empty_switch`` in the message) is set;
    - every record was quarantined (a wrong layout, a wrong image folder): it always fails, naming the
      first ``shown`` reasons.

    ``remedy``, when given, replaces "check the config field ..." (an input the user did not configure, such
    as the built-in sample world, is fixed elsewhere).

    >>> log = QuarantineLog("mcq_questions")
    >>> require_rows(0, log, what="SpatiaLab", location="/data/SpatiaLab", config_field="spatialab_path",
    ...              allow_empty_switch="add 'spatialab' to the config field `allow_empty_sources`")
    Traceback (most recent call last):
    ...
    readers.common.EmptySourceError: SpatiaLab at /data/SpatiaLab holds no record: check the config field `spatialab_path`, or add 'spatialab' to the config field `allow_empty_sources` to build an empty table on purpose.
    >>> require_rows(0, log, what="SpatiaLab", location="/data/SpatiaLab", config_field="spatialab_path",
    ...              allow_empty=True)
    >>> log.add("7", "missing image: /data/SpatiaLab/images/7.png")
    >>> require_rows(0, log, what="SpatiaLab", location="/data/SpatiaLab", config_field="spatialab_path")
    Traceback (most recent call last):
    ...
    readers.common.EmptySourceError: SpatiaLab at /data/SpatiaLab gave no valid row: all 1 records were quarantined (first: 7: missing image: /data/SpatiaLab/images/7.png); check the config field `spatialab_path`.
    """
    if rows:
        return
    check = f"check the config field `{config_field}`"
    if not len(log):
        if allow_empty:
            logger.warning(
                "%s at %s holds no record: an empty table is built (allowed by the config)", what, location
            )
            return
        switch = f", or {allow_empty_switch} to build an empty table on purpose" if allow_empty_switch else ""
        raise EmptySourceError(
            f"{what} at {location} holds no record: {remedy or check}{switch}.",
            location=location,
            config_field=config_field,
        )
    first = [f"{row['record_id']}: {row['reason']}" for row in log.rows[:shown]]
    raise EmptySourceError(
        f"{what} at {location} gave no valid row: all {len(log)} records were quarantined "
        f"(first: {'; '.join(first)}); {remedy or check}.",
        location=location,
        config_field=config_field,
        quarantined=len(log),
        first_reasons=first,
    )


def column_problem(columns: Iterable[str], required: Iterable[str]) -> str:
    """Why a table with ``columns`` cannot be the table asked for (required columns missing), or ``""``.

    Readers check a Parquet file's schema (``pl.read_parquet_schema``) with it before reading rows, so a
    file of another data set is reported once, by its columns, not as one odd failure per row.

    >>> column_problem(["image_id", "caption"], ["image_id", "image", "objects"])
    "wrong columns: missing ['image', 'objects'] (the file has ['image_id', 'caption'])"
    >>> column_problem(["image_id", "image"], ["image"])
    ''
    """
    present = list(columns)
    missing = [column for column in required if column not in present]
    return f"wrong columns: missing {missing} (the file has {present})" if missing else ""


def _blank(value: Any) -> bool:
    """True for a value that stands for nothing: ``None``, NaN (a missing cell of a table) or blank text."""
    return (
        value is None
        or (isinstance(value, float) and math.isnan(value))
        or (isinstance(value, str) and not value.strip())
    )


def _kind(value: Any) -> str:
    """``"a list"``, ``"an int"``: the type of ``value`` with its article, for reasons."""
    name = type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def missing_fields(record: dict, keys: Iterable[str]) -> str:
    """Why a record lacks required fields (each named with how it is missing: absent, null or blank), or ``""``.

    >>> missing_fields({"id": "1_0", "question": None, "options": [], "answer": 0}, ["id", "question", "options", "task_type"])
    'missing fields: question is null, task_type is absent'
    >>> missing_fields({"Question": "  "}, ["Question"])
    'missing fields: Question is blank'
    """
    problems = []
    for key in keys:
        if key not in record:
            problems.append(f"{key} is absent")
        elif record[key] is None or (isinstance(record[key], float) and math.isnan(record[key])):
            problems.append(f"{key} is null")
        elif _blank(record[key]):
            problems.append(f"{key} is blank")
    return f"missing fields: {', '.join(problems)}" if problems else ""


def id_type_problem(value: Any, key: str = "id") -> str:
    """Why a record's id cannot be an id (it must be text or an integer), or ``""``.

    A list, a dict, a float or a boolean would become an id such as ``"[1, 2]"`` or ``"12.0"`` that names no
    image, so it is reported as what it is instead of as a missing image.

    >>> id_type_problem("12_0"), id_type_problem(7)
    ('', '')
    >>> id_type_problem([12, 0])
    'wrong id type: id is a list ([12, 0]), expected text or an integer'
    >>> id_type_problem(12.0)
    'wrong id type: id is a float (12.0), expected text or an integer'
    """
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return ""
    return f"wrong id type: {key} is {_kind(value)} ({value!r}), expected text or an integer"


def text_field_problem(record: dict, keys: Iterable[str], max_chars: Mapping[str, int] | None = None) -> str:
    """Why fields that must hold text hold something else, or text longer than its bound in ``max_chars``, or ``""``.

    Every key of ``max_chars`` present in ``record`` as text is bounded (its length in characters), whether or
    not it is among ``keys``.

    >>> text_field_problem({"question": 5, "task_type": "Complex_Logic"}, ["question", "task_type"])
    'wrong field type: question is an int (5), expected text'
    >>> text_field_problem({"question": "Which? " * 700}, ["question"], {"question": MAX_QUESTION_CHARS})
    'text too long: question has 4,900 characters, at most 4,000 allowed'
    """
    wrong = [
        f"{key} is {_kind(record[key])} ({record[key]!r})"
        for key in keys
        if key in record and not isinstance(record[key], str)
    ]
    if wrong:
        return f"wrong field type: {', '.join(wrong)}, expected text"
    too_long = [
        f"{key} has {len(record[key]):,} characters, at most {bound:,} allowed"
        for key, bound in (max_chars or {}).items()
        if isinstance(record.get(key), str) and len(record[key]) > bound
    ]
    return f"text too long: {'; '.join(too_long)}" if too_long else ""


HUB_CACHE_REPO_PREFIXES = ("datasets--", "models--")
"""How the Hub cache names a repository's folder (``datasets--OWNER--NAME``)."""


def hub_blob_folder(folder: Path) -> Path | None:
    """The ``blobs/`` folder of the Hub cache repository whose snapshot holds ``folder`` (the snapshot's files are
    links into it, as ``huggingface_hub`` stores them), or None when ``folder`` is not in a Hub snapshot.

    >>> hub_blob_folder(Path("/hub/datasets--ciol-research--SpatiaLab/snapshots/abc123/img"))
    PosixPath('/hub/datasets--ciol-research--SpatiaLab/blobs')
    >>> hub_blob_folder(Path("/data/SpatiaLab/img")) is None
    True
    """
    parts = folder.parts
    for index in range(len(parts) - 2, 0, -1):
        if parts[index] == "snapshots" and parts[index - 1].startswith(HUB_CACHE_REPO_PREFIXES):
            return Path(*parts[:index]) / "blobs"
    return None


def path_escape_problem(path: Path, root: Path) -> str:
    """Why ``path``, a file or folder an input record names, lies outside ``root``, or ``""``. Readers check it
    before they open (or even look for) the file.

    ``path`` must lie inside ``root`` as written (no ``..`` or absolute path out of it) and once resolved
    (symbolic links followed); in a Hub cache snapshot, where every file is a link into the repository's
    ``blobs/`` folder (:func:`hub_blob_folder`), a link may resolve there too.

    >>> path_escape_problem(Path("/data/SpatiaLab/img/../../../etc/passwd"), Path("/data/SpatiaLab"))
    'path escapes its root: /data/SpatiaLab/img/../../../etc/passwd resolves to /etc/passwd, outside /data/SpatiaLab'
    >>> path_escape_problem(Path("/data/SpatiaLab/img/7.png"), Path("/data/SpatiaLab"))
    ''
    """
    try:
        resolved = path.resolve()
        base = root.resolve()
    except (OSError, RuntimeError) as error:  # a symbolic-link loop
        return f"path escapes its root: {path} cannot be resolved inside {root} ({error})"
    written_inside = Path(os.path.abspath(path)).is_relative_to(os.path.abspath(root))
    blobs = hub_blob_folder(base)
    resolved_inside = resolved.is_relative_to(base) or (blobs is not None and resolved.is_relative_to(blobs))
    if written_inside and resolved_inside:
        return ""
    return f"path escapes its root: {path} resolves to {resolved}, outside {root}"


def linked_folder_problem(folder: Path, root: Path, others: Iterable[Path]) -> str:
    """Why ``folder``, a scan folder that is a symbolic link, cannot be listed as a scan of ``root``, or ``""``.

    A linked scan folder is followed only when it resolves strictly inside ``root`` (not to ``root``, an
    ancestor of it or a place outside it) and to a folder that neither is, holds nor lies inside any folder of
    ``others`` (the resolved folders of the root's other scans): a link such as ``scans/scene0004_00 -> .``
    would otherwise be a scan holding the other scans' frames again, and a link to another scan's folder
    would list that scan twice. A link to a real scan folder elsewhere inside the root (a scan kept in
    another folder of the data set) is fine. A folder that is not a link is not checked (``""``).
    """
    if not folder.is_symlink():
        return ""
    problem = path_escape_problem(folder, root)
    if problem:
        return problem
    target, base = folder.resolve(), root.resolve()
    if target == base:
        return f"linked scan folder {folder.name} resolves to its root {root}"
    for other in others:
        if target == other or target.is_relative_to(other) or other.is_relative_to(target):
            return f"linked scan folder {folder.name} resolves to {target}, which is, holds or lies in the scan folder {other}"
    return ""


def listed_scan_folders(folders: Iterable[Path], root: Path, what: str) -> list[Path]:
    """``folders`` (candidate scan folders of ``root``, in order) without the linked ones that
    :func:`linked_folder_problem` refuses; each refused folder is logged as a warning naming it and why.

    Folders that are not links come first: a link is then checked against every real folder and against the
    links kept before it (of two links to one folder, the first in order is kept).
    """
    candidates = list(folders)
    kept_real = [folder.resolve() for folder in candidates if not folder.is_symlink()]
    kept_links: list[Path] = []
    listed = []
    for folder in candidates:
        if folder.is_symlink():
            problem = linked_folder_problem(folder, root, [*kept_real, *kept_links])
            if problem:
                logger.warning("%s scan folder %s refused: %s", what, folder, problem)
                continue
            kept_links.append(folder.resolve())
        listed.append(folder)
    return listed


def image_problem(path: Path | None, record_id: str, root: Path) -> tuple[tuple[dict, int, int] | None, str]:
    """``((cell, width, height), "")`` of an image file, or ``(None, reason)`` when it is missing or corrupt or
    escapes ``root`` (the folder it is relative to; it is then not opened)."""
    escape = path_escape_problem(path, root) if path is not None else ""
    if escape:
        return None, escape
    if path is None or not path.exists():
        return None, f"missing image: {path if path is not None else 'no file for ' + record_id}"
    try:
        return read_image_file(path), ""
    except ImageDecodeError as error:
        return None, f"corrupt image: {error}"


def skip_byte_order_mark(handle: IO[bytes]) -> IO[bytes]:
    """``handle`` (a binary file at its start) moved past a UTF-8 byte-order mark, if the file starts with one."""
    if handle.read(len(codecs.BOM_UTF8)) != codecs.BOM_UTF8:
        handle.seek(0)
    return handle


def load_json(path: Path, log: QuarantineLog) -> Any | None:
    """The JSON value in ``path`` (a byte-order mark accepted), or ``None`` with the file quarantined when it is
    not JSON."""
    try:
        return json.loads(path.read_text(encoding=TEXT_ENCODING))
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
    for number, line in enumerate(path.read_text(encoding=TEXT_ENCODING).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as error:
            log.add(f"line {number}", f"malformed JSON: {error}", source_file=str(path))
    return records
