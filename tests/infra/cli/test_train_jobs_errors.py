"""What ``aiplat train list/logs`` print when AWS or the install is not what they need: each expected
failure is one line with its cause and fix and its own exit code, never "this is a bug" (exit 70). All in
process: an endpoint nothing listens on for "no network", botocore's Stubber for the answers AWS gives
a denied or expired caller."""

from __future__ import annotations

import socket
import sys
import tomllib
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from infra.cli import common, train_jobs
from infra.cli.main import main
from infra.io.stackfiles import load_stack_config
from tests.conftest import REPO

STACK = "prod-us-train"
CFG = load_stack_config(STACK)


def _closed_port_url() -> str:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def fake_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials boto3 accepts without asking anyone (a stubbed or unreachable endpoint checks none)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # one refused connection is enough: no retries


class _StubbedSession:
    """``train_jobs._aws``'s session with each client's answers queued on a botocore Stubber."""

    def __init__(self, errors: dict[str, tuple[str, str, str]]):
        self.session = boto3.session.Session(region_name=CFG.region)
        self.errors = errors
        self.stubbers: list[Stubber] = []

    def client(self, service: str) -> Any:
        c = self.session.client(service)
        stub = Stubber(c)
        if service in self.errors:
            operation, code, message = self.errors[service]
            stub.add_client_error(operation, service_error_code=code, service_message=message)
        stub.activate()
        self.stubbers.append(stub)
        return c


def _no_bug(err: str) -> None:
    assert "this is a bug" not in err and "Traceback" not in err


def test_list_without_network_says_aws_did_not_answer(fake_credentials, monkeypatch, capsys) -> None:
    url = _closed_port_url()
    monkeypatch.setenv("AWS_ENDPOINT_URL", url)
    code = main(["train", "list", "-s", STACK])
    err = capsys.readouterr().err
    assert code == common.EXIT_AWS
    assert f"AWS did not answer at {url}" in err and "EndpointConnectionError" in err
    assert "fix: check this machine's network, proxy (HTTPS_PROXY) and AWS_ENDPOINT_URL" in err
    _no_bug(err)
    assert len(err.strip().splitlines()) == 1


def test_logs_denied_by_eks_names_the_action_to_allow(fake_credentials, monkeypatch, capsys) -> None:
    message = (
        "User: arn:aws:sts::123456789012:assumed-role/dev/alice is not authorized to perform: "
        "eks:DescribeCluster on resource: arn:aws:eks:us-east-1:123456789012:cluster/x"
    )
    stubbed = _StubbedSession({"eks": ("describe_cluster", "AccessDeniedException", message)})
    monkeypatch.setattr(train_jobs, "_aws", lambda cfg: stubbed)
    code = main(["train", "logs", "job-1", "-s", STACK])
    err = capsys.readouterr().err
    assert code == common.EXIT_AWS_DENIED
    assert "AWS denied eks:DescribeCluster (AccessDeniedException: User: arn:aws:sts::" in err
    assert "fix: allow eks:DescribeCluster to your role" in err
    _no_bug(err)


def test_list_with_an_expired_token_says_sign_in_again(fake_credentials, monkeypatch, capsys) -> None:
    stubbed = _StubbedSession(
        {
            "eks": (
                "describe_cluster",
                "ExpiredTokenException",
                "The security token included in the request is expired",
            )
        }
    )
    monkeypatch.setattr(train_jobs, "_aws", lambda cfg: stubbed)
    code = main(["train", "list", "-s", STACK])
    err = capsys.readouterr().err
    assert code == common.EXIT_AWS
    assert "AWS credentials: they have expired (ExpiredTokenException" in err and "aws sso login" in err
    _no_bug(err)


def test_a_missing_package_of_the_install_says_how_to_install(fake_credentials, monkeypatch, capsys) -> None:
    stubbed = _StubbedSession({})  # nothing is called: the client is imported first
    monkeypatch.setattr(train_jobs, "_aws", lambda cfg: stubbed)
    monkeypatch.setitem(sys.modules, "kubernetes", None)  # `import kubernetes` raises ModuleNotFoundError
    code = main(["train", "list", "-s", STACK])
    err = capsys.readouterr().err
    assert code == common.EXIT_TOOL
    assert "the Python package 'kubernetes' is not installed" in err and "pip install -e ." in err
    _no_bug(err)


def test_a_missing_module_of_our_own_is_still_a_bug() -> None:
    assert common.user_error(ModuleNotFoundError("No module named 'infra.nope'", name="infra.nope")) is None


def test_the_jobs_client_is_in_the_base_install() -> None:
    """`pip install -e .` (and `make plan`, which installs the base and the plan extra) brings every
    package `aiplat train list/logs` imports."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    base = {d.split("==")[0].split(">")[0].split("[")[0].strip().lower() for d in project["dependencies"]}
    assert "kubernetes" in base
    assert "jobs" not in project["optional-dependencies"]
