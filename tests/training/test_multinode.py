"""Several machines: the Slurm script's commands (fake `scontrol`, `srun`, `trl`, `python`) and the
vLLM server recipe."""

from __future__ import annotations

import dataclasses
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from training.cli import make_grpo_parser
from training.testing import write_tiny_training_tables

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
RECIPES_DIR = REPOSITORY_ROOT / "training" / "recipes"
SBATCH = RECIPES_DIR / "slurm" / "grpo_vllm_server.sbatch"
SERVER_RECIPE = RECIPES_DIR / "spatialthinker_7b_vllm_server.yaml"


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def fake_slurm(tmp_path):
    """A PATH whose `scontrol`, `srun`, `trl` and `python -m` record their command lines.

    `spatial-train` is the real one (the preflight reads tables with Visual Genome-sized images).
    """
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    _executable(bin_dir / "scontrol", "#!/bin/bash\nprintf 'gpu-a\\ngpu-b\\ngpu-c\\n'\n")
    # srun: record, then run the command once per task with SLURM_PROCID set (tasks of the --ntasks)
    _executable(
        bin_dir / "srun",
        f"""#!/bin/bash
echo "srun $*" >> {log}
tasks=1
while [[ "$1" == --* ]]; do
  case "$1" in --ntasks=*) tasks=${{1#--ntasks=}} ;; esac
  shift
done
for ((rank = 0; rank < tasks; rank++)); do SLURM_PROCID=$rank "$@"; done
""",
    )
    _executable(bin_dir / "trl", f'#!/bin/bash\necho "trl $*" >> {log}\n')
    real_python = shlex.quote(sys.executable)
    _executable(
        bin_dir / "python",
        f"""#!/bin/bash
if [ "$1" = "-m" ]; then echo "rank $SLURM_PROCID: python $*" >> {log}; exit 0; fi
exec {real_python} "$@"
""",
    )
    _executable(bin_dir / "spatial-train", f'#!/bin/bash\nexec {real_python} -m training.cli "$@"\n')
    data = write_tiny_training_tables(tmp_path / "data", rows=4, image_size=(800, 600))
    environment = dict(
        os.environ,
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        SLURM_JOB_NODELIST="gpu-[a-c]",
        SPATIAL_DATA_ROOT=str(data),
        HF_HUB_OFFLINE="1",
    )
    return environment, log


def test_slurm_script_serves_on_one_node_and_trains_on_the_others(fake_slurm):
    environment, log = fake_slurm
    result = subprocess.run(
        ["bash", str(SBATCH), str(SERVER_RECIPE.relative_to(REPOSITORY_ROOT)), "--max_steps", "5"],
        cwd=REPOSITORY_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    server = next(call for call in calls if call.startswith("trl ")).split()
    # Qwen2.5-VL-7B's 28 heads: tensor parallel 4 (not 8) and two replicas on the node's 8 GPUs; the context
    # is the longest prompt of the data (an 800x600 image is 609 tokens) + 2,048 completion tokens
    assert server[:10] == [
        "trl",
        "vllm-serve",
        "--model",
        "Qwen/Qwen2.5-VL-7B-Instruct",
        "--tensor_parallel_size",
        "4",
        "--data_parallel_size",
        "2",
        "--max_model_len",
        server[9],
    ]
    assert 2048 + 609 < int(server[9]) < 4096
    assert server[10:] == ["--host", "0.0.0.0", "--port", "8000"]
    assert any("--nodelist=gpu-c" in call for call in calls if call.startswith("srun"))
    assert any("--nodelist=gpu-a,gpu-b" in call for call in calls if call.startswith("srun"))
    launches = [call for call in calls if ": python -m training.launch" in call]
    assert [call.split(":")[0] for call in launches] == ["rank 0", "rank 1"]
    for rank, call in enumerate(launches):
        arguments = call.split(": ", 1)[1].split()
        assert (
            arguments[arguments.index("--config_file") + 1]
            == "training/recipes/accelerate/multi_node_zero3.yaml"
        )
        assert arguments[arguments.index("--machine_rank") + 1] == str(rank)
        assert arguments[arguments.index("--main_process_ip") + 1] == "gpu-a"
        assert arguments[arguments.index("--num_machines") + 1] == "2"
        assert arguments[arguments.index("--num_processes") + 1] == "16"
        assert arguments[arguments.index("--vllm_mode") + 1] == "server"
        assert arguments[arguments.index("--vllm_server_host") + 1] == "gpu-c"
        assert arguments[arguments.index("--vllm_server_port") + 1] == "8000"
        assert arguments[-2:] == ["--max_steps", "5"]
        assert (REPOSITORY_ROOT / arguments[arguments.index("--config") + 1]).is_file()


def test_slurm_script_stops_on_a_preflight_violation(fake_slurm):
    environment, log = fake_slurm
    result = subprocess.run(
        ["bash", str(SBATCH), str(SERVER_RECIPE)],
        cwd=REPOSITORY_ROOT,
        env=dict(environment, VLLM_TP="8"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 2
    assert "does not divide the 28 attention heads" in result.stderr
    assert not log.exists() or "trl " not in log.read_text()


def test_slurm_script_needs_two_nodes(fake_slurm, tmp_path):
    environment, _ = fake_slurm
    _executable(tmp_path / "bin" / "scontrol", "#!/bin/bash\necho gpu-a\n")
    result = subprocess.run(
        ["bash", str(SBATCH), str(SERVER_RECIPE)],
        cwd=REPOSITORY_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2 and "at least 2 nodes" in result.stderr


def test_server_recipe_is_the_colocated_run_with_a_server():
    parser = make_grpo_parser()
    _, server, _ = parser.parse_args_and_config(["--config", str(SERVER_RECIPE), "--use_cpu", "true"])
    _, colocated, _ = parser.parse_args_and_config(
        ["--config", str(RECIPES_DIR / "spatialthinker_7b.yaml"), "--use_cpu", "true"]
    )
    assert (server.vllm_mode, server.vllm_server_host, server.vllm_server_port) == (
        "server",
        "vllm-node",
        8000,
    )
    assert server.vllm_server_timeout >= 600
    # rollouts per update: 16 training GPUs here, 8 in the colocated recipe
    assert 16 * server.per_device_train_batch_size * server.gradient_accumulation_steps == (
        8 * colocated.per_device_train_batch_size * colocated.gradient_accumulation_steps
    )
    differing = {
        field.name
        for field in dataclasses.fields(server)
        if getattr(server, field.name) != getattr(colocated, field.name)
    }
    allowed = {
        "vllm_mode",
        "vllm_server_host",
        "vllm_server_timeout",
        "gradient_accumulation_steps",
        "output_dir",
        "logging_dir",
        "steps_per_generation",
        "generation_batch_size",
        "vllm_server_base_url",
    }
    assert differing <= allowed, differing - allowed
