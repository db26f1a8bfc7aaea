"""Test doubles that speak real protocols on the loopback interface (no network, no mocks of SDKs)."""
