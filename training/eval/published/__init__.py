"""Published result rows of the SpatialCORE and SpatialThinker papers, shipped as CSV data (see README.md)."""
