"""The failure check of an online stage: too many failed model requests fail the stage, with one sentence.

An asset that calls a model (object phrases, STVQA generation, pass@2 answering, SFT reasoning) must not
materialise a green, nearly empty table when the endpoint is down, the key is wrong or every answer is
garbage. Each such asset's settings model extends :class:`FailureBudgetSettings`; after its requests the
asset asks :func:`failure_budget_message` about its client's :class:`~model_clients.client.UsageSummary` and, when
the share of failed requests is above ``max_failure_fraction``, fails with that sentence (the Dagster
assets raise ``dagster.Failure``; this package does not import Dagster). Below the threshold the stage
goes on: the failed rows are quarantined and the counts go into the metadata
(:func:`failure_metadata`).

A failed request is a result with ``ok=False``: a transport failure after the retries or a refusal
(400, 401, 403, 404, 422), which are not cached, so a re-run asks them again; or an answer still invalid
after the re-asks (outside the schema, or refused by the request's ``answer_check``), which is cached as
quarantined and asked again only with ``requery_quarantined``. Every good answer is cached, so a re-run
pays only for the failures.

>>> from model_clients.client import UsageSummary
>>> summary = UsageSummary(requests=100, failures=3, transport_failures=3)
>>> failure_budget_message(summary, 0.05, "object_phrases", "phrase_llm") is None
True
>>> summary = UsageSummary(requests=4, failures=4, rejected=4, first_errors=["rejected: HTTP 401: bad key"])
>>> print(failure_budget_message(summary, 0.05, "object_phrases", "phrase_llm"))  # doctest: +ELLIPSIS
object_phrases failed: 4 of 4 model requests failed (100.0%, above max_failure_fraction 5.0%: 4 refused), first errors: rejected: HTTP 401: bad key; fix the phrase_llm resource (base_url, api_key, model) ... pays only for the 4 failed requests.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from model_clients.client import UsageSummary

__all__ = [
    "DEFAULT_MAX_FAILURE_FRACTION",
    "FailureBudgetSettings",
    "failure_budget_message",
    "failure_fraction",
    "failure_metadata",
]

DEFAULT_MAX_FAILURE_FRACTION = 0.05
"""Strict by default: more than 1 failed request in 20 fails the stage."""


class FailureBudgetSettings(BaseModel):
    """The failure threshold of an online stage; the settings models of the online assets extend it.

    >>> FailureBudgetSettings().max_failure_fraction
    0.05
    """

    max_failure_fraction: float = Field(
        default=DEFAULT_MAX_FAILURE_FRACTION,
        ge=0.0,
        le=1.0,
        description="Largest share of this asset's model requests that may fail (endpoint down, refused, "
        "answer invalid after the re-asks) before the asset fails instead of materialising; below it the "
        "failed rows are quarantined and counted in the metadata. 1.0 never fails.",
    )


def failure_fraction(summary: UsageSummary) -> float:
    """Failed requests over requests (0 when there was none).

    >>> failure_fraction(UsageSummary(requests=8, failures=2))
    0.25
    """
    return summary.failures / summary.requests if summary.requests else 0.0


def _breakdown(summary: UsageSummary) -> str:
    parts = [
        f"{summary.transport_failures} transport failures" if summary.transport_failures else "",
        f"{summary.rejected} refused" if summary.rejected else "",
        f"{summary.invalid_responses} invalid answers" if summary.invalid_responses else "",
    ]
    return ", ".join(part for part in parts if part) or f"{summary.failures} failed"


def failure_budget_message(
    summary: UsageSummary, max_failure_fraction: float, stage: str, resource: str
) -> str | None:
    """One sentence saying what failed and how to re-run, when too many requests failed; else None.

    Args:
        summary (`UsageSummary`): the stage's client summary.
        max_failure_fraction (`float`): the stage's threshold (failing when the fraction is above it).
        stage (`str`): the asset, as the sentence names it.
        resource (`str`): the Dagster resource key of the stage's LLM client.
    """
    fraction = failure_fraction(summary)
    if summary.failures == 0 or fraction <= max_failure_fraction:
        return None
    errors = "; ".join(summary.first_errors) or "none recorded"
    requery = (
        f", and answers quarantined as invalid are asked again only with requery_quarantined: true on the "
        f"{resource} resource"
        if summary.invalid_responses
        else ""
    )
    return (
        f"{stage} failed: {summary.failures} of {summary.requests} model requests failed ({fraction:.1%}, above "
        f"max_failure_fraction {max_failure_fraction:.1%}: {_breakdown(summary)}), first errors: {errors}; "
        f"fix the {resource} resource (base_url, api_key, model) or the service and re-run {stage}{requery}: "
        f"the response cache keeps every good answer, so the re-run pays only for the {summary.failures} "
        f"failed requests."
    )


def failure_metadata(summary: UsageSummary, max_failure_fraction: float) -> dict[str, float | int]:
    """The failure counts for an asset's metadata (plain values).

    >>> failure_metadata(UsageSummary(requests=100, failures=3), 0.05)
    {'llm_failure_fraction': 0.03, 'max_failure_fraction': 0.05}
    """
    return {
        "llm_failure_fraction": round(failure_fraction(summary), 4),
        "max_failure_fraction": max_failure_fraction,
    }
