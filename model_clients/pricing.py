"""Per-model token prices and the cost of a call, at the standard and at the batch price.

Prices are US dollars per million tokens, looked up by the longest model-name prefix in the table,
so dated snapshots (``gpt-4o-mini-2024-07-18``, ``claude-sonnet-4-20250514``) find their family's
price and ``gpt-4o-mini`` is not priced as ``gpt-4o``. The defaults are the providers' list prices
for uncached input: the standard (synchronous) price, and the price of the Batch APIs (OpenAI's Batch
API and Anthropic's Message Batches, half the standard price). Override them in the resource's
``price_table``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from model_clients.records import TokenUsage

__all__ = ["BATCH_DISCOUNT", "DEFAULT_PRICE_TABLE", "ModelPrice", "cost_usd", "find_price"]

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
            return float(self.batch_input_usd_per_million), float(self.batch_output_usd_per_million)
        return self.input_usd_per_million, self.output_usd_per_million


DEFAULT_PRICE_TABLE: Mapping[str, ModelPrice] = {
    "gpt-4o-mini": ModelPrice(0.15, 0.60, 0.075, 0.30),
    "gpt-4o": ModelPrice(2.50, 10.00, 1.25, 5.00),
    "claude-sonnet-4": ModelPrice(3.00, 15.00, 1.50, 7.50),
}


def find_price(model: str, price_table: Mapping[str, ModelPrice]) -> ModelPrice | None:
    """The price of `model`: an exact entry, else the longest table key that prefixes the name.

    Example:
        >>> find_price("gpt-4o-mini-2024-07-18", DEFAULT_PRICE_TABLE).input_usd_per_million
        0.15
        >>> find_price("my-local-model", DEFAULT_PRICE_TABLE) is None
        True
    """
    if model in price_table:
        return price_table[model]
    prefixes = [name for name in price_table if model.startswith(name)]
    if not prefixes:
        return None
    return price_table[max(prefixes, key=len)]


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
