"""The trainer: GRPO and SFT for grounded spatial reasoning on the project's Parquet caches.

Modules:

* `training.rewards`: the reward library (SpatialCORE, SpatialThinker, DGE), pure functions.
* `training.data`: training tables -> `datasets.Dataset` with prompts (`training.prompts`).
* `training.models`: loading by model family, processor without torchvision, LoRA set-up.
* `training.entropy`: coordinate-digit token entropies without an extra logits pass.
* `training.grpo_trainer`: `SpatialGRPOTrainer`, TRL's GRPO trainer with box entropies and metrics.
* `training.scheduler`: the DGE task-adaptive scheduler and sampler.
* `training.curriculum`: the SpatialCORE reward curriculum (reward by training progress).
* `training.lr_schedule`: the paper's learning-rate curve and its recipe keys.
* `training.sft`: SFT cold-start targets and training.
* `training.cli`: the `spatial-train` command; recipes in `training/recipes/`.
* `training.testing`: tiny local models, tokenizers and tables for tests and benchmarks.
"""
