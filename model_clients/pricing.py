"""Per-model token prices and the cost of a call.

Prices are US dollars per million tokens, looked up by the longest model-name prefix in the table,
so dated snapshots (``gpt-4o-mini-2024-07-18``, ``claude-sonnet-4-20250514``) find their family's
price and ``gpt-4o-mini`` is not priced as ``gpt-4o``. The defaults are the providers' list prices
for standard (non-batch, uncached-input) calls; override them in the resource's ``price_table``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from model_clients.records import TokenUsage

__all__ = ["DEFAULT_PRICE_TABLE", "ModelPrice", "cost_usd", "find_price"]


@dataclass(frozen=True)
class ModelPrice:
    """List price of a model, in US dollars per million tokens."""

    input_usd_per_million: float
    output_usd_per_million: float


DEFAULT_PRICE_TABLE: Mapping[str, ModelPrice] = {
    "gpt-4o-mini": ModelPrice(0.15, 0.60),
    "gpt-4o": ModelPrice(2.50, 10.00),
    "claude-sonnet-4": ModelPrice(3.00, 15.00),
}


def find_price(model: str, price_table: Mapping[str, ModelPrice]) -> ModelPrice | None:
    """The price of `model`: an exact entry, else the longest table key that prefixes the name.

    Example:
        >>> find_price("gpt-4o-mini-2024-07-18", DEFAULT_PRICE_TABLE)
        ModelPrice(input_usd_per_million=0.15, output_usd_per_million=0.6)
        >>> find_price("my-local-model", DEFAULT_PRICE_TABLE) is None
        True
    """
    if model in price_table:
        return price_table[model]
    prefixes = [name for name in price_table if model.startswith(name)]
    if not prefixes:
        return None
    return price_table[max(prefixes, key=len)]


def cost_usd(usage: TokenUsage, price: ModelPrice | None) -> float:
    """Dollar cost of `usage` at `price` (0.0 for an unpriced model).

    Example:
        >>> round(cost_usd(TokenUsage(1_000_000, 500_000), ModelPrice(2.5, 10.0)), 6)
        7.5
    """
    if price is None:
        return 0.0
    return (
        usage.prompt_tokens * price.input_usd_per_million
        + usage.completion_tokens * price.output_usd_per_million
    ) / 1_000_000
