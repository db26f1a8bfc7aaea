"""``spatial-publish``: push built tables to a Hugging Face Hub dataset repo (see :mod:`publishing.hub`).

    spatial-publish --tables stvqa,spatialcore_train --repo OWNER/NAME [--private] [--create-pr]
        [--revision BRANCH] [--storage-root DIR] [--dry-run] [--accept-source-terms SOURCE,...] [--force]

The token comes from ``HF_TOKEN`` or the cached login, the endpoint from ``HF_ENDPOINT``. A refusal is one
line on stderr (exit status 2), never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys

from publishing.tables import DEFAULT_MAX_SHARD_BYTES, PUBLISHABLE, PublishError

EXIT_REFUSED = 2


def _say(text: str) -> None:
    """The command's output (stdout)."""
    sys.stdout.write(text + "\n")


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(
        prog="spatial-publish", description="Publish built tables to a Hugging Face Hub dataset repo."
    )
    parse.add_argument("--tables", required=True, help=f"comma-separated tables: {', '.join(PUBLISHABLE)}")
    parse.add_argument("--repo", required=True, help="dataset repo id OWNER/NAME")
    parse.add_argument("--private", action="store_true", help="create the repo private (when it is new)")
    parse.add_argument(
        "--create-pr", action="store_true", help="open a pull request instead of writing the branch"
    )
    parse.add_argument("--revision", default=None, help="branch to publish to (default main)")
    parse.add_argument("--storage-root", default=None, help="storage root of the built tables")
    parse.add_argument("--dry-run", action="store_true", help="write the repo folder locally, push nothing")
    parse.add_argument(
        "--dry-run-folder", default=None, help="where --dry-run writes (default <root>/published/OWNER__NAME)"
    )
    parse.add_argument(
        "--accept-source-terms", default="", help="sources whose restrictive terms you accept, e.g. scannet"
    )
    parse.add_argument(
        "--force", action="store_true", help="replace a table published with an incompatible contract"
    )
    parse.add_argument(
        "--max-shard-mb", type=float, default=DEFAULT_MAX_SHARD_BYTES / (1 << 20), help="shard size bound"
    )
    parse.add_argument(
        "--verbose", action="store_true", help="log progress (INFO) and show upload progress bars"
    )
    return parse


def main(argv: list[str] | None = None) -> int:
    """Run ``spatial-publish``; the exit status."""
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from huggingface_hub.errors import HfHubHTTPError
    from huggingface_hub.utils import disable_progress_bars

    from data_contracts.storage import resolve_storage_root
    from publishing.hub import publish

    if not args.verbose:
        disable_progress_bars()
    root = resolve_storage_root(args.storage_root)
    try:
        result = publish(
            args.tables.split(","),
            args.repo,
            storage_root=root,
            private=args.private,
            create_pr=args.create_pr,
            revision=args.revision,
            dry_run=args.dry_run,
            accept_source_terms=args.accept_source_terms.split(","),
            force=args.force,
            max_shard_bytes=int(args.max_shard_mb * (1 << 20)),
            dry_run_folder=args.dry_run_folder,
        )
    except PublishError as error:
        sys.stderr.write(f"spatial-publish: {error}\n")
        return EXIT_REFUSED
    except HfHubHTTPError as error:
        sys.stderr.write(f"spatial-publish: the Hub answered {str(error).splitlines()[0]}\n")
        return EXIT_REFUSED
    _say(result.message)
    if result.folder is not None:
        _say(f"repo folder: {result.folder}")
        for path, size in result.files:
            _say(f"  {path}  {size:,} bytes")
        return 0
    _say(f"repo: {result.repo_url}")
    if result.commit_url:
        _say(f"commit: {result.commit_url}")
    if result.pull_request_url:
        _say(f"pull request: {result.pull_request_url}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
