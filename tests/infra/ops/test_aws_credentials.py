"""Missing or expired AWS credentials: the same one line with the fix, and exit 6, from every command that
calls AWS; against the local moto server (no credentials at all) and STS's expired-token error (moto
accepts any token, so that answer is botocore's Stubber on GetCallerIdentity, checked against the model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError

from infra.cli.common import EXIT_AWS
from infra.cli.main import main
from infra.core.errors import AwsCredentialsError
from infra.io.aws_credentials import require_credentials
from tests.support.stubbing import OperationStubber
from trainer.tools.moto_server import MotoServer

COMMANDS = {
    "preflight": ["preflight", "--stack", "prod-us-train"],
    "addon-versions": ["addon-versions", "--kubernetes-version", "1.35", "--region", "us-east-1"],
    "check-storage": ["check-storage", "--stack", "prod-us-train"],
}


def _sts_answers(server: MotoServer, code: str, message: str) -> Any:
    """A ``Clients`` factory on the moto server whose STS clients answer GetCallerIdentity with ``code``."""
    made: dict[tuple[str, str], Any] = {}

    def clients(service: str, region: str) -> Any:
        if (service, region) not in made:
            client = server.client(service, region)
            if service == "sts":
                stub = OperationStubber(client, ["GetCallerIdentity"])
                stub.add_client_error(
                    "get_caller_identity",
                    service_error_code=code,
                    service_message=message,
                    http_status_code=403,
                )
                stub.activate()
            made[(service, region)] = client
        return made[(service, region)]

    return clients


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(argv)
    return code, capsys.readouterr().err.splitlines()


def test_no_credentials_one_line_and_exit_6_everywhere(
    aws: MotoServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    seen = {name: _run(argv, capsys) for name, argv in COMMANDS.items()}
    assert {name: code for name, (code, _) in seen.items()} == dict.fromkeys(COMMANDS, EXIT_AWS)
    lines = {name: err for name, (_, err) in seen.items()}
    assert len({tuple(err) for err in lines.values()}) == 1, lines  # the very same message
    (line,) = lines["preflight"]
    assert line.startswith("error: AWS credentials: none found (Unable to locate credentials); fix: sign in ")
    assert "aws sso login" in line and "(see https://boto3.amazonaws.com/" in line


def test_expired_credentials_one_line_and_exit_6_everywhere(
    aws: MotoServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import infra.io.aws_live

    expired = "The security token included in the request is expired"
    monkeypatch.setattr(
        infra.io.aws_live, "boto3_clients", lambda: _sts_answers(aws, "ExpiredToken", expired)
    )
    seen = {name: _run(argv, capsys) for name, argv in COMMANDS.items()}
    assert {name: code for name, (code, _) in seen.items()} == dict.fromkeys(COMMANDS, EXIT_AWS)
    assert len({tuple(err) for _, err in seen.values()}) == 1, seen
    (line,) = seen["check-storage"][1]
    assert line.startswith(
        f"error: AWS credentials: they have expired (ExpiredToken: {expired}); fix: sign in "
    )


def test_a_denied_call_is_not_a_credentials_problem(aws: MotoServer) -> None:
    """AccessDenied means the credentials work and one permission is missing: the caller says which."""
    with pytest.raises(ClientError):
        require_credentials(_sts_answers(aws, "AccessDenied", "not authorized")("sts", "us-east-1"))
    with pytest.raises(AwsCredentialsError, match=r"AWS refused them \(InvalidClientTokenId: bad\)"):
        require_credentials(_sts_answers(aws, "InvalidClientTokenId", "bad")("sts", "us-east-1"))
    assert require_credentials(aws.client("sts", "us-east-1")).account == "123456789012"
