#!/usr/bin/env bash
# Prepare benchmarks/gpu/wheelhouse/ on a machine with access to the package registry, for a GPU machine
# that has only Python, torch and transformers and no network (run.sh installs from it with --no-index).
# What the benchmark's parts import beyond torch and transformers (whose own dependencies, numpy and
# pydantic among them, are already there): pillow, for Grounding DINO's image processor. Wheels for
# CPython 3.10-3.12 on manylinux x86_64, about 21 MB in all, well under the 64 MiB that can be carried.
#
#   bash benchmarks/gpu/make_wheelhouse.sh [PYTHON_VERSIONS]      # default "3.10 3.11 3.12"
set -euo pipefail

cd "$(dirname "$0")"
VERSIONS=${1:-3.10 3.11 3.12}
PYTHON=${PYTHON:-python3}
mkdir -p wheelhouse
for version in $VERSIONS; do
    "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --dest wheelhouse \
        --python-version "$version" --implementation cp --platform manylinux2014_x86_64 \
        --platform manylinux_2_28_x86_64 "pillow>=11,<14"
done
du -sh wheelhouse
ls wheelhouse
