"""`python -m training.launch`: `accelerate launch` of `spatial-train` with a checked accelerate config.

Usage::

    python -m training.launch --config_file training/recipes/accelerate/zero3_8gpu.yaml \\
        grpo --config training/recipes/spatialthinker_7b.yaml
    python -m training.launch --config_file training/recipes/accelerate/multi_node_zero3.yaml \\
        --machine_rank $RANK --main_process_ip $MASTER_ADDR --main_process_port 29500 \\
        grpo --config training/recipes/spatialthinker_7b.yaml
    # the CPU variant of any shipped config (smoke runs, tests): same engine, CPU processes
    python -m training.launch --config_file training/recipes/accelerate/multi_gpu_2.yaml --cpu \\
        grpo --config training/recipes/smoke.yaml --data_root DATA

Everything before the command (`grpo` or `sft`) is for the launcher: `--config_file`, `--cpu`,
`--num_processes` / `--num_machines` (written into the launched config) and any other
`accelerate launch` option (`--machine_rank`, `--main_process_ip`, ... passed on); everything after
it goes to `spatial-train`. Before a process starts, the config and the recipe are checked
(`training.requirements`): a ZeRO-3 config without DeepSpeed, a flash-attention recipe without
flash-attn, a vLLM recipe without vLLM, or fewer GPUs than processes end the command with one
sentence naming what is missing and how to install it (exit status 2), instead of a traceback from
inside accelerate.

`--cpu` launches the config's CPU variant: `use_cpu: true`, no mixed precision, one machine, and at
most two processes unless `--num_processes` says otherwise. DDP configs then run their processes on
the CPU over gloo; DeepSpeed configs run on DeepSpeed's CPU accelerator (gloo) when DeepSpeed is
installed. (accelerate's own `--cpu` would drop the engine and start a single plain process.)
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import yaml

from training.requirements import launch_problem, recipe_problem

COMMANDS = ("grpo", "sft")
CPU_SMOKE_PROCESSES = 2


def split_arguments(argv: Sequence[str]) -> tuple[list[str], str, list[str]]:
    """Split `argv` at the command into (launcher arguments, command, `spatial-train` arguments).

    >>> split_arguments(["--config_file", "c.yaml", "--cpu", "grpo", "--config", "r.yaml"])
    (['--config_file', 'c.yaml', '--cpu'], 'grpo', ['--config', 'r.yaml'])
    """
    for index, argument in enumerate(argv):
        if argument in COMMANDS:
            return list(argv[:index]), argument, list(argv[index + 1 :])
    raise ValueError(f"no command: expected one of {', '.join(COMMANDS)} after the launcher's options")


def cpu_variant(config: dict, num_processes: int | None = None) -> dict:
    """The CPU variant of an accelerate config: same engine, CPU processes on one machine.

    >>> variant = cpu_variant({"distributed_type": "MULTI_GPU", "num_processes": 16, "num_machines": 2,
    ...                        "mixed_precision": "bf16", "use_cpu": False})
    >>> variant["use_cpu"], variant["num_processes"], variant["num_machines"], variant["mixed_precision"]
    (True, 2, 1, 'no')
    """
    variant = dict(config)
    per_machine = int(config.get("num_processes", 1)) // max(int(config.get("num_machines", 1)), 1)
    variant.update(
        use_cpu=True,
        mixed_precision="no",
        num_machines=1,
        machine_rank=0,
        num_processes=num_processes or max(1, min(per_machine, CPU_SMOKE_PROCESSES)),
    )
    if variant.get("distributed_type") == "MULTI_GPU" and variant["num_processes"] < 2:
        variant["distributed_type"] = "NO"
    variant.pop("main_process_ip", None)
    variant.pop("gpu_ids", None)
    return variant


def _flag_value(arguments: Sequence[str], name: str) -> str | None:
    """The value of `--name value` or `--name=value` in `arguments` (the last one wins)."""
    value = None
    for index, argument in enumerate(arguments):
        if argument == f"--{name}" and index + 1 < len(arguments):
            value = arguments[index + 1]
        elif argument.startswith(f"--{name}="):
            value = argument.split("=", 1)[1]
    return value


def _truthy(value) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes")


def recipe_settings(train_arguments: Sequence[str]) -> dict:
    """`attn_implementation`, `use_vllm`, `use_cpu` of the recipe named by `--config`, with the overrides."""
    recipe_path = _flag_value(train_arguments, "config")
    recipe = yaml.safe_load(Path(recipe_path).read_text()) if recipe_path else {}
    recipe = recipe or {}
    settings = {
        "attn_implementation": recipe.get("attn_implementation"),
        "use_vllm": _truthy(recipe.get("use_vllm", False)),
        "use_cpu": _truthy(recipe.get("use_cpu", False)),
    }
    for name in settings:
        override = _flag_value(train_arguments, name)
        if override is not None:
            settings[name] = override if name == "attn_implementation" else _truthy(override)
    return settings


def make_parser() -> argparse.ArgumentParser:
    """The launcher's own options (the rest is passed to `accelerate launch`)."""
    parser = argparse.ArgumentParser(
        prog="python -m training.launch",
        description="accelerate launch of spatial-train with a checked accelerate config",
        usage="python -m training.launch --config_file ACCELERATE.yaml [--cpu] [accelerate options] "
        "{grpo,sft} --config RECIPE.yaml [...]",
    )
    parser.add_argument(
        "--config_file", required=True, help="accelerate config (training/recipes/accelerate/)"
    )
    parser.add_argument("--cpu", action="store_true", help="launch the config's CPU variant")
    parser.add_argument("--num_processes", type=int, default=None, help="processes, all machines together")
    parser.add_argument("--num_machines", type=int, default=None, help="machines (default: the config's)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Check, then run `accelerate launch -m training.cli ...`; returns the exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    parser = make_parser()
    if not arguments or arguments[0] in ("-h", "--help"):
        parser.print_help()
        return 0 if arguments else 2
    try:
        launcher_arguments, command, train_arguments = split_arguments(arguments)
    except ValueError as error:
        parser.print_usage(sys.stderr)
        sys.stderr.write(f"training.launch: {error}\n")
        return 2
    options, accelerate_arguments = parser.parse_known_args(launcher_arguments)
    config_path = Path(options.config_file)
    if not config_path.is_file():
        sys.stderr.write(f"training.launch: accelerate config {config_path} does not exist.\n")
        return 2
    config = yaml.safe_load(config_path.read_text()) or {}
    if not options.cpu:
        for name in ("num_processes", "num_machines"):
            if getattr(options, name) is not None:
                config[name] = getattr(options, name)
    settings = recipe_settings(train_arguments)
    problem = launch_problem(config, config_path.name, cpu=options.cpu) or recipe_problem(
        settings["attn_implementation"], settings["use_vllm"], use_cpu=options.cpu or settings["use_cpu"]
    )
    if problem is not None:
        sys.stderr.write(f"training.launch: {problem}\n")
        return 2
    if options.cpu:
        config = cpu_variant(config, options.num_processes)
    folder = tempfile.mkdtemp(prefix="spatial-launch-")
    try:
        launched_config = Path(folder) / config_path.name
        launched_config.write_text(yaml.safe_dump(config, sort_keys=True))
        command_line = [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--config_file",
            str(launched_config),
            *accelerate_arguments,
            "-m",
            "training.cli",
            command,
            *train_arguments,
        ]
        if options.cpu:
            train_override = ["--use_cpu", "true"] if not settings["use_cpu"] else []
            command_line += train_override
        return subprocess.run(command_line, check=False).returncode
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
