"""What a recipe or an accelerate config needs installed, checked before anything heavy starts.

The GPU recipes set `attn_implementation: flash_attention_2` and `use_vllm: true`; the ZeRO-3
accelerate configs need DeepSpeed. None of these is a core dependency (they need CUDA): DeepSpeed and
vLLM come with the project's `gpu` extra, flash-attn is built against the installed torch in a
second step (see `training/recipes/README.md`, "Installing for GPUs"). Without them a run would stop
deep inside transformers, accelerate or TRL with a traceback; `recipe_problem` and `launch_problem`
name what is missing in one sentence instead, and `spatial-train` / `python -m training.launch` stop
with it (exit status 2).

>>> recipe_problem("flash_attention_2", use_vllm=False, use_cpu=True)
'attn_implementation flash_attention_2 needs a CUDA GPU; on the CPU pass --attn_implementation sdpa.'
>>> launch_problem({"distributed_type": "NO"}, "single_gpu.yaml", cpu=True) is None
True
"""

from __future__ import annotations

import importlib.util
import os

GPU_EXTRA_INSTALL = "pip install -e '.[gpu]'"
FLASH_ATTN_INSTALL = "pip install flash-attn==2.8.3.post2 --no-build-isolation"


class MissingDependencyError(RuntimeError):
    """A package that the recipe or the accelerate config needs is not installed (or cannot run here)."""


class ModelLocationError(FileNotFoundError):
    """A model that is neither a folder here nor in the Hugging Face cache (and would not be downloaded)."""


def is_installed(package: str) -> bool:
    """Whether `package` can be imported (found on the path; nothing is imported).

    >>> is_installed("json"), is_installed("surely_not_a_package_name")
    (True, False)
    """
    return importlib.util.find_spec(package) is not None


def recipe_problem(attn_implementation: str | None, use_vllm: bool, use_cpu: bool) -> str | None:
    """One sentence saying what the recipe needs and this environment lacks, or `None`."""
    if attn_implementation == "flash_attention_2":
        if use_cpu:
            return "attn_implementation flash_attention_2 needs a CUDA GPU; on the CPU pass --attn_implementation sdpa."
        if not is_installed("flash_attn"):
            return (
                "the recipe sets attn_implementation: flash_attention_2, but flash-attn is not installed: "
                f"install it after the gpu extra ({FLASH_ATTN_INSTALL}) or pass --attn_implementation sdpa."
            )
    if use_vllm and not is_installed("vllm"):
        return (
            f"the recipe sets use_vllm: true, but vllm is not installed: install the gpu extra "
            f"({GPU_EXTRA_INSTALL}) or pass --use_vllm false."
        )
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "false").lower() == "true" and not is_installed(
        "deepspeed"
    ):
        return f"this run was launched with DeepSpeed, but deepspeed is not installed: install the gpu extra ({GPU_EXTRA_INSTALL})."
    return None


def model_problem(name: str | None) -> str | None:
    """One sentence when model `name` cannot be loaded without a hub lookup that would fail, or `None`.

    A folder must hold `config.json`. A name of the form `owner/model` is fine when it is in the Hugging
    Face cache, or when it is one of the recipe models (`training.architectures.PUBLISHED_CONFIGS`) and
    downloads are allowed (`HF_HUB_OFFLINE` unset); anything else (e.g. `outputs/tiny-qwen3-vl` before it
    was built) would be retried against the hub and end in a traceback, so it is refused here, at once. A name
    that can only be a path (`/data/models/x`, `./x`, `a/b/c`) is told how to build the folder, not to download
    it.

    >>> model_problem("surely/not-here")  # doctest: +ELLIPSIS
    "model 'surely/not-here' is neither a folder here nor in the Hugging Face cache: ..."
    >>> model_problem("/surely/not/here")  # doctest: +ELLIPSIS
    'model folder /surely/not/here does not exist: build the tiny CPU model there with ...'
    """
    from pathlib import Path

    from training.architectures import PUBLISHED_CONFIGS, is_hub_id, local_model_folder

    if not name:
        return "the recipe names no model (model_name_or_path)"
    folder = Path(str(name)).expanduser()
    if folder.is_dir():
        if (folder / "config.json").is_file():
            return None
        return f"model folder {name} has no config.json"
    if is_hub_id(str(name)) and local_model_folder(str(name)) is not None:
        return None
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    if str(name) in PUBLISHED_CONFIGS and not offline:
        return None
    if not is_hub_id(str(name)) or (folder.parent != Path(".") and folder.parent.is_dir()):
        return (
            f"model folder {name} does not exist: build the tiny CPU model there with "
            f"`python -m training.testing tiny-model {name}`, or set model_name_or_path to a model folder or a "
            "Hugging Face model id."
        )
    return (
        f"model {name!r} is neither a folder here nor in the Hugging Face cache: if it is a folder, build the tiny "
        f"CPU model there with `python -m training.testing tiny-model {name}`; if it is a Hugging Face model id, "
        f"download it first (`hf download {name}`)."
    )


def launch_problem(config: dict, config_name: str, cpu: bool) -> str | None:
    """One sentence saying why the accelerate `config` cannot launch here, or `None`.

    Args:
        config (`dict`): the accelerate config file's contents.
        config_name (`str`): its name, for the message.
        cpu (`bool`): launching the config's CPU variant (`--cpu`).
    """
    distributed_type = str(config.get("distributed_type", "NO"))
    if distributed_type == "DEEPSPEED" and not is_installed("deepspeed"):
        stage = (config.get("deepspeed_config") or {}).get("zero_stage", "")
        return (
            f"{config_name} runs DeepSpeed ZeRO-{stage}, but deepspeed is not installed: "
            f"install the gpu extra ({GPU_EXTRA_INSTALL})."
        )
    if distributed_type not in ("NO", "MULTI_GPU", "DEEPSPEED"):
        return f"{config_name} uses distributed_type {distributed_type}, which the project's launcher does not handle."
    if not cpu and not config.get("use_cpu", False):
        import torch

        wanted = int(config.get("num_processes", 1)) // max(int(config.get("num_machines", 1)), 1)
        available = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if available < wanted:
            processes = f"{wanted} process" + ("es" if wanted != 1 else "")
            return (
                f"{config_name} starts {processes} per machine, one per GPU, but this machine has "
                f"{available} CUDA GPU" + ("s" if available != 1 else "") + "; add --cpu for its CPU variant."
            )
    return None
