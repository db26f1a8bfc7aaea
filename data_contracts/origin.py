"""The ``origin`` column of the source tables: whether a row is synthetic or read from a real data set.

The built-in sample world stands in for a kind of source only when no real data set of that kind is
configured (see ``assets.resources.SourcesResource``); this column keeps the two apart in every row.

>>> ORIGINS
('sample_world', 'real')
"""

from __future__ import annotations

import dataframely as dy

SAMPLE_WORLD = "sample_world"
"""Rows read from the built-in synthetic sample world."""
REAL = "real"
"""Rows read from a configured data set."""
ORIGINS = (SAMPLE_WORLD, REAL)


def origin_column(what: str) -> dy.String:
    """The ``origin`` column of a source table whose rows are ``what`` (e.g. 'questions')."""
    return dy.String(
        nullable=False,
        regex="^(?:" + "|".join(ORIGINS) + ")$",
        description=f"Where the {what} come from: 'sample_world' (the built-in synthetic world, used only when "
        "no real data set of this kind is configured) or 'real' (a configured data set).",
    )
