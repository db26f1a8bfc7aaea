"""The spending cap of an :class:`~model_clients.client.LLMClient` (``max_cost_usd``), shared by its two modes.

Every request (sync mode) or submission (batch mode) first holds what it could cost at most
(:meth:`SpendingBudget.reserve`); the hold is released, and what was paid counted, when its answer arrives
(:meth:`SpendingBudget.settle`). Without a budget nothing is held or counted and every hold succeeds.

>>> budget = SpendingBudget(max_cost_usd=1.0)
>>> budget.reserve(0.6), budget.reserve(0.6)
(True, False)
>>> budget.settle(0.6, 0.25)
>>> budget.spent_usd
0.25
"""

from __future__ import annotations

import logging
import threading

from model_clients.estimate import CostEstimate
from model_clients.pricing import format_usd

__all__ = ["BudgetExceededError", "SpendingBudget"]

logger = logging.getLogger(__name__)


class BudgetExceededError(RuntimeError):
    """A request or batch could take the client's spend past ``max_cost_usd``; raised before it is sent.

    Raised before the first request when the stage's upper bound is above the budget, and during a run before
    the request or batch that could pass it (the answers already paid are in the response cache). The message
    is one sentence giving what was spent, the estimate and the budget, and how to go on; `estimate` holds the
    figures and `spent_usd` what this client had spent.
    """

    def __init__(self, message: str, estimate: CostEstimate, spent_usd: float = 0.0) -> None:
        super().__init__(message)
        self.estimate = estimate
        self.spent_usd = spent_usd


class SpendingBudget:
    """What a client has paid and holds of its budget; thread-safe (the sync mode's workers share it).

    Args:
        max_cost_usd (`float`, *optional*): the cap in US dollars; None for no budget (nothing is counted).
        log (`logging.Logger`, *optional*): where a stop is logged; this module's logger by default.

    Attributes:
        stage_estimate (`CostEstimate`, *optional*): the estimate the budget was last checked against before a
            stage's first request (None before); named in the stop messages.
    """

    def __init__(self, max_cost_usd: float | None, log: logging.Logger | None = None) -> None:
        self.max_cost_usd = max_cost_usd
        self.stage_estimate: CostEstimate | None = None
        self._log = log or logger
        self._lock = threading.Lock()
        self._spent_usd = 0.0
        self._reserved_usd = 0.0

    @property
    def spent_usd(self) -> float:
        """What has been paid so far (answers received), in US dollars; counted under a budget only."""
        with self._lock:
            return self._spent_usd

    def reserve(self, amount: float) -> bool:
        """Hold `amount` of the budget for a request or batch about to be sent; False when it could pass the cap."""
        if self.max_cost_usd is None:
            return True
        with self._lock:
            if self._spent_usd + self._reserved_usd + amount > self.max_cost_usd:
                return False
            self._reserved_usd += amount
            return True

    def settle(self, reserved: float, paid: float) -> None:
        """Release a reservation and count what was paid (under a budget)."""
        if self.max_cost_usd is None:
            return
        with self._lock:
            self._reserved_usd = max(self._reserved_usd - reserved, 0.0)
            self._spent_usd += paid

    def stop_message(self, label: str, what: str, amount: float) -> str:
        """The one sentence of a stop before `what` (which could cost up to `amount`) could pass the budget."""
        spent = self.spent_usd
        stage = self.stage_estimate
        estimated = (
            f" (the stage was estimated at up to {format_usd(stage.upper_bound_usd)})" if stage else ""
        )
        return (
            f"{label} stopped before {what} that could cost up to {format_usd(amount)} (estimated prompts and their "
            f"whole max_tokens): {format_usd(spent)} spent so far{estimated}, so it could pass max_cost_usd "
            f"{format_usd(self.max_cost_usd or 0.0)}; the answers already paid stay in the response cache, so "
            f"raising max_cost_usd on the LLM resource and running again pays only for the rest."
        )

    def exceeded(self, message: str) -> BudgetExceededError:
        """The error to raise for a stop (`message` from :meth:`stop_message`), logged once here."""
        self._log.error(message)
        return BudgetExceededError(message, self.stage_estimate or CostEstimate(), self.spent_usd)
