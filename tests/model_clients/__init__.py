"""Tests of the shared LLM client layer (llm/)."""
