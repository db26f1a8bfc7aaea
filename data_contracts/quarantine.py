"""Contract for the ``*_quarantine`` tables: one row per rejected input record, with the reason.

Every stage that reads untrusted input (raw files, model responses) keeps its valid rows and sends
each bad one here: which asset rejected it, the record's id, the file it came from, why, and the
record itself as JSON so nothing is lost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import dataframely as dy
import polars as pl

CONTRACT_VERSION = "1.0.0"


class Quarantine(dy.Schema):
    """A rejected record."""

    source_asset = dy.String(
        nullable=False,
        description="The asset (or stage) that rejected the record, e.g. 'mcq_questions', 'rgbd_frames', "
        "'stvqa_validated'.",
    )
    record_id = dy.String(
        nullable=False,
        description="Id of the rejected record as text, in the rejecting stage's terms (question id, image id, "
        "'<scene>/<frame>', 'line <n>' of a file, a file name); '?' when the record has none.",
    )
    source_file = dy.String(
        nullable=True,
        description="File the record came from (raw file, image, or the upstream table's location); null when "
        "no file is known (e.g. a model's answer).",
    )
    reason = dy.String(
        nullable=False,
        min_length=1,
        description="Why it was rejected, '<kind>: <detail>' (e.g. 'missing image: <path>', 'contract violation: "
        "<rules>'); the text before the first ':' is the kind counted in the metadata's reasons.",
    )
    payload_json = dy.String(
        nullable=True,
        description="The rejected record itself as JSON (sorted keys, non-JSON values as text; the stages "
        "leave image bytes out), so nothing is lost; null when there is no record to keep.",
    )


@dataclass
class QuarantineLog:
    """Collects rejected records of one asset run.

    >>> log = QuarantineLog("mcq_questions")
    >>> log.add("17_0", "answer index 5 out of range for 4 options", source_file="data.json", payload={"answer": 5})
    >>> log.to_frame().height
    1
    """

    source_asset: str
    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(
        self, record_id: Any, reason: str, *, source_file: str | None = None, payload: Any = None
    ) -> None:
        """Record one rejected item."""
        self.rows.append(
            {
                "source_asset": self.source_asset,
                "record_id": str(record_id),
                "source_file": None if source_file is None else str(source_file),
                "reason": reason,
                "payload_json": None if payload is None else json.dumps(payload, default=str, sort_keys=True),
            }
        )

    def extend(self, other: QuarantineLog) -> None:
        """Append another log's rows."""
        self.rows.extend(other.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def reason_counts(self) -> dict[str, int]:
        """How many records were rejected for each reason kind (text before the first ':')."""
        counts: dict[str, int] = {}
        for row in self.rows:
            kind = row["reason"].split(":", 1)[0]
            counts[kind] = counts.get(kind, 0) + 1
        return counts

    def to_frame(self) -> pl.DataFrame:
        """The rejected records as a frame under the :class:`Quarantine` contract."""
        return pl.DataFrame(self.rows, schema=Quarantine.create_empty().schema)
