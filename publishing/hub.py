"""Publish built tables to one Hugging Face Hub dataset repo, through ``huggingface_hub``'s commit API.

:func:`publish` does, in order (each refusal is a :class:`~publishing.tables.PublishError`, one sentence):

1. the token: ``HF_TOKEN`` or the cached login (``huggingface_hub.get_token``), checked with ``whoami``;
   never logged, printed or written anywhere;
2. the tables: publishable, built, not empty, embedding their images; their sources' terms
   (:mod:`publishing.terms`);
3. the repo's ``provenance.json`` at the revision: a table whose published contract version has another major
   version is refused unless ``force``; when every named table's data version equals the published one,
   nothing is committed;
4. the shards, the card and ``provenance.json`` written to a local folder (streamed, contract-checked); the
   repo (``private`` as asked) and the branch created when missing; then one commit whose message names the
   tables and their data versions, on the revision or as a pull request.

The shards go up (git-lfs or Xet, as the Hub answers) before the commit is created, and the commit moves
the branch in one step: a publication killed or failed before that leaves the repo at its previous commit.
The endpoint is the library's (``HF_ENDPOINT``) unless ``endpoint`` is given.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data_contracts.storage import resolve_storage_root
from publishing.card import MANIFEST_PATH, manifest_json, new_manifest, render_card, table_entry
from publishing.facts import column_counts, llm_uses, table_facts, uses_coco_boxes
from publishing.tables import DEFAULT_MAX_SHARD_BYTES, LocalTable, PublishError, inspect_table, write_shards
from publishing.terms import check_terms, sources_of

logger = logging.getLogger(__name__)

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass
class PublishResult:
    """What a publication did (or, for a dry run, would do)."""

    repo_id: str
    repo_url: str
    committed: bool
    message: str
    tables: dict[str, str]
    """Data version per table named."""
    card: str
    files: list[tuple[str, int]] = field(default_factory=list)
    commit_url: str | None = None
    pull_request_url: str | None = None
    folder: Path | None = None


def major(version: str | None) -> int | None:
    """The major number of a ``MAJOR.MINOR.PATCH`` version (None when there is none).

    >>> major("1.1.0"), major(None)
    (1, None)
    """
    return int(version.split(".")[0]) if version else None


def check_contracts(local: Iterable[LocalTable], published: dict[str, Any], force: bool) -> None:
    """Refuse a table whose published contract version has another major version than the local one."""
    for table in local:
        entry = (published.get("tables") or {}).get(table.name)
        if entry is None or force:
            continue
        if major(entry.get("contract_version")) != major(table.contract_version):
            raise PublishError(
                f"the repo's {table.name!r} has contract version {entry.get('contract_version')}, incompatible "
                f"with the local {table.contract_version}: publish to another repo, or replace it with --force."
            )


def _hub_api(endpoint: str | None, token: str | None):
    from huggingface_hub import HfApi, get_token

    token = token or get_token()
    if not token:
        raise PublishError(
            "no Hugging Face token: set HF_TOKEN or log in with `hf auth login` (a token with write access)."
        )
    return HfApi(endpoint=endpoint, token=token, library_name="spatial-grounding")


def _check_access(api, create_pr: bool) -> str:
    from huggingface_hub.errors import HfHubHTTPError

    try:
        identity = api.whoami()
    except HfHubHTTPError as error:
        status = error.response.status_code if error.response is not None else "?"
        raise PublishError(
            f"the Hub at {api.endpoint} refused the token (HTTP {status}): use a valid token."
        ) from error
    role = ((identity.get("auth") or {}).get("accessToken") or {}).get("role")
    if role == "read" and not create_pr:
        raise PublishError(
            f"the token of {identity.get('name')} has read access only: publishing needs a token with write access (or --create-pr)."
        )
    return str(identity.get("name"))


def _head(api, repo_id: str, revision: str | None) -> tuple[bool, str | None]:
    """Whether the repo exists, and the commit the revision points at (None: no repo, or no such branch)."""
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    try:
        return True, api.repo_info(repo_id, repo_type="dataset", revision=revision).sha
    except RevisionNotFoundError:
        return True, None
    except RepositoryNotFoundError:
        return False, None


def _create(api, repo_id: str, exists: bool, private: bool, revision: str | None) -> str | None:
    """Create the repo and the branch that are missing; the commit the revision then points at."""
    from huggingface_hub.errors import HfHubHTTPError

    try:
        if not exists:
            api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        if revision and revision != "main":
            api.create_branch(repo_id, branch=revision, repo_type="dataset", exist_ok=True)
    except HfHubHTTPError as error:
        raise PublishError(
            f"cannot create dataset repo {repo_id} or its branch (HTTP {error.response.status_code}): the token "
            f"has no write access to {repo_id.split('/')[0]}."
        ) from error
    return api.repo_info(repo_id, repo_type="dataset", revision=revision).sha


def read_published_manifest(api, repo_id: str, revision: str | None) -> dict[str, Any]:
    """The repo's ``provenance.json`` at ``revision`` (empty when it has none)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError

    try:
        path = hf_hub_download(
            repo_id,
            MANIFEST_PATH,
            repo_type="dataset",
            revision=revision,
            endpoint=api.endpoint,
            token=api.token,
        )
    except EntryNotFoundError:
        return {}
    return json.loads(Path(path).read_text(encoding="utf-8"))


def commit_message(local: Iterable[LocalTable]) -> str:
    """``Publish stvqa (data 1a2b...), dge_tasks (data 3c4d...)``."""
    return "Publish " + ", ".join(f"{table.name} (data {table.data_version})" for table in local)


def _sources(root: Path, local: LocalTable, accepted: set[str]) -> tuple[list[str], list[str]]:
    values = {
        column: set(counts)
        for column, counts in column_counts(local.files, ["origin", "source", "benchmark"]).items()
    }
    sources = sources_of(local.name, values, coco_boxes=uses_coco_boxes(root, local.name))
    return sorted(sources), check_terms(local.name, sources, accepted)


def _requested_names(tables: Iterable[str], repo_id: str) -> list[str]:
    """The distinct table names asked for, in order; refuses none at all and a repo id that is not OWNER/NAME."""
    names = list(dict.fromkeys(name.strip() for name in tables if name.strip()))
    if not names:
        raise PublishError("no table named: give --tables, for example --tables stvqa,spatialcore_train.")
    if not REPO_ID.match(repo_id):
        raise PublishError(f"{repo_id!r} is not a repo id: write OWNER/NAME.")
    return names


def _already_published(
    repo_id: str, repo_url: str, local: list[LocalTable], published: dict[str, Any]
) -> PublishResult | None:
    """The result of committing nothing when the repo holds every table's data version already, else None."""
    recorded = {name: entry.get("data_version") for name, entry in (published.get("tables") or {}).items()}
    if not all(recorded.get(table.name) == table.data_version for table in local):
        return None
    logger.info("%s already holds these data versions: nothing to commit", repo_id)
    return PublishResult(
        repo_id,
        repo_url,
        False,
        f"{repo_id} already holds {', '.join(f'{t.name} (data {t.data_version})' for t in local)}: "
        "nothing to commit.",
        {table.name: table.data_version for table in local},
        render_card(repo_id, published),
    )


def _write_repo_folder(
    work: Path,
    root: Path,
    repo_id: str,
    local: list[LocalTable],
    terms: dict[str, tuple[list[str], list[str]]],
    published: dict[str, Any],
    max_shard_bytes: int,
) -> tuple[dict[str, Any], list[tuple[str, Path]], str]:
    """Write the tables' shards, the card and ``provenance.json`` under ``work``: the manifest's table entries,
    the uploads (path in the repo, local file) and the card."""
    work.mkdir(parents=True, exist_ok=True)
    entries: dict[str, Any] = {}
    uploads: list[tuple[str, Path]] = []
    for table in local:
        shards = write_shards(table, work, max_shard_bytes)
        sources, accepted_here = terms[table.name]
        entries[table.name] = table_entry(table_facts(root, table), shards, accepted_here, sources)
        uploads += [(shard.path_in_repo, shard.local_path) for shard in shards]
    manifest = new_manifest(published, entries, llm_uses(root))
    card = render_card(repo_id, manifest)
    (work / "README.md").write_text(card, encoding="utf-8")
    (work / MANIFEST_PATH).write_bytes(manifest_json(manifest))
    uploads += [("README.md", work / "README.md"), (MANIFEST_PATH, work / MANIFEST_PATH)]
    return entries, uploads, card


def publish(
    tables: Iterable[str],
    repo_id: str,
    *,
    storage_root: str | Path | None = None,
    private: bool = False,
    create_pr: bool = False,
    revision: str | None = None,
    dry_run: bool = False,
    accept_source_terms: Iterable[str] = (),
    force: bool = False,
    max_shard_bytes: int = DEFAULT_MAX_SHARD_BYTES,
    dry_run_folder: str | Path | None = None,
    endpoint: str | None = None,
    token: str | None = None,
) -> PublishResult:
    """Publish ``tables`` of the storage root to dataset repo ``repo_id`` (see the module docstring).

    A dry run writes the repo folder to ``dry_run_folder`` (default ``<storage root>/published/OWNER__NAME``).

    Raises:
        PublishError: one sentence saying why nothing was published.
    """
    names = _requested_names(tables, repo_id)
    root = resolve_storage_root(storage_root)
    api = None if dry_run else _hub_api(endpoint, token)
    if api is not None:
        _check_access(api, create_pr)
    local = [inspect_table(root, name) for name in names]
    accepted = {key.strip() for key in accept_source_terms if key.strip()}
    terms = {table.name: _sources(root, table, accepted) for table in local}
    endpoint_url = (api.endpoint if api is not None else endpoint) or _library_endpoint()
    repo_url = f"{endpoint_url}/datasets/{repo_id}"
    published: dict[str, Any] = {}
    base = None
    exists = False
    if api is not None:
        exists, base = _head(api, repo_id, revision)
        published = read_published_manifest(api, repo_id, revision) if base else {}
        check_contracts(local, published, force)
        unchanged = _already_published(repo_id, repo_url, local, published)
        if unchanged is not None:
            return unchanged
    if dry_run:
        work = Path(dry_run_folder) if dry_run_folder else root / "published" / repo_id.replace("/", "__")
    else:
        work = Path(tempfile.mkdtemp(prefix="spatial-publish-"))
    try:
        if dry_run and work.exists():
            shutil.rmtree(work)
        entries, uploads, card = _write_repo_folder(
            work, root, repo_id, local, terms, published, max_shard_bytes
        )
        files = [(path, local_path.stat().st_size) for path, local_path in uploads]
        message = commit_message(local)
        if api is None:
            return PublishResult(
                repo_id,
                repo_url,
                False,
                f"dry run: {message}",
                entries_versions(local),
                card,
                files,
                folder=work,
            )
        if base is None:
            base = _create(api, repo_id, exists, private, revision)
        info = _commit(api, repo_id, uploads, published, entries, message, revision, create_pr, base)
        return PublishResult(
            repo_id,
            repo_url,
            True,
            message,
            entries_versions(local),
            card,
            files,
            commit_url=info.commit_url,
            pull_request_url=info.pr_url,
        )
    finally:
        if not dry_run:
            shutil.rmtree(work, ignore_errors=True)


def entries_versions(local: Iterable[LocalTable]) -> dict[str, str]:
    return {table.name: table.data_version for table in local}


def _library_endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def _commit(api, repo_id, uploads, published, entries, message, revision, create_pr, base):
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete
    from huggingface_hub.errors import HfHubHTTPError

    new_paths = {path for path, _ in uploads}
    stale = [
        path
        for name in entries
        for path in ((published.get("tables") or {}).get(name) or {}).get("files", [])
        if path not in new_paths
    ]
    operations = [CommitOperationDelete(path) for path in stale] + [
        CommitOperationAdd(path, str(local_path)) for path, local_path in uploads
    ]
    logger.info("committing %d files (%d removed) to %s: %s", len(uploads), len(stale), repo_id, message)
    try:
        return api.create_commit(
            repo_id,
            operations,
            commit_message=message,
            repo_type="dataset",
            revision=revision,
            create_pr=create_pr,
            parent_commit=base,
        )
    except HfHubHTTPError as error:
        status = error.response.status_code if error.response is not None else None
        if status in (401, 403):
            raise PublishError(
                f"the token has no write access to {repo_id} (HTTP {status}): use one that has, or --create-pr."
            ) from error
        if status == 412:
            raise PublishError(
                f"{repo_id} changed while publishing (another commit landed): publish again."
            ) from error
        raise
