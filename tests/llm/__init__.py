"""Tests of the shared LLM client layer (pipelines/llm)."""
