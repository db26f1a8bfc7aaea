"""Per-model token prices and the cost of a call, at the standard and at the batch price.

Prices are US dollars per million tokens, looked up by model name (:func:`find_price`): the name itself,
else the name without its snapshot date (``gpt-4o-mini-2024-07-18`` and ``claude-sonnet-4-20250514`` find
``gpt-4o-mini`` and ``claude-sonnet-4``), so a snapshot with its own price has its own entry
(``gpt-4o-2024-05-13``: $5 / $15) and a name the table does not hold (``gpt-4.1-mini`` when only
``gpt-4.1`` is listed, a local model) has no price rather than a relative's. The defaults are the providers'
list prices for uncached input: the standard (synchronous) price, and the price of the Batch APIs (OpenAI's
Batch API and Anthropic's Message Batches, half the standard price). Override or add entries in the
resource's ``price_table``; a client with a budget (``max_cost_usd``) refuses a model without a price.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from model_clients.records import TokenUsage

__all__ = [
    "BATCH_DISCOUNT",
    "DEFAULT_PRICE_TABLE",
    "PRICE_FIELDS",
    "ModelPrice",
    "cost_usd",
    "find_price",
    "format_usd",
    "undated_model_name",
]

BATCH_DISCOUNT = 0.5
"""Batch price over standard price when a table entry gives no batch price (both providers: half)."""


@dataclass(frozen=True)
class ModelPrice:
    """List price of a model, in US dollars per million tokens.

    The batch prices default to :data:`BATCH_DISCOUNT` times the standard ones.

    Example:
        >>> ModelPrice(2.50, 10.00).batch_output_usd_per_million
        5.0
    """

    input_usd_per_million: float
    output_usd_per_million: float
    batch_input_usd_per_million: float | None = None
    batch_output_usd_per_million: float | None = None

    def __post_init__(self) -> None:
        if self.batch_input_usd_per_million is None:
            object.__setattr__(
                self, "batch_input_usd_per_million", self.input_usd_per_million * BATCH_DISCOUNT
            )
        if self.batch_output_usd_per_million is None:
            object.__setattr__(
                self, "batch_output_usd_per_million", self.output_usd_per_million * BATCH_DISCOUNT
            )

    def per_million(self, batch: bool = False) -> tuple[float, float]:
        """(input, output) USD per million tokens at the standard or the batch price."""
        if batch:
            batch_input, batch_output = self.batch_input_usd_per_million, self.batch_output_usd_per_million
            assert batch_input is not None and batch_output is not None  # __post_init__ fills both
            return float(batch_input), float(batch_output)
        return self.input_usd_per_million, self.output_usd_per_million


DEFAULT_PRICE_TABLE: Mapping[str, ModelPrice] = {
    "gpt-4o-mini": ModelPrice(0.15, 0.60, 0.075, 0.30),
    "gpt-4o": ModelPrice(2.50, 10.00, 1.25, 5.00),
    "gpt-4o-2024-05-13": ModelPrice(5.00, 15.00, 2.50, 7.50),
    "gpt-4.1": ModelPrice(2.00, 8.00, 1.00, 4.00),
    "gpt-4.1-mini": ModelPrice(0.40, 1.60, 0.20, 0.80),
    "gpt-4.1-nano": ModelPrice(0.10, 0.40, 0.05, 0.20),
    "o3-mini": ModelPrice(1.10, 4.40, 0.55, 2.20),
    "o4-mini": ModelPrice(1.10, 4.40, 0.55, 2.20),
    "claude-sonnet-4": ModelPrice(3.00, 15.00, 1.50, 7.50),
    "claude-3-7-sonnet": ModelPrice(3.00, 15.00, 1.50, 7.50),
    "claude-3-5-sonnet": ModelPrice(3.00, 15.00, 1.50, 7.50),
    "claude-3-5-haiku": ModelPrice(0.80, 4.00, 0.40, 2.00),
    "claude-opus-4": ModelPrice(15.00, 75.00, 7.50, 37.50),
}
"""List prices (USD per million uncached input / output tokens; batch: half)."""
PRICE_FIELDS = "input_usd_per_million, output_usd_per_million"
"""The fields of a price entry a user must set (the batch prices default to half)."""
_SNAPSHOT_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


def undated_model_name(model: str) -> str:
    """The model name without its snapshot date (``-2024-07-18``, ``-20250514``) or ``-latest``.

    Example:
        >>> undated_model_name("claude-sonnet-4-20250514"), undated_model_name("gpt-4o-2024-08-06")
        ('claude-sonnet-4', 'gpt-4o')
    """
    return _SNAPSHOT_SUFFIX.sub("", model)


def find_price(model: str, price_table: Mapping[str, ModelPrice]) -> ModelPrice | None:
    """The price of `model`: its own entry, else the entry of its name without the snapshot date, else None.

    Example:
        >>> find_price("gpt-4o-mini-2024-07-18", DEFAULT_PRICE_TABLE).input_usd_per_million
        0.15
        >>> find_price("gpt-4o-2024-05-13", DEFAULT_PRICE_TABLE).input_usd_per_million
        5.0
        >>> find_price("gpt-4o-2024-08-06", DEFAULT_PRICE_TABLE).input_usd_per_million
        2.5
        >>> find_price("my-local-model", DEFAULT_PRICE_TABLE) is None
        True
    """
    if model in price_table:
        return price_table[model]
    return price_table.get(undated_model_name(model))


def cost_usd(usage: TokenUsage, price: ModelPrice | None, batch: bool = False) -> float:
    """Dollar cost of `usage` at `price` (0.0 for an unpriced model), at the batch price when `batch`.

    Example:
        >>> round(cost_usd(TokenUsage(1_000_000, 500_000), ModelPrice(2.5, 10.0)), 6)
        7.5
        >>> round(cost_usd(TokenUsage(1_000_000, 500_000), ModelPrice(2.5, 10.0), batch=True), 6)
        3.75
    """
    if price is None:
        return 0.0
    input_price, output_price = price.per_million(batch)
    return (usage.prompt_tokens * input_price + usage.completion_tokens * output_price) / 1_000_000


def format_usd(amount: float) -> str:
    """Dollars for a sentence: cents above a dollar, else two significant digits (never "$0.00" for a cost).

    Example:
        >>> format_usd(600), format_usd(1.2345), format_usd(0.0351), format_usd(0.000123), format_usd(0)
        ('$600.00', '$1.23', '$0.035', '$0.00012', '$0')
    """
    if amount <= 0:
        return "$0"
    if amount >= 1:
        return f"${amount:,.2f}"
    decimals = 1 - math.floor(math.log10(amount))
    return f"${amount:.{decimals}f}"
