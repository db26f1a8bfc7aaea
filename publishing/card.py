"""The dataset card (``README.md``) and ``provenance.json`` of a published repo.

The repo keeps one ``provenance.json``: per published table (config) its contract, code and data versions,
source fingerprint, rows per split, shard files, sources and accepted terms, build settings and quarantine
counts, and the build's LLM use. It is what a later publication compares data versions with (unchanged data:
no commit) and checks the contract version against; the card is rendered from it alone, so publishing one
table again keeps what the card says about the others.

The card's YAML front matter is what ``huggingface_hub.DatasetCard`` and the Hub read: ``configs`` (the data
files of each split), ``dataset_info`` (features from the table's contract, split sizes), ``license``,
``task_categories``, ``language``, ``size_categories``, ``tags`` and ``pretty_name``.

>>> size_category(18), size_category(7587)
('n<1K', '1K<n<10K')
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import yaml

from data_contracts.validation import polars_schema
from publishing.facts import LlmUse, TableFacts
from publishing.tables import PUBLISHABLE, Shard, hub_features
from publishing.terms import SOURCES

MANIFEST_PATH = "provenance.json"
MANIFEST_FORMAT = 1
PROJECT = "spatial-grounding"
METHOD_CITATIONS = {
    "SpatialThinker": "Batra et al., SpatialThinker: Reinforcing 3D Reasoning in Multimodal LLMs via Spatial "
    "Rewards, arXiv:2511.07403, 2025.",
    "SpatialEvo DGE": "Li et al., SpatialEvo: Self-Evolving Spatial Intelligence via Deterministic Geometric "
    "Environments, arXiv:2604.14144, 2026.",
    "SpatialCORE": "SpatialCORE: confidence-weighted grounding rewards from Grounding DINO pseudo ground truth "
    "(the method this project reproduces; see the project's README).",
}


def size_category(rows: int) -> str:
    """The Hub's ``size_categories`` value for ``rows`` rows."""
    for bound, name in (
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
    ):
        if rows < bound:
            return name
    return "1M<n<10M" if rows < 10_000_000 else "n>10M"


def features_yaml(table: str) -> list[dict]:
    """The ``dataset_info`` features of ``table`` from its contract (images as ``image``)."""
    return hub_features(polars_schema(PUBLISHABLE[table].contract))._to_yaml_list()


def table_entry(facts: TableFacts, shards: list[Shard], accepted: list[str], sources: list[str]) -> dict:
    """The manifest entry of one published table."""
    local = facts.local
    splits: dict[str, int] = {}
    for shard in shards:
        splits[shard.split] = splits.get(shard.split, 0) + shard.rows
    return {
        "contract_version": local.contract_version,
        "data_version": local.data_version,
        "source_fingerprint": local.source_fingerprint,
        "code_versions": list(local.code_versions),
        "input_data_versions": local.input_data_versions,
        "built_at": local.built_at,
        "published_at": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "rows": local.rows,
        "splits": dict(sorted(splits.items())),
        "files": [shard.path_in_repo for shard in shards],
        "sources": sorted(sources),
        "accepted_terms": sorted(accepted),
        "values": facts.values,
        "settings": facts.settings,
        "stage_versions": facts.stage_versions,
        "quarantine": [asdict(count) for count in facts.quarantine],
        "features": features_yaml(facts.name),
    }


def new_manifest(previous: Mapping[str, Any] | None, entries: Mapping[str, dict], llm: list[LlmUse]) -> dict:
    """``previous`` with ``entries`` replacing or adding their tables, and the build's LLM use."""
    tables = dict((previous or {}).get("tables", {}))
    tables.update(entries)
    return {
        "format": MANIFEST_FORMAT,
        "generator": PROJECT,
        "tables": dict(sorted(tables.items())),
        "llm": [asdict(use) for use in llm] if llm else list((previous or {}).get("llm", [])),
    }


def manifest_json(manifest: Mapping[str, Any]) -> bytes:
    return (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()


def _licence(sources: set[str]) -> dict:
    ids = {SOURCES[key].licence_id for key in sources}
    if len(ids) == 1 and None not in ids:
        return {"license": ids.pop()}
    return {
        "license": "other",
        "license_name": "mixed-sources",
        "license_link": "README.md#sources-and-terms",
    }


def front_matter(repo_id: str, manifest: Mapping[str, Any]) -> dict:
    """The card's YAML metadata."""
    tables = manifest["tables"]
    sources = {key for entry in tables.values() for key in entry["sources"]}
    synthetic = "sample_world" in sources
    tags = ["spatial-reasoning", "vision-language", "multiple-choice", "grounding"] + (
        ["synthetic"] if synthetic else []
    )
    return {
        "pretty_name": repo_id.split("/")[-1],
        **_licence(sources),
        "language": ["en"],
        "task_categories": ["visual-question-answering", "image-text-to-text"],
        "size_categories": [size_category(sum(entry["rows"] for entry in tables.values()))],
        "tags": tags,
        "configs": [
            {
                "config_name": name,
                "data_files": [{"split": split, "path": f"{name}/{split}-*"} for split in entry["splits"]],
            }
            for name, entry in tables.items()
        ],
        "dataset_info": [
            {
                "config_name": name,
                "features": entry["features"],
                "splits": [{"name": split, "num_examples": rows} for split, rows in entry["splits"].items()],
            }
            for name, entry in tables.items()
        ],
    }


def _type(feature: str | list[Mapping[str, Any]] | Mapping[str, Any]) -> str:
    """A feature's type in words: ``string``, ``image``, ``list of int64``, ``struct {a, b}``."""
    if isinstance(feature, str):
        return feature
    if isinstance(feature, list):
        return "struct {" + ", ".join(item["name"] for item in feature) + "}"
    if "dtype" in feature:
        return _type(feature["dtype"])
    if "list" in feature:
        return f"list of {_type(feature['list'])}"
    if "struct" in feature:
        return _type(feature["struct"])
    return next(iter(key for key in feature if key != "name"), "?")


def _columns(name: str, entry: Mapping[str, Any]) -> list[str]:
    contract = PUBLISHABLE[name].contract if name in PUBLISHABLE else None
    descriptions = {}
    if contract is not None:
        descriptions = {column: (rule.description or "") for column, rule in contract.columns().items()}
    lines = ["| column | type | description |", "|---|---|---|"]
    for feature in entry["features"]:
        text = descriptions.get(feature["name"], "").replace("|", "\\|").replace("\n", " ")
        lines.append(f"| `{feature['name']}` | {_type(feature)} | {text} |")
    return lines


def _provenance(entry: Mapping[str, Any]) -> list[str]:
    inputs = entry["input_data_versions"]
    if inputs and all(isinstance(value, dict) for value in inputs.values()):
        shown = f"{len(inputs)} partition files, each with its own (hashed into the source fingerprint)"
    else:
        shown = ", ".join(f"`{key}` {value}" for key, value in sorted(inputs.items())) or "none recorded"
    stages = "; ".join(
        f"`{stage}` " + ", ".join(f"{key} {value}" for key, value in sorted(versions.items()))
        for stage, versions in entry["stage_versions"].items()
    )
    return [
        f"- Contract version: {entry['contract_version']}",
        f"- Code version: {', '.join(entry['code_versions']) or 'not recorded'}",
        f"- Data version: `{entry['data_version']}`; source fingerprint `{entry['source_fingerprint']}`",
        f"- Input data versions: {shown}",
        f"- Stages (code and contract versions): {stages or 'not recorded'}",
        f"- Built: {entry['built_at']}; published: {entry['published_at']}",
    ]


def _quarantine(entry: Mapping[str, Any]) -> list[str]:
    counts = entry["quarantine"]
    if not any(count["count"] for count in counts):
        stages = ", ".join(f"`{count['stage']}`" for count in counts) or "none"
        return [f"No record was quarantined (stages checked: {stages})."]
    lines = ["| stage | quarantined | commonest reasons |", "|---|---|---|"]
    for count in counts:
        reasons = "; ".join(f"{reason} ({n})" for reason, n in count["reasons"]).replace("|", "\\|")
        lines.append(f"| `{count['stage']}` | {count['count']} | {reasons} |")
    return lines


def render_card(repo_id: str, manifest: Mapping[str, Any]) -> str:
    """The whole ``README.md``: YAML front matter and the body (see the module docstring)."""
    tables = manifest["tables"]
    meta = yaml.safe_dump(front_matter(repo_id, manifest), sort_keys=False, allow_unicode=True, width=1000)
    synthetic = sorted(name for name, entry in tables.items() if "sample_world" in entry["sources"])
    body = [f"# {repo_id.split('/')[-1]}", ""]
    if synthetic:
        body += [
            f"> **Synthetic data.** The rows of {', '.join(f'`{name}`' for name in synthetic)} come from the "
            "built-in sample world (rendered synthetic rooms), not from a real data set: fit for trying the "
            "pipeline and the trainer, not for measuring a model.",
            "",
        ]
    body += [
        f"Built with {PROJECT}: Dagster asset graphs that build training and evaluation data for vision-language "
        "models that reason about space. One config per table; splits come from the table's `split` column; "
        "images are `datasets` Image features.",
        "",
        "```python",
        "from datasets import load_dataset",
        "",
        f'rows = load_dataset("{repo_id}", "{next(iter(tables))}")',
        "```",
        "",
        "| config | one row is | rows per split |",
        "|---|---|---|",
    ]
    for name, entry in tables.items():
        spec = PUBLISHABLE.get(name)
        splits = ", ".join(f"{split} {rows}" for split, rows in entry["splits"].items())
        body.append(f"| `{name}` | {spec.one_row_is if spec else ''} | {splits} |")
    for name, entry in tables.items():
        spec = PUBLISHABLE.get(name)
        body += ["", f"## `{name}`", "", f"One row is {spec.one_row_is if spec else 'a row of ' + name}.", ""]
        body += [f"Rows: {entry['rows']} ({', '.join(f'{s} {n}' for s, n in entry['splits'].items())})."]
        for column, what in (
            ("origin", "Origin"),
            ("source", "Source"),
            ("benchmark", "Benchmark"),
            ("category", "Category"),
            ("task_type", "Task type"),
        ):
            counts = entry["values"].get(column, {})
            if counts:
                body.append(
                    f"{what} of the rows: " + ", ".join(f"{key} {n}" for key, n in counts.items()) + "."
                )
        body += ["", "### Columns", "", *_columns(name, entry), "", "### How it was built", ""]
        body.append(f"- Method: {spec.method if spec else 'not recorded'}")
        body += [f"- {line}" for line in entry["settings"]]
        body += ["", "### Quarantine", "", *_quarantine(entry), "", "### Provenance", "", *_provenance(entry)]
    body += ["", "## LLM cost of the build", ""]
    if manifest.get("llm"):
        body += ["| provider | model | prompt | requests | USD |", "|---|---|---|---:|---:|"]
        body += [
            f"| {use['provider']} | {use['model']} | `{use['prompt']}` | {use['requests']} | {use['cost_usd']:.4f} |"
            for use in manifest["llm"]
        ]
        body.append(
            f"| total | | | {sum(u['requests'] for u in manifest['llm'])} | "
            f"{sum(u['cost_usd'] for u in manifest['llm']):.4f} |"
        )
    else:
        body.append("The build's response cache records no paid model request (offline backends): 0.00 USD.")
    body += ["", "## Sources and terms", "", "| source | licence or terms | configs |", "|---|---|---|"]
    used: dict[str, list[str]] = {}
    for name, entry in tables.items():
        for key in entry["sources"]:
            used.setdefault(key, []).append(name)
    for key, names in sorted(used.items()):
        source = SOURCES[key]
        link = f" ({source.url})" if source.url else ""
        body.append(f"| {source.name}{link} | {source.terms} | {', '.join(f'`{n}`' for n in names)} |")
    accepted = sorted({(name, key) for name, entry in tables.items() for key in entry["accepted_terms"]})
    for name, key in accepted:
        body += [
            "",
            f"**Restricted source accepted.** `{name}` embeds data from {SOURCES[key].name}, whose terms restrict "
            f"redistribution ({SOURCES[key].terms}); the publisher accepted them (`--accept-source-terms {key}`). "
            "Use it only under those terms.",
        ]
    citations = sorted(
        {
            METHOD_CITATIONS[PUBLISHABLE[n].method]
            for n in tables
            if n in PUBLISHABLE and PUBLISHABLE[n].method in METHOD_CITATIONS
        }
        | {SOURCES[key].citation for key in used if SOURCES[key].citation}
    )
    body += ["", "## Citations", "", *[f"- {citation}" for citation in citations]]
    return f"---\n{meta}---\n\n" + "\n".join(body) + "\n"
