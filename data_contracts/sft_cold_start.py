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

    completion = dy.String(
        nullable=False,
        min_length=1,
        description="Target completion after the opened '<think>': one JSON line {\"bbox_2d\": [x1, y1, x2, "
        'y2], "label": ...} per pseudo-GT box in model_family\'s coordinate convention, the reasoning trace, '
        "'</think>' exactly once, a blank line and the gold letter; exactly what the SpatialCORE reward parses.",
    )
    model_family = dy.String(
        nullable=False,
        description="Coordinate convention of the bbox lines: 'qwen3_vl' / 'qwen2_vl' (0..1000 grid, the "
        "default), 'qwen2_5_vl' (pixels of the resized input) or 'original_pixels'.",
    )
    reasoning_backend = dy.String(
        nullable=False,
        description="Where the reasoning trace came from: 'template' (written from the boxes' positions) or "
        "'<provider>/<model>/sft_reasoning@<prompt version>' for an LLM.",
    )

    @dy.rule()
    def completion_closes_the_reasoning_once(cls) -> pl.Expr:
        """The completion closes `<think>` exactly once and ends with the gold letter."""
        closes = cls.completion.col.str.count_matches("</think>", literal=True) == 1
        return closes & cls.completion.col.str.ends_with(cls.answer.col)
