"""Shared fixtures: plan a stack once per session and hand the recorded resources to tests."""

from __future__ import annotations

import copy
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pytest
import yaml

from infra.io.facts_file import FACTS_DIR_ENV
from infra.io.stackfiles import list_stacks
from infra.plan.mocks import AwsSnapshotMocks
from infra.plan.runner import Plan, run_plan, run_program
from infra.plan.summaries import CACHE_ENV
from tests.support.config_cases import drop_at, set_at
from trainer.tools.moto_server import MotoServer

# The suite judges the offline plan on moto's snapshot: a refreshed facts file in the checkout's facts/
# (aiplat facts refresh) would change the answers under it. Tests that want one name their own folder.
os.environ[FACTS_DIR_ENV] = tempfile.mkdtemp(prefix="aiplat-facts-")
# Plan summaries (infra/plan/summaries.py) of this session only, never the checkout's build/plan-cache.
os.environ[CACHE_ENV] = tempfile.mkdtemp(prefix="aiplat-plan-cache-")

REPO = Path(__file__).resolve().parents[1]
STACKS = list_stacks()
EXAMPLES_DIR = REPO / "examples"
EXAMPLES = list_stacks(EXAMPLES_DIR)


@pytest.fixture(autouse=True)
def piped_console_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's piped output width (``infra/cli/common.py``: ``COLUMNS`` or 140) the same in every run: a
    pytest-xdist worker inherits whatever ``COLUMNS`` the parent had (80 in some terminals and CI logs)."""
    monkeypatch.setenv("COLUMNS", "140")


class _Delete:
    """The value for with_value() that removes the key; its repr is stable, so parametrized test ids are the
    same in every pytest-xdist worker."""

    def __repr__(self) -> str:
        return "<delete>"


DELETE = _Delete()


def with_value(doc: dict, path: str, value: object) -> dict:
    """A deep copy of ``doc`` with the dotted ``path`` set to ``value`` (missing parents are created)."""
    doc = copy.deepcopy(doc)
    (drop_at(path) if value is DELETE else set_at(path, value))(doc)
    return doc


def assert_rejected(raw: dict, path: str, value: object, expected: list[str]) -> None:
    """``raw`` with ``path`` set to ``value`` fails validation with every fragment in ``expected``,
    one line per problem, each naming its ``aiplat:platform`` field."""
    from infra.core.errors import ConfigErrors
    from infra.schema.parse import parse_platform_config

    with pytest.raises(ConfigErrors) as info:
        parse_platform_config(with_value(raw, path, value))
    message = str(info.value)
    for fragment in expected:
        assert fragment in message, message
    assert all(line.startswith("aiplat:platform") for line in message.splitlines()), message


def build(declare: Callable[[pulumi.ProviderResource], None], *, region: str = "us-east-1") -> Plan:
    """Run ``declare(provider)`` as a Pulumi program under the offline mocks: a component built with
    arguments chosen by the test, not through a stack file. Returns what it registered, as a Plan."""

    def program() -> None:
        declare(aws.Provider("aws", region=region))

    monitor = run_program(program, stack="test", mocks=AwsSnapshotMocks(region))
    return Plan(
        stack="test",
        project="aiplat",
        region=region,
        config={},
        resources=sorted(monitor.recorded, key=lambda r: r.urn),
        outputs=monitor.stack_outputs,
    )


@pytest.fixture(scope="session")
def plan_stack() -> Callable[[str], Plan]:
    """``plan_stack("prod-us-train")`` runs the real program under mocks (cached per session)."""
    cache: dict[str, Plan] = {}

    def get(stack: str) -> Plan:
        if stack not in cache:
            cache[stack] = run_plan(stack)
        return cache[stack]

    return get


@pytest.fixture(scope="session")
def plan_example() -> Callable[[str], Plan]:
    """``plan_example("capacity-block")``: an example stack under examples/, planned with that folder as the
    project's stacks (cached per session)."""
    cache: dict[str, Plan] = {}

    def get(stack: str) -> Plan:
        if stack not in cache:
            cache[stack] = run_plan(stack, stacks_dir=EXAMPLES_DIR)
        return cache[stack]

    return get


@pytest.fixture(scope="session")
def plan_first_preview() -> Callable[[str], Plan]:
    """``plan_first_preview("prod-us-train")``: what the first ``pulumi preview`` of the new stack sends
    (``run_plan(first_preview=True)``: every input computed from another resource's output unknown); a
    stack of ``STACKS`` or of ``EXAMPLES`` (cached per session)."""
    cache: dict[str, Plan] = {}

    def get(stack: str) -> Plan:
        if stack not in cache:
            stacks_dir = None if stack in STACKS else EXAMPLES_DIR
            cache[stack] = run_plan(stack, stacks_dir=stacks_dir, first_preview=True)
        return cache[stack]

    return get


@pytest.fixture
def monitors(monkeypatch: pytest.MonkeyPatch) -> list:
    """Every RecordingMonitor the plan runner creates during the test, to see what was registered
    before a refusal (the runner creates one per program run)."""
    from infra.plan import runner

    created: list = []
    original = runner.RecordingMonitor.__init__

    def spy(self, mocks):
        original(self, mocks)
        created.append(self)

    monkeypatch.setattr(runner.RecordingMonitor, "__init__", spy)
    return created


@pytest.fixture()
def moto_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoServer]:
    """A running moto S3 server, emptied; ``AWS_*`` variables point boto3, the S3 connector and child
    processes at it."""
    s3 = MotoServer()
    for k, v in s3.env().items():
        monkeypatch.setenv(k, v)
    s3.start()
    s3.reset()  # moto keeps its backends in this process across servers: start each test from an empty S3
    try:
        yield s3
    finally:
        s3.stop()


@pytest.fixture
def stack_doc() -> Callable[[str], dict]:
    """The parsed YAML of a real stack file, for tests that derive a bad variant from it."""

    def get(stack: str) -> dict:
        return yaml.safe_load((REPO / "stacks" / f"Pulumi.{stack}.yaml").read_text())

    return get


@pytest.fixture
def stack_config(stack_doc) -> Callable[[str], dict]:
    """``stack_config("prod-us-train")``: the stack file's ``aiplat:platform`` config, freshly read, for a
    test to change."""
    from infra.core.project import CONFIG_KEY

    return lambda stack: stack_doc(stack)["config"][CONFIG_KEY]


@pytest.fixture
def write_stack(tmp_path: Path) -> Callable[[str, dict], Path]:
    """Write a stack document into a temporary stacks folder and return the folder."""

    def write(name: str, doc: dict) -> Path:
        (tmp_path / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
        return tmp_path

    return write
