"""Where the test suite's CPU goes: run pytest and print the CPU seconds of every test file, costliest first.

Each pytest process (every xdist worker) adds up the user + system CPU of each test, set-up and tear-down
included, its own and that of the processes it started and waited for (``tests/conftest.py``,
``SPATIAL_TEST_CPU_REPORT``). This script runs pytest with the arguments given and prints the whole run's
CPU, its wall time and the per-file table. The whole run's figure is every process the suite started, those
it left behind included (a build's fork server outlives the build by a moment): the script is their child
subreaper (``bench_build.py``'s, Linux) and reaps them when pytest ends, killing those still running 30 s
later. The per-file figures miss the CPU of processes a test started and never waited for.

    python benchmarks/suite_cost.py                  # the whole suite, as ./dev.sh test runs it
    python benchmarks/suite_cost.py --top 30 tests/pipelines
"""

import argparse
import json
import os
import resource
import runpy
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_BUILD = runpy.run_path(str(Path(__file__).resolve().parent / "bench_build.py"))
"""``bench_build.py``'s child subreaper, which counts the CPU of every process the suite starts."""
become_subreaper, reap_descendants = _BUILD["become_subreaper"], _BUILD["reap_descendants"]
LEFT_BEHIND_GRACE_S = 30.0
"""How long the processes the suite left behind may run on after pytest ends before they are killed."""


def run_suite(pytest_args: list[str]) -> tuple[float, float, dict[str, float], int]:
    """Run pytest; return (wall s, CPU s of the whole run, CPU s per test file, pytest's exit status)."""
    with tempfile.TemporaryDirectory(prefix="suite-cost-") as folder:
        env = {**os.environ, "SPATIAL_TEST_CPU_REPORT": folder}
        become_subreaper()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        status = subprocess.call([sys.executable, "-m", "pytest", *pytest_args], env=env)
        wall = time.perf_counter() - started
        if killed := reap_descendants(LEFT_BEHIND_GRACE_S):
            sys.stderr.write(
                f"killed {len(killed)} processes the suite left running {LEFT_BEHIND_GRACE_S:.0f} s\n"
            )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        per_file: dict[str, float] = {}
        for report in Path(folder).glob("*.json"):
            for file, seconds in json.loads(report.read_text(encoding="utf-8")).items():
                per_file[file] = per_file.get(file, 0.0) + seconds
    return wall, cpu, per_file, status


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--top", type=int, default=15, help="how many of the costliest files to list")
    args, pytest_args = parser.parse_known_args()
    wall, cpu, per_file, status = run_suite(pytest_args)
    counted = sum(per_file.values())
    lines = [
        f"pytest exit status {status}; wall {wall:.0f} s; CPU {cpu:.0f} s (every process of the run)",
        f"CPU counted per test file: {counted:.0f} s in {len(per_file)} files",
        f"{'CPU s':>8}  {'share':>6}  file",
    ]
    for file, seconds in sorted(per_file.items(), key=lambda pair: -pair[1])[: args.top]:
        lines.append(f"{seconds:8.1f}  {seconds / max(counted, 1e-9):6.1%}  {file}")
    sys.stdout.write("\n".join(lines) + "\n")
    sys.exit(status)


if __name__ == "__main__":
    main()
