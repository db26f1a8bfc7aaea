"""`spatial-eval`: benchmark loaders, inference backends, strict scoring, paper-style reports, grounding analysis.

Modules:

* :mod:`~training.eval.benchmarks`: every benchmark from its native files into the ``eval_items`` table.
* :mod:`~training.eval.backends`: transformers ``generate``, vLLM (base model plus a checked LoRA
  adapter) and OpenAI-compatible APIs behind one interface.
* :mod:`~training.eval.predictions`: the resumable prediction cache.
* :mod:`~training.eval.scoring`: answers read with the rewards' own grammar; 3DSRBench's CircularEval and FlipEval.
* :mod:`~training.eval.reports`: per-category tables in the papers' layouts, next to their published rows.
* :mod:`~training.eval.grounding_analysis`: matched IoU by coordinate-entropy quartile (Figures 4 and 5).
* :mod:`~training.eval.runner`: one run end to end (load, generate with the cache, score, report).
* :mod:`~training.eval.cli`: the ``spatial-eval`` command.
"""
