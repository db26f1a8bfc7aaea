"""Apply a contract to a frame: keep the valid rows, explain the rest.

>>> import polars as pl
>>> from data_contracts.quarantine import Quarantine
>>> frame = pl.DataFrame({"source_asset": ["a"], "record_id": ["1"], "source_file": [None],
...                       "reason": ["bad"], "payload_json": [None]}, schema=polars_schema(Quarantine))
>>> report = check_frame(frame, Quarantine)
>>> report.passed, report.num_valid
(True, 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import dataframely as dy
import polars as pl
from polars.exceptions import InvalidOperationError


def polars_schema(contract: type[dy.Schema]) -> pl.Schema:
    """The exact polars schema of a contract's table."""
    return contract.create_empty().schema


@dataclass
class ContractReport:
    """The outcome of checking a frame against a contract."""

    contract: str
    num_rows: int
    num_valid: int
    failure_counts: dict[str, int] = field(default_factory=dict)
    missing_columns: list[str] = field(default_factory=list)
    extra_columns: list[str] = field(default_factory=list)
    type_mismatches: dict[str, str] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        """True when the frame has the contract's columns and every row is valid."""
        return (
            not self.missing_columns
            and not self.type_mismatches
            and not self.extra_columns
            and self.num_valid == self.num_rows
        )

    def as_metadata(self) -> dict[str, Any]:
        """Plain values for asset-check metadata."""
        return {
            "contract": self.contract,
            "num_rows": self.num_rows,
            "num_valid": self.num_valid,
            "failure_counts": dict(self.failure_counts),
            "missing_columns": list(self.missing_columns),
            "extra_columns": list(self.extra_columns),
            "type_mismatches": dict(self.type_mismatches),
        }


def _schema_differences(
    frame: pl.DataFrame, contract: type[dy.Schema]
) -> tuple[list[str], list[str], dict[str, str]]:
    expected = polars_schema(contract)
    missing = [name for name in expected if name not in frame.schema]
    extra = [name for name in frame.schema if name not in expected]
    mismatches = {
        name: f"expected {expected[name]}, found {frame.schema[name]}"
        for name in expected
        if name in frame.schema and frame.schema[name] != expected[name]
    }
    return missing, extra, mismatches


def check_frame(frame: pl.DataFrame, contract: type[dy.Schema]) -> ContractReport:
    """Check ``frame`` against ``contract`` without changing it."""
    missing, extra, mismatches = _schema_differences(frame, contract)
    report = ContractReport(
        contract=contract.__name__,
        num_rows=frame.height,
        num_valid=0,
        missing_columns=missing,
        extra_columns=extra,
        type_mismatches=mismatches,
    )
    if missing or mismatches:
        return report
    valid, failures = contract.filter(frame.select(list(polars_schema(contract))))
    report.num_valid = valid.height
    report.failure_counts = {rule: count for rule, count in failures.counts().items() if count}
    return report


def split_valid(
    frame: pl.DataFrame, contract: type[dy.Schema]
) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, int]]:
    """Split ``frame`` into contract-valid rows (cast to the contract's types) and invalid rows.

    Returns ``(valid, invalid, failure_counts)``; ``invalid`` carries a ``reason`` column naming the
    rules each row broke. Raises ``ValueError`` when columns are missing or cannot be cast, which is a
    bug in the producing code rather than bad input.
    """
    missing, _, _ = _schema_differences(frame, contract)
    if missing:
        raise ValueError(f"frame for {contract.__name__} lacks columns {missing}")
    try:
        selected = frame.select(list(polars_schema(contract))).cast(polars_schema(contract))
    except InvalidOperationError as error:
        raise ValueError(f"frame for {contract.__name__} has columns of the wrong type: {error}") from error
    valid, failures = contract.filter(selected)
    invalid = failures.invalid()
    details = failures.details()
    rule_columns = [name for name in details.columns if name not in invalid.columns]
    if invalid.height and rule_columns:
        reasons = details.select(
            pl.concat_str(
                [pl.when(pl.col(rule) == "invalid").then(pl.lit(rule)) for rule in rule_columns],
                separator=", ",
                ignore_nulls=True,
            ).alias("reason")
        )
        invalid = invalid.with_columns(reasons["reason"])
    else:
        invalid = invalid.with_columns(pl.lit("contract violation").alias("reason"))
    counts = {rule: count for rule, count in failures.counts().items() if count}
    return valid, invalid, counts
