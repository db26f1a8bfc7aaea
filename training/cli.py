"""`spatial-train`: GRPO and SFT from a YAML recipe, with command-line overrides and resume.

Usage::

    spatial-train grpo --config training/recipes/spatialcore_8b.yaml [--max_steps 100 ...]
    spatial-train grpo --config RECIPE --resume_from_checkpoint last      # or a checkpoint folder
    spatial-train sft  --config training/recipes/spatialcore_sft_8b.yaml
    accelerate launch --config_file training/recipes/accelerate/zero3_8gpu.yaml \\
        -m training.cli grpo --config training/recipes/spatialcore_8b.yaml

Every recipe key is a field of `training.config.SpatialGRPOArguments` (or
`training.sft.SpatialSFTArguments`), TRL's `GRPOConfig` (`SFTConfig`), or
`training.models.SpatialModelConfig`; TRL's parser reads the file and applies the flags on top.
`spatial-train preflight --config RECIPE [--gpus N] [--gpu-memory-gib G]` checks a recipe against the
GPUs it is meant for without one (`training.preflight`); `grpo` and `sft` run the same checks on the
machine itself first (`--skip_preflight` skips them) and resolve `vllm_max_model_length: auto` there.
Progress and metrics go to the console and to the recipe's `report_to` (TensorBoard; W&B is added
when installed). A missing table, a missing column, an unknown reward, format or model family, a
missing checkpoint, SFT targets that `max_length` would cut (`max_length_policy: error`), or a
package the recipe needs and this environment lacks (flash-attn, vLLM, DeepSpeed: see
`training.requirements`), a model that is neither a folder nor in the Hugging Face cache, a recipe key
no dataclass has, or a preflight violation end the command with a one-line error and exit status 2.
`spatial-train grpo|sft --help` (every recipe key, its default and help, read from the dataclasses' source
files), a mistyped key, a missing model folder and a data root without the recipe's table are answered before
torch, transformers, TRL or peft are imported (in under a second).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections.abc import Sequence

logger = logging.getLogger("training.cli")

USAGE = """usage: spatial-train {grpo,sft,preflight} --config RECIPE.yaml [--key value ...]

commands:
  grpo       GRPO post-training (SpatialCORE, SpatialThinker, DGE recipes)
  sft        supervised cold start (completion-only loss, language LoRA)
  preflight  check a recipe against the GPUs it is meant for, without one: memory per GPU, vLLM
             engine, tensor parallel size, context, batch (spatial-train preflight --help)

grpo and sft run the preflight's checks on this machine first (--skip_preflight skips them).
Run `spatial-train grpo --help` for every recipe key.
"""

COMMANDS = ("grpo", "sft", "preflight")
SKIP_PREFLIGHT = "--skip_preflight"


def user_errors() -> tuple[type[BaseException], ...]:
    """The errors that end `spatial-train` with one line and exit status 2 (imported when needed)."""
    from data_contracts.boxes import UnknownModelFamilyError
    from data_contracts.storage import MissingTableError
    from training.architectures import UnknownArchitectureError
    from training.config import RecipeError
    from training.data import MissingColumnError
    from training.hub_data import IncompatibleContractError
    from training.preflight import PreflightError
    from training.recipe_file import RecipeFileError
    from training.requirements import MissingDependencyError
    from training.sft import SequenceTooLongError

    return (
        MissingTableError,
        MissingColumnError,
        UnknownModelFamilyError,
        UnknownArchitectureError,
        RecipeError,
        RecipeFileError,
        PreflightError,
        SequenceTooLongError,
        MissingDependencyError,
        IncompatibleContractError,
        FileNotFoundError,
    )


def fetch_hub_data_root(script_args) -> None:
    """Replace a Hub ``data_root`` (``hf://datasets/OWNER/NAME[@REV]``) by its local snapshot holding the table."""
    from training.hub_data import resolve_data_root

    if script_args.data_root and str(script_args.data_root).startswith("hf:"):
        script_args.data_root = str(resolve_data_root(script_args.data_root, [script_args.dataset_table]))


def _int_or_auto(value: str):
    """`vllm_max_model_length`: a number of tokens, or `auto` (resolved by the preflight)."""
    if str(value).strip().lower() == "auto":
        return "auto"
    return int(value)


def _accept_auto(parser):
    for action in parser._actions:
        if action.dest == "vllm_max_model_length":
            action.type = _int_or_auto
    return parser


def _parse(parser, arguments: list[str]):
    """The recipe's dataclasses; a value TRL or transformers refuses is a `RecipeError` (one line, exit 2).

    For example a GPU recipe on a machine without a GPU (`bf16` needs one unless `--use_cpu true`).
    """
    from training.config import RecipeError

    try:
        return parser.parse_args_and_config(arguments)
    except ValueError as error:
        raise RecipeError(f"the recipe cannot be used here: {error}") from error


def check_requirements(training_args, model_args) -> None:
    """Raise `MissingDependencyError` when the recipe needs a package this environment lacks."""
    from training.requirements import MissingDependencyError, recipe_problem

    problem = recipe_problem(
        model_args.attn_implementation, bool(getattr(training_args, "use_vllm", False)), training_args.use_cpu
    )
    if problem is not None:
        raise MissingDependencyError(problem)


def _add_wandb(training_args) -> None:
    report_to = training_args.report_to
    if not report_to or report_to in ("none", ["none"]) or importlib.util.find_spec("wandb") is None:
        return
    if isinstance(report_to, str):
        report_to = [report_to]
    if "wandb" not in report_to and "all" not in report_to:
        training_args.report_to = [*report_to, "wandb"]


def make_grpo_parser():
    """TRL's parser over the GRPO recipe dataclasses."""
    from trl import GRPOConfig, TrlParser

    from training.config import SpatialGRPOArguments
    from training.models import SpatialModelConfig

    # TRL types its dataclasses as `NewType("DataClassType", Any)`, which no class matches without a wrapper call
    dataclasses = (SpatialGRPOArguments, GRPOConfig, SpatialModelConfig)
    return _accept_auto(TrlParser(dataclasses, prog="spatial-train grpo"))  # type: ignore[arg-type]


def make_sft_parser():
    """TRL's parser over the SFT recipe dataclasses."""
    from trl import SFTConfig, TrlParser

    from training.models import SpatialModelConfig
    from training.sft import SpatialSFTArguments

    # TRL types its dataclasses as `NewType("DataClassType", Any)`, which no class matches without a wrapper call
    dataclasses = (SpatialSFTArguments, SFTConfig, SpatialModelConfig)
    return TrlParser(dataclasses, prog="spatial-train sft")  # type: ignore[arg-type]


def build_reward_funcs(script_args) -> list:
    """The recipe's reward functions (with the SpatialCORE curriculum in place of `spatialcore_reward`)."""
    from training.curriculum import spatialcore_curriculum_reward
    from training.rewards import get_reward_funcs

    rewards = get_reward_funcs(script_args.reward_funcs)
    if script_args.reward_curriculum is not None:
        index = script_args.reward_funcs.index("spatialcore_reward")
        rewards[index] = spatialcore_curriculum_reward(script_args.reward_curriculum)
    return rewards


def run_grpo(script_args, training_args, model_args):
    """Load data, model and rewards, train with `SpatialGRPOTrainer`, save; return the trainer."""
    from data_contracts.storage import default_storage_root
    from training.config import RecipeError
    from training.data import load_training_data, task_types_of, write_quarantine
    from training.grpo_trainer import SpatialGRPOTrainer, resolve_checkpoint
    from training.models import detect_family, load_model, load_processor, prepare_policy
    from training.scheduler import TaskScheduler

    if model_args.model_name_or_path is None:
        raise RecipeError("the recipe names no model (model_name_or_path)")
    family = script_args.model_family or detect_family(model_args.model_name_or_path)
    resume = resolve_checkpoint(training_args.output_dir, training_args.resume_from_checkpoint)
    extra = (script_args.task_type_column,) if script_args.task_scheduler else ()
    data = load_training_data(
        script_args.data_root or default_storage_root(),
        script_args.dataset_table,
        script_args.prompt_format,
        family,
        split=script_args.dataset_split,
        extra_columns=extra,
        max_samples=script_args.max_train_samples,
        include_task_types=script_args.include_task_types,
        task_type_column=script_args.task_type_column,
        allow_mixed_origins=script_args.allow_mixed_origins,
    )
    quarantine_path = write_quarantine(data.quarantine, training_args.output_dir, script_args.dataset_table)
    if quarantine_path is not None:
        logger.warning("%d rows quarantined to %s", data.quarantine.height, quarantine_path)
    scheduler = None
    if script_args.task_scheduler:
        scheduler = TaskScheduler(
            sorted(set(task_types_of(data.dataset, script_args.task_type_column))),
            floor=script_args.scheduler_floor,
            prior=script_args.scheduler_prior,
            prior_weight=script_args.scheduler_prior_weight,
        )
    if script_args.report_wandb_if_installed:
        _add_wandb(training_args)
    processor = load_processor(model_args.model_name_or_path, family)
    model, peft_config = prepare_policy(load_model(model_args), model_args)
    trainer = SpatialGRPOTrainer(
        model=model,
        reward_funcs=build_reward_funcs(script_args),
        args=training_args,
        train_dataset=data.dataset,
        processing_class=processor,
        peft_config=peft_config,
        prompt_format=script_args.prompt_format,
        box_entropy_source=script_args.box_entropy_source,
        task_scheduler=scheduler,
        task_type_column=script_args.task_type_column,
    )
    trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(training_args.output_dir)
    logger.info("saved the policy to %s", training_args.output_dir)
    return trainer


def _configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def preflight_on_this_machine(command: str, config: str | None, parsed: tuple, skip: bool) -> None:
    """Run the preflight's checks on the parsed recipe here; resolve `vllm_max_model_length: auto`.

    Raises `PreflightError` with the first violation (unless `skip`). With `auto`, the engine's context
    is set to the longest prompt of the data plus `max_completion_length`, also when `skip`.
    """
    from training.preflight import PreflightError, machine_here, run_preflight
    from training.recipe_file import recipe_from_arguments

    training_args = parsed[1]
    auto = command == "grpo" and training_args.vllm_max_model_length == "auto"
    if skip and not auto:
        return
    recipe = recipe_from_arguments(command, config, *parsed)
    report = run_preflight(recipe, machine_here(check_packages=False), data_root=recipe["data_root"])
    if int(os.environ.get("RANK", "0")) == 0:
        logger.info("preflight on this machine:\n%s", report.format())
    if auto:
        training_args.vllm_max_model_length = report.needed_context
        logger.info("vllm_max_model_length auto: %d tokens", report.needed_context)
    violation = report.first_violation()
    if violation and not skip:
        raise PreflightError(f"preflight: {violation} ({SKIP_PREFLIGHT} runs anyway)")


def _fast_checks(command: str, arguments: list[str]) -> str | None:
    """Recipe keys, the model's location and the training table, checked before anything heavy is imported; the
    recipe path. Raises `RecipeFileError`, `ModelLocationError` or `MissingTableError` (one sentence each)."""
    from data_contracts.storage import default_storage_root, table_files
    from training.architectures import PUBLISHED_CONFIGS
    from training.recipe_file import read_recipe, split_config_argument
    from training.requirements import ModelLocationError, model_problem

    config, overrides = split_config_argument(arguments)
    recipe = read_recipe(config, overrides, kind=command)
    model = recipe["model_name_or_path"]
    # a recipe model not cached yet is checked after the recipe's own settings (bf16, packages)
    if model not in PUBLISHED_CONFIGS:
        problem = model_problem(model)
        if problem is not None:
            raise ModelLocationError(problem)
    table_files(recipe["data_root"] or default_storage_root(), str(recipe["dataset_table"]))
    return config


def check_model_location(model_args) -> None:
    """Raise `ModelLocationError` when the model is neither a folder nor cached (nor downloadable)."""
    from training.requirements import ModelLocationError, model_problem

    problem = model_problem(model_args.model_name_or_path)
    if problem is not None:
        raise ModelLocationError(problem)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `spatial-train`; returns the exit status.

    >>> main(["--help"])  # doctest: +ELLIPSIS
    usage: spatial-train {grpo,sft,preflight} ...
    0
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments or arguments[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0 if arguments else 2
    command, rest = arguments[0], arguments[1:]
    if command not in COMMANDS:
        sys.stderr.write(f"spatial-train: unknown command {command!r}\n{USAGE}")
        return 2
    if command == "preflight":
        from training.preflight import main as preflight_main

        return preflight_main(rest)
    if "-h" in rest or "--help" in rest:
        from training.recipe_file import recipe_help

        sys.stdout.write(recipe_help(command))
        return 0
    skip = SKIP_PREFLIGHT in rest
    rest = [argument for argument in rest if argument != SKIP_PREFLIGHT]
    from data_contracts.storage import MissingTableError
    from training.recipe_file import RecipeFileError
    from training.requirements import ModelLocationError

    try:
        config = _fast_checks(command, rest)
    except (RecipeFileError, ModelLocationError, MissingTableError) as error:
        sys.stderr.write(f"spatial-train: {error}\n")
        return 2
    _configure_logging()
    errors = user_errors()
    try:
        if command == "grpo":
            parsed = _parse(make_grpo_parser(), rest)
            check_requirements(parsed[1], parsed[2])
            check_model_location(parsed[2])
            fetch_hub_data_root(parsed[0])
            preflight_on_this_machine(command, config, parsed, skip)
            run_grpo(*parsed)
        else:
            from training.grpo_trainer import resolve_checkpoint
            from training.sft import run_sft

            script_args, training_args, model_args = _parse(make_sft_parser(), rest)
            check_requirements(training_args, model_args)
            check_model_location(model_args)
            fetch_hub_data_root(script_args)
            preflight_on_this_machine(command, config, (script_args, training_args, model_args), skip)
            training_args.resume_from_checkpoint = resolve_checkpoint(
                training_args.output_dir, training_args.resume_from_checkpoint
            )
            run_sft(script_args, training_args, model_args)
    except errors as error:
        logger.error("%s", error)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
