"""Tests of the DGE package (``assets.dge``) and its contracts."""
