"""Fixtures of the trainer tests: tiny local models and tables (built here, nothing downloaded).

Scripted generation (`training.testing.scripted_generation`) makes `generate` emit chosen
completions by masking every other token at each step; the policy's own logits are untouched
before the mask, so recorded entropies are still the model's at the emitted tokens.
"""

from __future__ import annotations

import pytest

from training.testing import build_tiny_model, write_tiny_training_tables


@pytest.fixture(scope="session")
def tiny_qwen3_vl(tmp_path_factory):
    """A tiny random Qwen3-VL (thinking chat template) model folder."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny_qwen3_vl"), family="qwen3_vl")


@pytest.fixture(scope="session")
def tiny_qwen2_5_vl(tmp_path_factory):
    """A tiny random Qwen2.5-VL model folder."""
    return build_tiny_model(tmp_path_factory.mktemp("tiny_qwen2_5_vl"), family="qwen2_5_vl")


@pytest.fixture
def tiny_tables(tmp_path):
    """A data root with small spatialcore_train, stvqa and dge_tasks tables."""
    return write_tiny_training_tables(tmp_path / "data", rows=8)
