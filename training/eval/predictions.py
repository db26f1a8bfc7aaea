"""Resumable prediction cache: completions keyed by model, adapter, benchmark and item.

Layout: ``<root>/<run key>/<benchmark>.jsonl``, one JSON object per line, appended and flushed as
each answer arrives (safe from several threads), so a run that is interrupted continues where it
stopped and a finished run costs nothing to score again. The run key is readable (model and adapter
names) plus a short hash of everything that changes the completions (model, adapter, backend, the
API endpoint, output format, model family, generation settings). Each line also carries the hash of
the exact prompt; an entry whose prompt changed is not reused. A half-written last line (a killed
process) is skipped with a warning.

>>> import tempfile
>>> with tempfile.TemporaryDirectory() as folder:
...     cache = PredictionCache(folder, RunKey(model="Qwen/Qwen3-VL-8B-Thinking", adapter=None, settings={"max_new_tokens": 64}))
...     cache.add("omnispatial", [CachedPrediction("q1", "p1", "</think>A", "stop", 3)])
...     reopened = PredictionCache(folder, cache.run_key)
...     reopened.get("omnispatial", "q1", "p1").completion
'</think>A'
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def slug(text: str, limit: int = 60) -> str:
    """A file-name-safe version of ``text``.

    >>> slug("Qwen/Qwen3-VL-8B Thinking")
    'Qwen_Qwen3-VL-8B_Thinking'
    """
    cleaned = _UNSAFE.sub("_", text.strip()).strip("_.")
    return (cleaned or "none")[:limit]


def content_hash(value: Any, length: int = 16) -> str:
    """A stable SHA-256 hex prefix of a JSON-serialisable value (keys sorted; never Python's salted ``hash``).

    >>> content_hash({"b": 1, "a": 2}) == content_hash({"a": 2, "b": 1})
    True
    """
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


@dataclass(frozen=True)
class RunKey:
    """What identifies a set of completions: the model, its adapter and the settings that shape outputs.

    Args:
        model (`str`): model name or path.
        adapter (`str`, *optional*): LoRA adapter path.
        settings (`dict`): backend, output format, family, generation settings...
    """

    model: str
    adapter: str | None
    settings: dict = field(default_factory=dict)

    @property
    def folder_name(self) -> str:
        """``<model>__<adapter>__<hash>``."""
        model_name = slug(Path(self.model).name or self.model)
        adapter_name = slug(Path(self.adapter).name) if self.adapter else "base"
        digest = content_hash({"model": self.model, "adapter": self.adapter, "settings": self.settings}, 10)
        return f"{model_name}__{adapter_name}__{digest}"


@dataclass(frozen=True)
class CachedPrediction:
    """One cached completion.

    Attributes:
        item_id: the benchmark item.
        prompt_hash: hash of the exact prompt (messages and image bytes) that produced it.
        completion: the completion text.
        finish_reason: ``"stop"`` or ``"length"``.
        completion_tokens: number of generated tokens.
        created: Unix time when it was written.
    """

    item_id: str
    prompt_hash: str
    completion: str
    finish_reason: str | None
    completion_tokens: int | None
    created: float = 0.0


class PredictionCache:
    """Append-only JSONL cache of completions for one run key.

    Args:
        root (`str` or `Path`): the cache root (``<output>/predictions``).
        run_key ([`RunKey`]): the run the completions belong to.
    """

    def __init__(self, root: str | Path, run_key: RunKey):
        self.run_key = run_key
        self.folder = Path(root) / run_key.folder_name
        self._entries: dict[str, dict[str, CachedPrediction]] = {}
        self._lock = threading.RLock()

    def _file(self, benchmark: str) -> Path:
        return self.folder / f"{slug(benchmark)}.jsonl"

    def _load(self, benchmark: str) -> dict[str, CachedPrediction]:
        if benchmark in self._entries:
            return self._entries[benchmark]
        entries: dict[str, CachedPrediction] = {}
        path = self._file(benchmark)
        if path.is_file():
            lines = path.read_text(encoding="utf-8").splitlines()
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    entry = CachedPrediction(**record)
                except (json.JSONDecodeError, TypeError) as error:
                    logger.warning("skipping unreadable line %d of %s (%s)", number, path, error)
                    continue
                entries[entry.item_id] = entry
        self._entries[benchmark] = entries
        return entries

    def get(self, benchmark: str, item_id: str, prompt_hash: str) -> CachedPrediction | None:
        """The cached completion of an item for exactly this prompt, or ``None``."""
        with self._lock:
            entry = self._load(benchmark).get(item_id)
        return entry if entry is not None and entry.prompt_hash == prompt_hash else None

    def add(self, benchmark: str, predictions: Iterable[CachedPrediction]) -> None:
        """Append predictions and flush them to disk at once (callers may be on several threads)."""
        with self._lock:
            self._append(benchmark, predictions)

    def _append(self, benchmark: str, predictions: Iterable[CachedPrediction]) -> None:
        entries = self._load(benchmark)
        path = self._file(benchmark)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as handle:
            for prediction in predictions:
                stamped = (
                    prediction
                    if prediction.created
                    else CachedPrediction(**{**asdict(prediction), "created": time.time()})
                )
                handle.write(json.dumps(asdict(stamped), ensure_ascii=False) + "\n")
                entries[stamped.item_id] = stamped
            handle.flush()

    def count(self, benchmark: str) -> int:
        """Number of items with a cached completion for ``benchmark``."""
        return len(self._load(benchmark))

    def write_manifest(self) -> Path:
        """Write ``run.json`` (model, adapter, settings) beside the cached completions."""
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / "run.json"
        path.write_text(
            json.dumps(asdict(self.run_key), indent=2, sort_keys=True, default=str), encoding="utf-8"
        )
        return path
