"""assets package."""
