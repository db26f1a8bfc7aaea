#!/usr/bin/env bash
# The GPU check of the trainer, for a lent H100/H200: Grounding DINO batched vs one at a time, 3 GRPO
# steps of a Qwen3-VL-4B-sized model with vLLM colocate (confidence weighting on vs off), and
# spatial-eval with vLLM on 50 items; prints one table (benchmarks/gpu/gpu_bench.py says what each
# part measures). Each part runs in its own process under its own time limit (9.5 minutes in all);
# a part that fails or runs out of time gets its reason in the table and the next part still runs.
#
#   bash benchmarks/gpu/run.sh [--dry-run] [OUTPUT_DIR]
#
# --dry-run: tiny models on the CPU, no vLLM (what tests/training/test_gpu_benchmark.py runs).
# OUTPUT_DIR (default $OUT, else a new temporary folder) receives each part's JSON and log.
# Needs the project with the gpu extra and flash-attn is not used (sdpa); PYTHON picks the interpreter.
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

part() {
    local name=$1 limit=$2
    shift 2
    if ! timeout "$limit" "$PYTHON" "$BENCH" "$@" "${MODE[@]}" --json "$RESULTS/$name.json" \
        > "$RESULTS/$name.log" 2>&1; then
        "$PYTHON" "$BENCH" failed --json "$RESULTS/$name.json" --log "$RESULTS/$name.log"
    fi
}

part grounding 90 grounding
part grpo_on 195 grpo --confidence on
part grpo_off 195 grpo --confidence off
part eval 90 eval
"$PYTHON" "$BENCH" table "$RESULTS/grounding.json" "$RESULTS/grpo_on.json" "$RESULTS/grpo_off.json" \
    "$RESULTS/eval.json"
echo "results and logs: $RESULTS"
