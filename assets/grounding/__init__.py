"""SpatialCORE pseudo-GT: object phrases, grounded boxes with validity, and the training tables.

Modules (plain functions; :mod:`assets.grounding.assets` wraps them as Dagster assets):

- :mod:`~assets.grounding.phrases`: phrase extraction (LLM or spaCy/rules) and the shared filter;
- :mod:`~assets.grounding.detector`: Grounding DINO through transformers, batched, score as validity;
- :mod:`~assets.grounding.annotations`: grounding in human boxes (COCO instances), validity 1.0;
- :mod:`~assets.grounding.pseudo_gt`: one shard's rows with either backend;
- :mod:`~assets.grounding.coverage`, :mod:`~assets.grounding.audit`, :mod:`~assets.grounding.corruption`:
  coverage counts, the manual audit and corrupted variants (the paper's appendix A.3);
- :mod:`~assets.grounding.training_table`, :mod:`~assets.grounding.cold_start`: ``spatialcore_train`` and
  ``sft_cold_start``.

Importing this package does not import Dagster, torch or transformers.
"""
