"""The ``aiplat`` command line: every command's ``--help``, exit codes, errors without tracebacks."""

from __future__ import annotations

import argparse

import pytest

from infra.cli import common, main
from infra.core.errors import (
    ClusterAccessError,
    ConfigError,
    ConfigErrors,
    DataSourceError,
    JobNotFoundError,
    NameTakenError,
    NoFlavorFitsError,
    PolicyViolationError,
    ToolMissingError,
    UnknownTeamError,
)
from tests.conftest import REPO


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in main.parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_module_in_commands_is_a_subcommand() -> None:
    assert sorted(_commands()) == sorted(
        [
            "plan",
            "review",
            "preflight",
            "bootstrap",
            "images",
            "cost",
            "rollout",
            "check-storage",
            "config-reference",
            "docs",
            "train",
            "addon-versions",
            "facts",
            "prices",
            "release",
        ]
    )


@pytest.mark.parametrize("command", sorted(_commands()))
def test_help_of_every_command(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main.main([command, "--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    parser = _commands()[command]
    assert out.startswith(f"usage: aiplat {command}")
    assert parser.description and " ".join(parser.description.split())[:60] in out
    # every option has a help text
    for action in parser._actions:
        if action.option_strings and action.help is not argparse.SUPPRESS:
            assert action.help, (command, action.option_strings)


def test_top_level_help_lists_commands_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main.main(["--help"])
    out = capsys.readouterr().out
    for command in _commands():
        assert command in out
    for code, meaning in common.EXIT_CODES.items():
        assert f"{code:>3}  {meaning}" in out


def test_exit_codes_are_distinct_and_match_the_errors() -> None:
    codes = [v for k, v in vars(common).items() if k.startswith("EXIT_") and isinstance(v, int)]
    assert len(codes) == len(set(codes)) == len(common.EXIT_CODES)
    assert ConfigErrors([ConfigError("f", "p")]).exit_code == common.EXIT_CONFIG
    assert DataSourceError("x").exit_code == common.EXIT_DATA
    assert ToolMissingError("x").exit_code == common.EXIT_TOOL
    assert PolicyViolationError("x").exit_code == common.EXIT_POLICY
    assert ClusterAccessError("x").exit_code == common.EXIT_CLUSTER
    assert UnknownTeamError("x").exit_code == common.EXIT_TEAM
    assert NameTakenError("x").exit_code == common.EXIT_NAME_TAKEN
    assert NoFlavorFitsError("x").exit_code == common.EXIT_NO_FLAVOR
    assert JobNotFoundError("x").exit_code == common.EXIT_NO_JOB


def _failing_command(exc: Exception):
    def add_parser(sub: argparse._SubParsersAction) -> None:
        p = sub.add_parser("boom", help="fails", description="fails")
        p.set_defaults(run=lambda args, console, err: (_ for _ in ()).throw(exc))

    return type("Boom", (), {"add_parser": staticmethod(add_parser)})


def test_a_bug_prints_one_line_and_exit_70_unless_debug(monkeypatch, capsys) -> None:
    monkeypatch.setattr(main, "COMMANDS", (*main.COMMANDS, _failing_command(RuntimeError("it broke"))))
    assert main.main(["boom"]) == common.EXIT_INTERNAL
    err = capsys.readouterr().err
    assert "error: it broke" in err and "this is a bug: run again with --debug" in err
    assert "Traceback" not in err
    assert main.main(["--debug", "boom"]) == common.EXIT_INTERNAL
    assert "Traceback" in capsys.readouterr().err


def test_a_user_error_keeps_its_code_without_traceback(monkeypatch, capsys) -> None:
    monkeypatch.setattr(main, "COMMANDS", (*main.COMMANDS, _failing_command(ToolMissingError("install it"))))
    assert main.main(["boom"]) == common.EXIT_TOOL
    err = capsys.readouterr().err
    assert err.strip() == "error: install it"


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import tomllib

    with pytest.raises(SystemExit) as exc:
        main.main(["--version"])
    assert exc.value.code == 0
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert capsys.readouterr().out.strip() == f"aiplat {pyproject['project']['version']}"


@pytest.mark.parametrize(
    "argv",
    [
        ["--debug", "plan", "--stack", "dev-us-train"],
        ["plan", "--stack", "dev-us-train", "--debug"],
        ["plan", "--debug", "--stack", "dev-us-train"],
        ["train", "render", "--stack", "dev-us-train", "--config", "c.toml", "--nodes", "1", "--debug"],
    ],
)
def test_debug_before_or_after_the_command(argv: list[str]) -> None:
    assert main.parser().parse_args(argv).debug is True
    assert main.parser().parse_args([a for a in argv if a != "--debug"]).debug is False


def test_debug_after_the_command_shows_the_traceback(monkeypatch, capsys) -> None:
    monkeypatch.setattr(main, "COMMANDS", (*main.COMMANDS, _failing_command(RuntimeError("it broke"))))
    assert main.main(["boom", "--debug"]) == common.EXIT_INTERNAL
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--kubernetes-version", "banana"],
            "argument --kubernetes-version: 'banana' is not a Kubernetes minor version; use a minor such as",
        ),
        (
            ["--kubernetes-version", "v1.35"],
            "argument --kubernetes-version: 'v1.35' is not a Kubernetes minor version; did you mean '1.35'?",
        ),
        (
            ["--kubernetes-version", "1.35", "--region", "us-east-9"],
            "argument --region: 'us-east-9' is not an AWS region; did you mean 'us-east-2', 'us-east-1'",
        ),
    ],
)
def test_bad_arguments_are_refused_with_a_hint(
    args: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main.main(["addon-versions", *args])
    assert exc.value.code == common.EXIT_CONFIG
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith(f"aiplat addon-versions: error: {expected}"), last
