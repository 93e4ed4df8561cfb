"""``pulumi up`` must not need moto: the program imports, validates and declares a stack with moto
unimportable, its data calls answered from what the AWS snapshot answered in this process (replayed).

The child process blocks ``import moto`` before anything of ours is imported, so a module that reached for
the snapshot at import or run time fails the test.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infra.plan.runner import run_plan

pytestmark = pytest.mark.slow  # processes and servers: left out of `make test-fast`

REPO = Path(__file__).resolve().parents[2]

CHILD = textwrap.dedent(
    """
    import importlib.abc, json, sys

    class NoMoto(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "moto" or name.startswith("moto."):
                raise ImportError(f"{name} is not installed (blocked by the test)")
            return None

    sys.meta_path.insert(0, NoMoto())

    import functools
    from infra import program
    from infra.io.stackfiles import load_stack_config, read_stack_index
    from infra.plan.mocks import AwsSnapshotMocks
    from infra.plan.runner import plan_config, run_program

    stack, answers_file = sys.argv[1], sys.argv[2]
    answers = json.load(open(answers_file))

    class Replay(AwsSnapshotMocks):
        def call(self, args):
            key = json.dumps([args.token, dict(args.args)], sort_keys=True, default=str)
            return answers[key]

    cfg = load_stack_config(stack)
    config, secret_keys = plan_config(cfg)
    monitor = run_program(
        # endpoint_probe=None: the mocked cluster has no API to connect to (the probe is tested on its own)
        functools.partial(program.program, stacks=read_stack_index(), endpoint_probe=None),
        stack=stack,
        mocks=Replay(cfg.region),
        config=config,
        secret_keys=secret_keys,
    )
    assert not [m for m in sys.modules if m == "moto" or m.startswith("moto.")]
    print(json.dumps(sorted(r.urn for r in monitor.recorded)))
    """
)


@pytest.mark.parametrize("stack", ["prod-us-train", "dev-us-train"])
def test_program_runs_without_moto(stack: str, tmp_path: Path) -> None:
    plan = run_plan(stack)
    from infra.plan.mocks import AwsSnapshotMocks

    # what the snapshot answered for each data call the program made, keyed as the child looks it up
    replay = AwsSnapshotMocks(plan.region)
    answers = {}
    for token, args in plan.calls:
        answers[json.dumps([token, args], sort_keys=True, default=str)] = replay.call(
            type("Args", (), {"token": token, "args": args})()
        )
    answers_file = tmp_path / "answers.json"
    answers_file.write_text(json.dumps(answers))
    done = subprocess.run(
        [sys.executable, "-c", CHILD, stack, str(answers_file)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    urns = json.loads(done.stdout.strip().splitlines()[-1])
    assert urns == [r.urn for r in plan.resources]
