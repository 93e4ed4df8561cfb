"""Benchmark: how the offline plan grows with teams and with stacks.

    python bench/plan_scale.py [--teams 2 16 50 200] [--stacks 4 8 16]

Teams: prod-us-train with N teams (bench/scale_stacks.py: generated, 30-character names, each with a quota,
a repository and its CI role, a member) in a temporary folder, planned in a fresh process per N: plan
CPU seconds (wall seconds beside them), peak memory (the process's max RSS), resources, and the policy
document nearest its AWS quota (infra/core/policy_quotas.py). Printed with the growth from the previous row:
the CPU time ratio against the team ratio, and the CPU each added team costs (flat: linear).

Stacks: the four shipped stacks and copies of dev-us-train up to N in one folder. ``aiplat plan --all`` of
the largest folder once (its time: every stack planned; it leaves the plan summaries of
infra/plan/summaries.py), then ``aiplat plan --stack dev-us-train`` in a fresh process in each folder,
against the same command in a folder holding dev-us-train alone: the ratio is what the other stacks cost one
stack's plan (target at most 1.5).

Every measurement runs in its own process, so its memory and the Pulumi runtime's state are its own; the
folders and the summaries live in a temporary folder and are removed. Ratios are of CPU time, which other
processes on a shared machine leave alone (wall time is not); compare ratios from one run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.scale_stacks import (  # noqa: E402
    FOLDER_STACK,
    TRAIN_STACK,
    write_alone_folder,
    write_stacks_folder,
    write_train_folder,
)
from infra.plan.summaries import CACHE_ENV  # noqa: E402


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def _cpu_s() -> float:
    """This process's CPU seconds (all threads): on a shared machine, the measure other processes' load
    leaves alone; wall time is printed beside it."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child_teams(teams: int, folder: Path) -> dict[str, Any]:
    """Plan prod-us-train with ``teams`` teams; what the parent prints of it."""
    from infra.core import policy_quotas
    from infra.plan.runner import run_plan

    write_train_folder(folder, teams)
    started, cpu = time.perf_counter(), _cpu_s()
    plan = run_plan(TRAIN_STACK, stacks_dir=folder)
    seconds, cpu = time.perf_counter() - started, _cpu_s() - cpu
    measured = policy_quotas.measure(
        policy_quotas.Registered(r.urn, r.type, r.name, r.inputs, r.property_dependencies)
        for r in plan.resources
    )
    top = max(measured, key=lambda m: m.share)
    return {
        "seconds": seconds,
        "cpu": cpu,
        "peak_mib": _peak_mib(),
        "resources": len(plan.resources),
        "largest": f"{top.resource} ({top.what.removeprefix('the ')}) {top.size:,}/{top.limit:,}",
        "share": top.share,
    }


def child_cli(argv: list[str]) -> dict[str, Any]:
    """One ``aiplat`` command, timed; how many stack programs it ran."""
    from infra.cli.main import main
    from infra.plan import runner

    programs = []
    original = runner.RecordingMonitor.__init__

    def counted(self, mocks):  # noqa: ANN001, ANN202
        original(self, mocks)
        programs.append(self)

    runner.RecordingMonitor.__init__ = counted  # type: ignore[method-assign]
    started, cpu = time.perf_counter(), _cpu_s()
    code = main(argv)
    return {
        "seconds": time.perf_counter() - started,
        "cpu": _cpu_s() - cpu,
        "code": code,
        "programs": len(programs),
        "peak_mib": _peak_mib(),
    }


def in_child(*args: str, env: dict[str, str]) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", *args], env=env, capture_output=True, text=True, check=False
    )
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        sys.exit(f"{' '.join(args)} failed:\n{out.stderr[-4000:]}")
    return json.loads(lines[-1])


def bench_teams(counts: list[int], work: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    rows = []
    for n in counts:
        row = {"teams": n, **in_child("teams", str(n), str(work / f"teams-{n}"), env=env)}
        rows.append(row)
        print(
            f"{n:>5} teams  {row['cpu']:6.1f} s CPU ({row['seconds']:5.1f} s wall)  "
            f"{row['peak_mib']:6.0f} MiB  {row['resources']:>5} resources  "
            f"largest {row['share']:.0%}: {row['largest']}",
            flush=True,
        )
    print("growth (each row against the previous):")
    for prev, row in zip(rows, rows[1:], strict=False):
        added = row["teams"] - prev["teams"]
        print(
            f"  {prev['teams']:>3} -> {row['teams']:>3} teams (x{row['teams'] / prev['teams']:.1f}): "
            f"CPU time x{row['cpu'] / prev['cpu']:.2f}, "
            f"memory x{row['peak_mib'] / prev['peak_mib']:.2f}, "
            f"resources x{row['resources'] / prev['resources']:.2f}; "
            f"{(row['cpu'] - prev['cpu']) / added * 1000:.0f} ms CPU and "
            f"{(row['resources'] - prev['resources']) / added:.1f} resources per added team"
        )
    return rows


def bench_stacks(counts: list[int], work: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    alone = work / "alone"
    write_alone_folder(alone)
    folders = {}
    for n in counts:
        folders[n] = work / f"stacks-{n}"
        write_stacks_folder(folders[n], n)
    out = str(work / "plans")
    largest = max(counts)
    warm = in_child("cli", "plan", "--all", "--stacks-dir", str(folders[largest]), "--out", out, env=env)
    print(
        f"plan --all of {largest} stacks: {warm['cpu']:.1f} s CPU ({warm['seconds']:.1f} s wall), "
        f"{warm['programs']} programs ({warm['cpu'] / largest:.1f} s CPU a stack), exit {warm['code']}",
        flush=True,
    )
    one = ["plan", "--stack", FOLDER_STACK, "--out", out, "--stacks-dir"]
    base = in_child("cli", *one, str(alone), env=env)
    print(
        f"plan --stack {FOLDER_STACK} alone: {base['cpu']:.1f} s CPU ({base['seconds']:.1f} s wall), "
        f"{base['programs']} program",
        flush=True,
    )
    rows = []
    for n in counts:
        row = {"stacks": n, **in_child("cli", *one, str(folders[n]), env=env)}
        rows.append(row)
        print(
            f"plan --stack {FOLDER_STACK} among {n:>2} stacks: {row['cpu']:.1f} s CPU "
            f"({row['seconds']:.1f} s wall), {row['programs']} program(s), "
            f"x{row['cpu'] / base['cpu']:.2f} of alone (target <= 1.5), "
            f"exit {row['code']}",
            flush=True,
        )
    return rows


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, *rest = sys.argv[2:]
        result = child_teams(int(rest[0]), Path(rest[1])) if kind == "teams" else child_cli(rest)
        print(json.dumps(result))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teams", type=int, nargs="*", default=[2, 16, 50, 200])
    parser.add_argument("--stacks", type=int, nargs="*", default=[4, 8, 16])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="plan-scale-") as tmp:
        work = Path(tmp)
        # the plan summaries of this run only, and quiet consoles
        env = {**os.environ, CACHE_ENV: str(work / "cache"), "COLUMNS": "200"}
        if args.teams:
            bench_teams(sorted(args.teams), work, env)
        if args.stacks:
            bench_stacks(sorted(args.stacks), work, env)


if __name__ == "__main__":
    main()
