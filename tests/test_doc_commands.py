"""Every ``pulumi`` and ``aiplat`` command line the deploy guide, the how-to pages and the README show parses:
``aiplat`` lines with the CLI's own parser, ``pulumi`` lines against the Pulumi CLI's recorded subcommands and
flags (tests/support/pulumi_cli.py), so a misspelt or unknown flag fails here. A ``pulumi preview`` or
``pulumi up`` with the policy pack carries the stack's pack config, and the inference API keys are set on
the stack the program reads them from."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from infra.cli.main import parse
from infra.core.config import Role
from infra.io.policypack import stack_pack_config_file
from infra.io.stackfiles import display_path, list_stacks, load_stack_config
from tests.conftest import REPO
from tests.support.pulumi_cli import UnknownCommand, parse_line

# The pages an operator follows: every command of theirs, inline ones too; the other pages' shell blocks
# (not the generated reference: its CLI page is argparse's own help).
PAGES = [REPO / "README.md", REPO / "docs" / "deploy.md", *sorted((REPO / "docs" / "how-to").glob("*.md"))]
OTHERS = sorted(p for p in (REPO / "docs").rglob("*.md") if "reference" not in p.parts and p not in PAGES)
FENCE = re.compile(r"```(?:sh|bash|console|shell)\n(.*?)```", re.S)
INLINE = re.compile(r"`((?:pulumi|aiplat) [^`]+)`")
TOOLS = ("pulumi ", "aiplat ", ".venv/bin/aiplat ")


def command_lines(text: str, *, inline: bool = True) -> list[str]:
    """Command lines of the shell blocks (continuations joined, comments and pipes left off) and, with
    ``inline``, of inline code that starts with a tool's name and names a flag (a whole command, not a
    mention). A line whose arguments a shell loop makes (``$(for ...)``) is left out."""
    out = []
    for block in FENCE.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line.startswith(TOOLS) and "$(for " not in line:
                out.append(line)
    out += [m for m in INLINE.findall(text) if " -" in m] if inline else []
    return out


# a value of the right shape for the placeholders that name one (the others get "1")
PLACEHOLDERS = {"region": "us-east-1", "stack": "prod-us-train", "minor": "1.35"}


def argv(line: str) -> list[str]:
    """The line as the shell splits it, placeholders (``<key>``) filled, optional parts (``[--x <y>]``)
    kept, up to a pipe or ``&&``."""
    line = re.sub(r"\[([^\]]*)\]", r"\1", " ".join(line.split()))
    words = shlex.split(re.sub(r"<([^>]+)>", lambda m: PLACEHOLDERS.get(m[1], "1"), line), comments=True)
    for stop in ("|", "&&", ";"):
        if stop in words:
            words = words[: words.index(stop)]
    return words


ALL = [(page, line) for page in PAGES for line in command_lines(page.read_text())] + [
    (page, line) for page in OTHERS for line in command_lines(page.read_text(), inline=False)
]
# Every page that names the pack in a pulumi command, inline or in a block, the pack's own README included
PACK_PAGES = [*PAGES, *OTHERS, REPO / "policies" / "README.md"]


def test_the_pages_show_commands() -> None:
    tools = {argv(line)[0].rsplit("/", 1)[-1] for _, line in ALL}
    assert tools == {"pulumi", "aiplat"}
    assert sum(page.name == "deploy.md" for page, _ in ALL) >= 8


@pytest.mark.parametrize(("page", "line"), ALL, ids=[f"{p.name}:{i}" for i, (p, _) in enumerate(ALL)])
def test_command_line_parses(page: Path, line: str) -> None:
    words = argv(line)
    if words[0].endswith("aiplat"):
        try:
            parse(words[1:])
        except SystemExit as e:
            pytest.fail(f"{page.name}: `{line}` does not parse (exit {e.code})")
        return
    try:
        parsed = parse_line(shlex.join(words))
    except UnknownCommand as e:
        pytest.fail(f"{page.name}: `{line}`: {e}")
    if parsed.words in (("preview",), ("up",)) and parsed.flags.get("--policy-pack"):
        stack = parsed.one("--stack")
        assert stack, f"{page.name}: `{line}` names no stack"
        wanted = display_path(stack_pack_config_file(stack))
        assert parsed.flags.get("--policy-pack-config") == [wanted], (
            f"{page.name}: `{line}` runs the pack without the stack's settings: --policy-pack-config {wanted}"
        )


def test_api_keys_are_set_where_the_program_reads_them() -> None:
    """infra/edge/wire.py: an infer stack of a global endpoint serves the keys of its source (train) stack's
    ``inferenceApiKeys`` output, made from that stack's ``aiplat:inference-api-keys``; an infer stack
    without one reads its own."""
    configs = {s: load_stack_config(s) for s in list_stacks()}
    seen = 0
    for page in [*PAGES, REPO / "docs" / "inference" / "cluster.md"]:
        for line in command_lines(page.read_text()):
            if "aiplat:inference-api-keys" not in line or not line.startswith("pulumi "):
                continue
            stack = parse_line(shlex.join(argv(line))).one("--stack")
            cfg = configs[stack]
            readers = [
                s
                for s, c in configs.items()
                if c.role is Role.infer
                and c.inference is not None
                and c.inference.global_endpoint is not None
                and c.storage.source_stack == stack
            ]
            reads_own = (
                cfg.role is Role.infer and cfg.inference is not None and cfg.inference.global_endpoint is None
            )
            assert (cfg.role is Role.train and readers) or reads_own, (
                f"{page.name}: `{line}` sets the keys on {stack}, which no stack serves them from"
            )
            seen += 1
    assert seen >= 3


@pytest.mark.parametrize("page", PACK_PAGES, ids=[p.name for p in PACK_PAGES])
def test_every_page_runs_the_pack_with_the_stacks_settings(page: Path) -> None:
    """A `pulumi preview/up --policy-pack` anywhere in the docs, inline spans included, passes the stack's
    settings: without them the pack's defaults refuse prod (gpu-budget, cost-cap)."""
    for line in [*command_lines(page.read_text()), *INLINE.findall(page.read_text())]:
        words = argv(line)
        if words[0] != "pulumi" or words[1:2] not in (["preview"], ["up"]) or "--policy-pack" not in words:
            continue
        assert "--policy-pack-config" in words, (
            f"{page.name}: `{line}` runs the pack without the stack's settings"
        )
