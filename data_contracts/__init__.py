"""data_contracts package."""
