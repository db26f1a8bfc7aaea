#!/usr/bin/env bash
# One entry point for a fresh machine: installs what is missing, then builds or tests.
#
#   ./dev.sh build [spatial-build flags]   materialise the whole asset graph on the built-in sample world
#   ./dev.sh test  [pytest flags]          lint, check formatting, run the test suite (the command CI runs)
#   ./dev.sh dagster                       open the Dagster UI on http://127.0.0.1:3000
#   ./dev.sh install                       only install (what the tests need too)
set -euo pipefail
cd "$(dirname "$0")"

VENV="${SPATIAL_VENV:-.venv}"
EXTRAS="${SPATIAL_EXTRAS:-cpu,llm,dev,postgres,ray}"

install_system_packages() {
  # open3d needs libusb at import time. Only the tests need the rest ($1 = test): the UI test reads the
  # Dagster UI in Debian's chromium, and the PostgreSQL instance test (tests/pipelines/test_postgres.py)
  # starts a server from PostgreSQL's binaries.
  local missing=()
  ldconfig -p 2>/dev/null | grep -q 'libusb-1.0.so.0' || missing+=(libusb-1.0-0)
  if [ "${1:-}" = "test" ]; then
    command -v chromium >/dev/null || missing+=(chromium)
    compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
  fi
  if [ ${#missing[@]} -gt 0 ]; then
    local sudo=""
    if [ "$(id -u)" != "0" ]; then sudo="sudo"; fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
}

pick_python() {
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      echo "$candidate"; return
    fi
  done
  echo "Python 3.11 is required (python3.11 or python3 at 3.11)" >&2
  exit 1
}

install_python_packages() {
  if [ ! -x "$VENV/bin/python" ]; then
    "$(pick_python)" -m venv "$VENV"
  fi
  local stamp="$VENV/.installed-$(cat pyproject.toml | sha256sum | cut -c1-16)-${EXTRAS//,/_}"
  if [ ! -f "$stamp" ]; then
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q -e ".[${EXTRAS}]"
    # dagster-postgres 0.29.27 pins dagster 1.13.27 (no 0.29.28 on the registry); its API matches 1.13.28.
    if [[ ",$EXTRAS," == *,postgres,* ]]; then
      "$VENV/bin/python" -m pip install -q --no-deps "dagster-postgres==0.29.27"
    fi
    touch "$stamp"
  fi
}

install() {
  install_system_packages "${1:-}"
  install_python_packages
}

export DAGSTER_HOME="${DAGSTER_HOME:-$PWD/.dagster_home}"
# The caches go to ./data, where spatial-train and spatial-eval look when run from here with no flags.
export SPATIAL_DATA_ROOT="${SPATIAL_DATA_ROOT:-$PWD/data}"
mkdir -p "$DAGSTER_HOME"
# The instance settings (run queue, run monitoring) from the template, unless the instance has its own.
[ -s "$DAGSTER_HOME/dagster.yaml" ] || cp pipelines/deploy/dagster.yaml "$DAGSTER_HOME/dagster.yaml"

command="${1:-build}"
shift || true
case "$command" in
  install) install test ;;
  build) install; exec "$VENV/bin/spatial-build" "$@" ;;
  test)
    install test
    "$VENV/bin/ruff" check .
    "$VENV/bin/ruff" format --check .
    "$VENV/bin/mypy"
    exec "$VENV/bin/python" -m pytest "$@" ;;
  # `dagster dev`, not `dg dev`: dagster-dg-cli pins an older Dagster than this project's, so its
  # notice that `dagster dev` is superseded is not shown.
  dagster) install
    PYTHONWARNINGS="ignore:Function \`dev_command\` is superseded" \
      exec "$VENV/bin/dagster" dev -h 127.0.0.1 -p "${PORT:-3000}" "$@" ;;
  *) echo "usage: ./dev.sh build|test|dagster|install [args]" >&2; exit 2 ;;
esac
