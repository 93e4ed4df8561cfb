"""The Pulumi CLI's command line as recorded from its reference pages, to parse the command lines the docs
show and the Automation API runs (there is no Pulumi CLI on this machine).

Sources (Pulumi CLI 3.x reference, read 2026-12-06): https://www.pulumi.com/docs/iac/cli/commands/pulumi/
(global flags), .../pulumi_up/, .../pulumi_preview/, .../pulumi_stack/, .../pulumi_stack_init/,
.../pulumi_stack_select/, .../pulumi_stack_output/, .../pulumi_stack_history/,
.../pulumi_stack_change-secrets-provider/, .../pulumi_config_set/, .../pulumi_login/, .../pulumi_version/,
.../pulumi_whoami/, .../pulumi_destroy/, .../pulumi_state_unprotect/. Flags the Automation API passes that
the pages do not list (hidden in the CLI): ``--exec-kind``, ``--event-log``, ``--client``, ``--exec-agent``
(pulumi/automation/_stack.py, SDK 3.272.0).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

# flag -> takes a value; short forms map to their long form
GLOBAL = {
    "--color": True,
    "--cwd": True,
    "--disable-integrity-checking": False,
    "--emoji": False,
    "--fully-qualify-stack-names": False,
    "--help": False,
    "--logflow": False,
    "--logtostderr": False,
    "--memprofilerate": True,
    "--non-interactive": False,
    "--profiling": True,
    "--tracing": True,
    "--verbose": True,
}
SHORT = {
    "-C": "--cwd",
    "-e": "--emoji",
    "-h": "--help",
    "-v": "--verbose",
    "-Q": "--fully-qualify-stack-names",
}

_UPDATE = {  # what pulumi up and pulumi preview share
    "--attach-debugger": True,
    "--config": True,
    "--config-file": True,
    "--config-path": False,
    "--debug": False,
    "--diff": False,
    "--exclude": True,
    "--exclude-dependents": False,
    "--expect-no-changes": False,
    "--json": False,
    "--message": True,
    "--parallel": True,
    "--policy-pack": True,
    "--policy-pack-config": True,
    "--refresh": False,
    "--replace": True,
    "--run-program": False,
    "--secrets-provider": True,
    "--show-config": False,
    "--show-full-output": False,
    "--show-reads": False,
    "--show-replacement-steps": False,
    "--show-sames": False,
    "--show-secrets": False,
    "--stack": True,
    "--suppress-outputs": False,
    "--suppress-permalink": False,
    "--suppress-progress": False,
    "--target": True,
    "--target-dependents": False,
    "--target-replace": True,
    "--continue-on-error": False,
    # hidden, passed by the Automation API
    "--exec-kind": True,
    "--event-log": True,
    "--client": True,
    "--exec-agent": True,
}
_UPDATE_SHORT = {
    "-c": "--config",
    "-d": "--debug",
    "-j": "--json",
    "-m": "--message",
    "-p": "--parallel",
    "-s": "--stack",
}

COMMANDS: dict[tuple[str, ...], dict[str, bool]] = {
    ("up",): {**_UPDATE, "--yes": False, "--skip-preview": False, "--plan": True},
    ("preview",): {**_UPDATE, "--save-plan": True, "--import-file": True},
    ("stack",): {"--stack": True, "--show-urns": False, "--show-ids": False, "--show-secrets": False},
    ("stack", "init"): {
        "--stack": True,
        "--secrets-provider": True,
        "--copy-config-from": True,
        "--no-select": False,
    },
    ("stack", "select"): {"--stack": True, "--create": False, "--secrets-provider": True},
    ("stack", "output"): {"--stack": True, "--json": False, "--show-secrets": False, "--shell": False},
    ("stack", "history"): {
        "--stack": True,
        "--json": False,
        "--show-secrets": False,
        "--page-size": True,
        "--page": True,
        "--full-dates": False,
    },
    ("stack", "change-secrets-provider"): {"--stack": True},
    ("stack", "ls"): {"--json": False, "--all": False},
    ("config", "set"): {
        "--stack": True,
        "--secret": False,
        "--plaintext": False,
        "--path": False,
        "--config-file": True,
        "--type": True,
    },
    ("config", "get"): {"--stack": True, "--json": False, "--path": False, "--config-file": True},
    ("login",): {"--local": False, "--cloud-url": True, "--default-org": True, "--insecure": False},
    ("logout",): {"--all": False, "--local": False, "--cloud-url": True},
    ("destroy",): {
        "--stack": True,
        "--yes": False,
        "--skip-preview": False,
        "--target": True,
        "--target-dependents": False,
        "--exclude": True,
        "--exclude-protected": False,
        "--continue-on-error": False,
        "--message": True,
        "--parallel": True,
        "--preview-only": False,
        "--refresh": False,
        "--remove": False,
        "--diff": False,
        "--show-secrets": False,
        "--suppress-outputs": False,
        "--suppress-permalink": False,
        "--config-file": True,
    },
    ("state", "unprotect"): {"--stack": True, "--all": False, "--yes": False},
    ("version",): {},
    ("whoami",): {"--json": False, "--verbose": False},
}
COMMAND_SHORT = {("stack",): {"-s": "--stack", "-u": "--show-urns", "-i": "--show-ids"}}
for _words, _flags in COMMANDS.items():
    if "--stack" in _flags:
        COMMAND_SHORT.setdefault(_words, {}).setdefault("-s", "--stack")
for _words in (("up",), ("preview",)):
    COMMAND_SHORT[_words] = {
        **_UPDATE_SHORT,
        **({"-y": "--yes", "-f": "--skip-preview"} if _words == ("up",) else {}),
    }
COMMAND_SHORT.setdefault(("stack", "output"), {})["-j"] = "--json"
COMMAND_SHORT[("destroy",)].update(
    {"-y": "--yes", "-f": "--skip-preview", "-m": "--message", "-p": "--parallel"}
)
COMMAND_SHORT[("state", "unprotect")]["-y"] = "--yes"
COMMAND_SHORT.setdefault(("stack", "history"), {})["-j"] = "--json"


class UnknownCommand(ValueError):
    """A subcommand or flag the recorded table does not have."""


@dataclass
class ParsedCommand:
    words: tuple[str, ...]
    flags: dict[str, list[str]] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)

    def one(self, flag: str) -> str | None:
        values = self.flags.get(flag)
        return values[-1] if values else None


def parse(argv: list[str]) -> ParsedCommand:
    """``argv`` after ``pulumi``: its subcommand and flags (``--flag value``, ``--flag=value``, short forms);
    UnknownCommand for a subcommand or flag the table lacks."""
    # global switches may come first (the Automation API puts --non-interactive there)
    lead = 0
    while lead < len(argv) and argv[lead] in GLOBAL and not GLOBAL[argv[lead]]:
        lead += 1
    words = [a for a in argv[lead : lead + 2] if not a.startswith("-")]
    for n in (2, 1):
        if tuple(words[:n]) in COMMANDS and argv[lead : lead + n] == words[:n]:
            command = tuple(words[:n])
            break
    else:
        raise UnknownCommand(f"pulumi {' '.join(words) or '(no command)'}: not a recorded subcommand")
    known, short = {**GLOBAL, **COMMANDS[command]}, {**SHORT, **COMMAND_SHORT.get(command, {})}
    parsed = ParsedCommand(command)
    rest = argv[:lead] + argv[lead + len(command) :]
    i = 0
    while i < len(rest):
        token = rest[i]
        i += 1
        if not token.startswith("-") or token == "-":
            parsed.args.append(token)
            continue
        name, eq, value = token.partition("=")
        name = short.get(name, name)
        if name not in known:
            raise UnknownCommand(f"pulumi {' '.join(command)}: unknown flag {token}")
        if known[name] and not eq:
            if i >= len(rest):
                raise UnknownCommand(f"pulumi {' '.join(command)}: {name} needs a value")
            value = rest[i]
            i += 1
        parsed.flags.setdefault(name, []).append(value if known[name] or eq else "true")
    return parsed


def parse_line(line: str) -> ParsedCommand:
    """A shell line starting with ``pulumi`` (comments and a trailing pipe left off)."""
    argv = shlex.split(line, comments=True)
    if not argv or argv[0] != "pulumi":
        raise UnknownCommand(f"not a pulumi command line: {line}")
    if "|" in argv:
        argv = argv[: argv.index("|")]
    return parse(argv[1:])
