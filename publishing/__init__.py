"""Publishing built tables as Hugging Face Hub dataset repos (no Dagster here).

- :mod:`publishing.tables`: which tables can be published, their local files, data versions and the
  streamed Parquet shards per config and split;
- :mod:`publishing.terms`: the sources with their licences or terms, and the refusal of restricted ones;
- :mod:`publishing.facts`: how a table was built, read from the storage root (footers, quarantines, the
  tables upstream, the LLM response cache);
- :mod:`publishing.card`: the dataset card (``README.md``) and the repo's ``provenance.json``;
- :mod:`publishing.hub`: :func:`~publishing.hub.publish`, through ``huggingface_hub``'s commit API;
- :mod:`publishing.cli`: ``spatial-publish``.
"""
