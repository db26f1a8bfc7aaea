"""The opt-in publishing asset: ``hub_dataset`` pushes built tables to a Hugging Face Hub dataset repo.

A thin asset over :func:`publishing.hub.publish` (the same code as ``spatial-publish``), configured in the
launchpad under the op ``hub_dataset_asset``: ``repo_id``, ``tables``, ``private``, ``create_pr`` (and
``revision``, ``accept_source_terms``, ``force``). It depends on every publishable table (and ``mcq_images``, whose images the published ``mcq_questions``
embed), so the UI shows it downstream of the tables it waits on,
and it is in no default job, no automation and not in ``spatial-build``: it runs only when launched
(``publish_job``, or materialized from the UI). Its materialization shows the repo and commit (or pull
request) URLs, the tables' data versions and the card as a Markdown preview. The token is read from the
environment variable ``token_env`` names (``HF_TOKEN`` by default, else the cached login) when the step
runs, and is never written into the run's config, logs or metadata. A refusal fails the step with the
refusal's one sentence.
"""

import os
from typing import Any

import dagster as dg
from pydantic import Field

from assets.resources import StorageResource
from publishing.hub import publish
from publishing.tables import PUBLISHABLE, PublishError

SHARING_GROUP = "sharing"

PUBLISHED_FROM = [
    *PUBLISHABLE,
    *sorted({table.images_from for table in PUBLISHABLE.values() if table.images_from} - set(PUBLISHABLE)),
]
"""The tables ``hub_dataset`` waits on: every publishable table and the image tables whose images they embed."""


class HubDatasetConfig(dg.Config):
    """Where and what ``hub_dataset`` publishes."""

    repo_id: str = Field(description="The dataset repo, OWNER/NAME (created when missing).")
    tables: list[str] = Field(
        default_factory=lambda: ["stvqa", "spatialcore_train", "sft_cold_start", "dge_tasks"],
        description=f"Tables to publish, one config each: any of {', '.join(PUBLISHABLE)}.",
    )
    private: bool = Field(default=False, description="Create the repo private (when it is new).")
    create_pr: bool = Field(default=False, description="Open a pull request instead of writing the branch.")
    revision: str | None = Field(default=None, description="Branch to publish to (default main).")
    accept_source_terms: list[str] = Field(
        default_factory=list,
        description="Sources whose terms restrict redistribution that you may publish anyway (e.g. scannet).",
    )
    force: bool = Field(
        default=False, description="Replace a table published under an incompatible contract."
    )
    token_env: str = Field(
        default="HF_TOKEN", description="Environment variable holding the Hub token (else the cached login)."
    )
    endpoint: str | None = Field(
        default=None, description="Hub endpoint; default the library's (HF_ENDPOINT)."
    )


@dg.multi_asset(
    name="hub_dataset_asset",
    specs=[
        dg.AssetSpec(
            "hub_dataset",
            group_name=SHARING_GROUP,
            deps=[dg.AssetKey(name) for name in PUBLISHED_FROM],
            kinds={"huggingface"},
            description="The configured tables published to a Hugging Face Hub dataset repo, with a card (opt-in).",
        )
    ],
)
def hub_dataset(
    context: dg.AssetExecutionContext, config: HubDatasetConfig, storage: StorageResource
) -> dg.MaterializeResult:
    """Publish the configured tables; metadata: repo and commit URLs, data versions, the card."""
    try:
        result = publish(
            config.tables,
            config.repo_id,
            storage_root=storage.path,
            private=config.private,
            create_pr=config.create_pr,
            revision=config.revision,
            accept_source_terms=config.accept_source_terms,
            force=config.force,
            endpoint=config.endpoint,
            token=os.environ.get(config.token_env) or None,
        )
    except PublishError as error:
        raise dg.Failure(description=str(error), allow_retries=False) from None
    context.log.info(result.message)
    metadata: dict[str, Any] = {
        "repo_url": dg.MetadataValue.url(result.repo_url),
        "committed": result.committed,
        "message": result.message,
        "data_versions": dg.MetadataValue.json(result.tables),
        "card": dg.MetadataValue.md(result.card),
    }
    if result.commit_url:
        metadata["commit_url"] = dg.MetadataValue.url(result.commit_url)
    if result.pull_request_url:
        metadata["pull_request_url"] = dg.MetadataValue.url(result.pull_request_url)
    return dg.MaterializeResult(asset_key="hub_dataset", metadata=metadata)


SHARING_ASSETS = [hub_dataset]
