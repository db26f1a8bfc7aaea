"""Source assets: ingest each raw input format into a Parquet table under its contract."""
