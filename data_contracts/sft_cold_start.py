"""Contract for ``sft_cold_start``: the SFT cold-start set (SpatialCORE appendix A.4).

The ``spatialcore_train`` columns of the selected training rows (1,000 by default, seeded), plus the
target ``completion``: the pseudo-GT bbox lines in the model family's coordinate convention, a
reasoning trace, ``</think>`` and the gold letter, exactly what the SpatialCORE reward parses.
``reasoning_backend`` says where the trace came from (``template``, or ``<provider>/<model>``).

>>> "completion" in SftColdStart.columns()
True
"""

from __future__ import annotations

import dataframely as dy
import polars as pl

from data_contracts.spatialcore_train import SpatialcoreTrain

CONTRACT_VERSION = "1.0.0"


class SftColdStart(SpatialcoreTrain):
    """A training row with its target completion."""

    completion = dy.String(nullable=False, min_length=1)
    model_family = dy.String(nullable=False)
    reasoning_backend = dy.String(nullable=False)

    @dy.rule()
    def completion_closes_the_reasoning_once(cls) -> pl.Expr:
        """The completion closes `<think>` exactly once and ends with the gold letter."""
        closes = cls.completion.col.str.count_matches("</think>", literal=True) == 1
        return closes & cls.completion.col.str.ends_with(cls.answer.col)
