"""Reading a Dockerfile as data: its instructions, the base images its ``FROM`` lines resolve to with the
build arguments given, and whether each is pinned by digest. Pure: the text comes from the caller.

Syntax: https://docs.docker.com/reference/dockerfile/ (line continuations with ``\\``, comments, ``ARG``
before the first ``FROM`` usable in ``FROM``, ``${NAME}``/``$NAME`` substitution, ``FROM <image> AS <stage>``
and later ``FROM <stage>``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class Instruction:
    """One instruction: its keyword (upper case) and its arguments as written (continuations joined)."""

    keyword: str
    args: str
    line: int


def instructions(text: str) -> list[Instruction]:
    """The instructions of ``text``, comments and blank lines dropped, continued lines joined."""
    out: list[Instruction] = []
    buf: list[str] = []
    start = 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):
            continue  # a comment inside a continued instruction
        if not buf:
            start = n
        if line.endswith("\\"):
            buf.append(line[:-1].strip())
            continue
        buf.append(line)
        joined = " ".join(p for p in buf if p)
        buf = []
        keyword, _, args = joined.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip(), start))
    return out


def _substitute(value: str, env: Mapping[str, str]) -> str:
    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        default = m.group(2)
        return env.get(name) or (default or "")

    return _VAR.sub(one, value)


@dataclass(frozen=True)
class BaseImage:
    """An image a ``FROM`` pulls: as resolved, the build argument it came from (if any), its line."""

    ref: str
    arg: str | None
    line: int

    @property
    def pinned(self) -> bool:
        return bool(DIGEST.search(self.ref))


def base_images(text: str, build_args: Mapping[str, str] | None = None) -> list[BaseImage]:
    """Every image the Dockerfile's stages start from (stages built from an earlier stage, and
    ``scratch``, left out), resolved with the global ``ARG`` defaults overridden by ``build_args``."""
    args: dict[str, str] = {}
    given = dict(build_args or {})
    stages: set[str] = set()
    out: list[BaseImage] = []
    seen_from = False
    for ins in instructions(text):
        if ins.keyword == "ARG" and not seen_from:
            name, _, default = ins.args.partition("=")
            args[name.strip()] = given.get(name.strip(), default.strip().strip('"'))
        elif ins.keyword == "FROM":
            seen_from = True
            words = [w for w in ins.args.split() if not w.startswith("--")]
            image = words[0]
            stage = words[2].lower() if len(words) >= 3 and words[1].lower() == "as" else None
            m = re.fullmatch(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", image)
            ref = _substitute(image, args)
            if ref.lower() not in stages and ref != "scratch":
                out.append(BaseImage(ref, m.group(1) if m else None, ins.line))
            if stage:
                stages.add(stage)
    return out


@dataclass(frozen=True)
class AccountAdd:
    """A ``useradd``/``groupadd`` of a ``RUN`` step: the name and the numeric id it asks for."""

    command: str  # useradd | groupadd
    name: str
    id: int | None
    user_group: bool
    line: int


def account_adds(text: str) -> list[AccountAdd]:
    """The users and groups the ``RUN`` steps create (``useradd``/``groupadd`` with their options)."""
    out: list[AccountAdd] = []
    for ins in instructions(text):
        if ins.keyword != "RUN":
            continue
        for part in re.split(r"&&|;|\|\|", ins.args):
            words = part.split()
            for cmd in ("useradd", "groupadd"):
                if cmd not in words:
                    continue
                rest = words[words.index(cmd) + 1 :]
                ident: int | None = None
                name = None
                user_group = False
                i = 0
                while i < len(rest):
                    w = rest[i]
                    if w in ("-u", "--uid", "-g", "--gid") and i + 1 < len(rest):
                        if (cmd == "useradd" and w in ("-u", "--uid")) or (
                            cmd == "groupadd" and w in ("-g", "--gid")
                        ):
                            ident = int(rest[i + 1])
                        i += 2
                        continue
                    if w.startswith("--uid=") or w.startswith("--gid="):
                        ident = int(w.split("=", 1)[1])
                    elif w in ("-U", "--user-group"):
                        user_group = True
                    elif w in ("-s", "--shell", "-d", "--home-dir", "-c", "--comment", "-G", "--groups"):
                        i += 2
                        continue
                    elif not w.startswith("-"):
                        name = w
                    i += 1
                if name:
                    out.append(AccountAdd(cmd, name, ident, user_group, ins.line))
    return out
