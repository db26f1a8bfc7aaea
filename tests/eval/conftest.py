"""Fixtures of the evaluation tests: a tiny local Qwen3-VL model, small image helpers, a fake vLLM."""

import io
from pathlib import Path

import pytest
from PIL import Image


def image_bytes(
    fmt: str = "PNG", size: tuple[int, int] = (32, 24), colour: tuple[int, int, int] = (200, 40, 40)
) -> bytes:
    """Encoded bytes of a small solid image."""
    buffer = io.BytesIO()
    Image.new("RGB", size, colour).save(buffer, format=fmt)
    return buffer.getvalue()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random-weight Qwen3-VL model folder (thinking chat template), built once per session."""
    from training.testing import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("eval_tiny_model") / "tiny-qwen3-vl", family="qwen3_vl")


from tests.eval.scripted import fake_vllm  # noqa: E402, F401  (the `vllm` modules replaced for one test)
