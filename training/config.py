"""Recipe arguments of `spatial-train`: the project's dataclasses beside TRL's configs.

A recipe is one YAML file read by TRL's parser: keys of `SpatialGRPOArguments` (data, rewards,
box entropies, task scheduler, curriculum), of TRL's `GRPOConfig` (or `SFTConfig`) and of
`training.models.SpatialModelConfig` (model and LoRA) sit side by side; command-line flags
override them (`--max_steps 2`).

>>> arguments = SpatialGRPOArguments(dataset_table="dge_tasks", reward_funcs=["dge_reward"])
>>> arguments.prompt_format
'dge'
"""

from __future__ import annotations

from dataclasses import dataclass, field

from training.grpo_trainer import ENTROPY_SOURCES
from training.prompts import FORMAT_OF_TABLE, PROMPT_FORMATS


class RecipeError(ValueError):
    """A recipe value that cannot work (unknown reward, format, source; inconsistent settings)."""


@dataclass
class SpatialGRPOArguments:
    """Project arguments of `spatial-train grpo`.

    Args:
        data_root (`str`, *optional*): storage root of the caches (`$SPATIAL_DATA_ROOT`, else
            `$DAGSTER_HOME/spatial_data`, else `./data`).
        dataset_table (`str`, *optional*, defaults to `"spatialcore_train"`): the training table.
        prompt_format (`str`, *optional*): `spatialcore`, `spatialthinker` or `dge` (default: the table's).
        dataset_split (`str`, *optional*, defaults to `"train"`): rows whose `split` is this (`None`: all).
        max_train_samples (`int`, *optional*): use only the first N usable rows.
        include_task_types (`list[str]`, *optional*): train only on these task types (`task_type_column`).
        allow_mixed_origins (`bool`, *optional*, defaults to `False`): train on a table whose `origin`
            column mixes the built-in sample world with real data (refused by default).
        model_family (`str`, *optional*): box convention family; read from the model config when omitted.
        reward_funcs (`list[str]`, *optional*, defaults to `["spatialcore_reward"]`): registry names or
            dotted paths.
        reward_curriculum (`list[float]`, *optional*): SpatialCORE curriculum phase ends (shares of the
            run, e.g. `[0.1, 0.3]`); replaces a `spatialcore_reward` entry with the curriculum.
        box_entropy_source (`str`, *optional*, defaults to `"auto"`): see `SpatialGRPOTrainer`.
        task_scheduler (`bool`, *optional*, defaults to `False`): draw rows by task type (DGE scheduler).
        task_type_column (`str`, *optional*, defaults to `"task_type"`): column with the task type.
        scheduler_floor (`float`, *optional*, defaults to `0.05`): minimum weight of a task type.
        scheduler_prior (`float`, *optional*, defaults to `0.35`): prior accuracy.
        scheduler_prior_weight (`float`, *optional*, defaults to `2.0`): samples the prior is worth.
        report_wandb_if_installed (`bool`, *optional*, defaults to `True`): add W&B to `report_to` when
            it is installed.
    """

    data_root: str | None = field(default=None, metadata={"help": "Storage root of the Parquet caches."})
    dataset_table: str = field(default="spatialcore_train", metadata={"help": "Training table name."})
    prompt_format: str | None = field(
        default=None, metadata={"help": "spatialcore, spatialthinker or dge (follows the table by default)."}
    )
    dataset_split: str | None = field(default="train", metadata={"help": "Split to train on."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Use only the first N rows."})
    include_task_types: list[str] | None = field(
        default=None, metadata={"help": "Train only on these task types."}
    )
    allow_mixed_origins: bool = field(
        default=False, metadata={"help": "Accept a table mixing sample-world and real rows (origin column)."}
    )
    model_family: str | None = field(default=None, metadata={"help": "Box convention family (auto)."})
    reward_funcs: list[str] = field(
        default_factory=lambda: ["spatialcore_reward"],
        metadata={"help": "Reward names (registry or dotted path)."},
    )
    reward_curriculum: list[float] | None = field(
        default=None, metadata={"help": "SpatialCORE curriculum phase ends, e.g. 0.1 0.3."}
    )
    box_entropy_source: str = field(
        default="auto", metadata={"help": "auto, generation, logprob_pass, selective_pass or none."}
    )
    task_scheduler: bool = field(default=False, metadata={"help": "Task-adaptive sampling by task type."})
    task_type_column: str = field(default="task_type", metadata={"help": "Column with the task type."})
    scheduler_floor: float = field(default=0.05, metadata={"help": "Minimum task weight."})
    scheduler_prior: float = field(default=0.35, metadata={"help": "Prior accuracy of a task type."})
    scheduler_prior_weight: float = field(default=2.0, metadata={"help": "Samples the prior is worth."})
    report_wandb_if_installed: bool = field(default=True, metadata={"help": "Report to W&B when installed."})

    def __post_init__(self) -> None:
        if self.prompt_format is None:
            if self.dataset_table not in FORMAT_OF_TABLE:
                raise RecipeError(
                    f"set prompt_format for table {self.dataset_table!r} (one of {', '.join(PROMPT_FORMATS)})"
                )
            self.prompt_format = FORMAT_OF_TABLE[self.dataset_table]
        if self.prompt_format not in PROMPT_FORMATS:
            raise RecipeError(
                f"unknown prompt_format {self.prompt_format!r}; expected one of {PROMPT_FORMATS}"
            )
        if self.box_entropy_source not in ENTROPY_SOURCES:
            raise RecipeError(
                f"box_entropy_source must be one of {ENTROPY_SOURCES}, got {self.box_entropy_source!r}"
            )
        if isinstance(self.reward_funcs, str):
            self.reward_funcs = [self.reward_funcs]
        if not self.reward_funcs:
            raise RecipeError("reward_funcs is empty")
        if self.reward_curriculum is not None and "spatialcore_reward" not in self.reward_funcs:
            raise RecipeError(
                "reward_curriculum replaces spatialcore_reward, which reward_funcs does not list"
            )
        from training.rewards import get_reward_funcs

        try:
            get_reward_funcs(self.reward_funcs)
        except ValueError as error:
            raise RecipeError(str(error)) from error
