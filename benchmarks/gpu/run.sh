#!/usr/bin/env bash
# The GPU check of the trainer, for a lent H100/H200 that has only Python, torch and transformers and no
# network: one real 3,072-token GRPO step of a Qwen3-VL-4B-shaped policy with confidence weighting on and
# off (time, peak memory, the preflight's estimate beside it), Grounding DINO at full size batch 1 vs 16,
# and, only where TRL and vLLM are installed, 3 TRL GRPO steps with vLLM colocate and spatial-eval with
# vLLM. Prints one table (benchmarks/gpu/README.md; gpu_bench.py says what each part measures). Each
# part runs in its own process under its own time limit (about 5 minutes on a bare machine, where the
# TRL and vLLM parts are skipped at once); a part that fails,
# runs out of time or cannot run here gets its reason in the table, and the next part still runs.
#
#   bash benchmarks/gpu/run.sh [--dry-run] [OUTPUT_DIR]
#
# --dry-run: tiny models on the CPU (what tests/training/test_gpu_benchmark.py runs).
# OUTPUT_DIR (default $OUT, else a new temporary folder) receives each part's JSON and log.
# First, what the parts import beyond torch and transformers is installed from benchmarks/gpu/wheelhouse/
# when it is missing (no index, no network; make_wheelhouse.sh prepares the folder on a connected machine).
# PYTHON picks the interpreter.
set -uo pipefail

cd "$(dirname "$0")/../.."
MODE=()
if [ "${1:-}" = "--dry-run" ]; then
    MODE=(--dry-run)
    shift
fi
RESULTS=${1:-${OUT:-$(mktemp -d)}}
mkdir -p "$RESULTS"
PYTHON=${PYTHON:-python3}
BENCH=benchmarks/gpu/gpu_bench.py
WHEELHOUSE=benchmarks/gpu/wheelhouse
export HF_HUB_OFFLINE=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

# The parts' imports beyond torch and transformers, from the wheelhouse (module:requirement).
for pair in PIL:pillow; do
    module=${pair%%:*} requirement=${pair#*:}
    if ! "$PYTHON" -c "import $module" 2>/dev/null; then
        if [ -d "$WHEELHOUSE" ] && "$PYTHON" -m pip install --quiet --no-index --find-links "$WHEELHOUSE" \
            --no-deps "$requirement" >> "$RESULTS/wheelhouse.log" 2>&1; then
            echo "installed $requirement from $WHEELHOUSE" >&2
        else
            echo "no $requirement here and none in $WHEELHOUSE: the parts that need it are skipped" >&2
        fi
    fi
done
"$PYTHON" -c "import importlib.util as u; print('not here (their parts are skipped):', ', '.join(m for m in ('vllm', 'trl', 'peft') if u.find_spec(m) is None) or 'none')" >&2

part() {
    local name=$1 limit=$2
    shift 2
    if ! timeout "$limit" "$PYTHON" "$BENCH" "$@" "${MODE[@]}" --json "$RESULTS/$name.json" \
        > "$RESULTS/$name.log" 2>&1; then
        "$PYTHON" "$BENCH" failed --json "$RESULTS/$name.json" --log "$RESULTS/$name.log"
    fi
}

part step_on 150 step --confidence on
part step_off 150 step --confidence off
part grounding 90 grounding
part grpo_on 195 grpo --confidence on
part grpo_off 195 grpo --confidence off
part eval 90 eval
"$PYTHON" "$BENCH" table "$RESULTS/step_on.json" "$RESULTS/step_off.json" "$RESULTS/grounding.json" \
    "$RESULTS/grpo_on.json" "$RESULTS/grpo_off.json" "$RESULTS/eval.json"
echo "results and logs: $RESULTS"
