"""A content hash of a Docker build, for an image tag that changes exactly when the image can change.

What goes in: every file of the build context that the ignore file lets through (relative path, the
executable bit and the file's SHA-256), the Dockerfile's content, the build arguments, the target and the
platform. The ignore file is the one BuildKit and pulumi-docker-build use: ``<Dockerfile>.dockerignore``
beside the Dockerfile if it exists, else ``<context>/.dockerignore``
(pulumi/pulumi-docker-build v0.0.22 provider/internal/context.go). Patterns follow Docker's rules
(moby/patternmatcher: ``*``, ``?``, ``**``, ``!`` exceptions, the last matching pattern wins, a pattern
matching a parent directory matches everything below it):
https://docs.docker.com/build/concepts/context/#dockerignore-files
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from infra.core import dockerfiles
from infra.core.errors import ConfigError, ConfigErrors
from infra.core.facts import InstanceFacts
from infra.core.project import CONFIG_KEY
from infra.schema.platform import PlatformConfig
from infra.training.config import ImageBuild

# The repository root: the Pulumi project directory, where `pulumi up` runs and paths in the config start.
REPO_ROOT = Path(__file__).resolve().parents[2]
TAG_PREFIX = "ctx-"
TAG_HEX = 24


@dataclass(frozen=True)
class _Pattern:
    text: str
    regex: re.Pattern[str]
    exclusion: bool


def _to_regex(pattern: str) -> re.Pattern[str]:
    """moby/patternmatcher's translation of one pattern to a regular expression."""
    out = ["^"]
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "*":
            if pattern[i + 1 : i + 2] == "*":
                i += 1
                if pattern[i + 1 : i + 2] == "/":  # '**/' : zero or more directories
                    i += 1
                    out.append("(.*/)?")
                else:
                    out.append(".*")
            else:
                out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        elif c == "[":
            end = pattern.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                out.append(pattern[i : end + 1].replace("[!", "[^"))
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    out.append("$")
    return re.compile("".join(out))


def parse_ignore(text: str) -> list[_Pattern]:
    patterns = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        exclusion = line.startswith("!")
        if exclusion:
            line = line[1:].strip()
        line = os.path.normpath(line).lstrip("/")
        if line in ("", "."):
            continue
        patterns.append(_Pattern(line, _to_regex(line), exclusion))
    return patterns


def ignored(path: str, patterns: Sequence[_Pattern]) -> bool:
    """Whether ``path`` (relative, '/'-separated) is left out of the context (MatchesOrParentMatches)."""
    parents = path.split("/")[:-1]
    matched = False
    for p in patterns:
        if p.exclusion != matched:
            continue
        hit = bool(p.regex.match(path)) or any(
            p.regex.match("/".join(parents[: i + 1])) for i in range(len(parents))
        )
        if hit:
            matched = not p.exclusion
    return matched


def _may_reinclude(directory: str, patterns: Sequence[_Pattern]) -> bool:
    """Whether an exception pattern could bring back something below an ignored ``directory``."""
    for p in patterns:
        if not p.exclusion:
            continue
        literal = re.split(r"[*?\[\\]", p.text, maxsplit=1)[0]
        if (
            literal.startswith(directory + "/")
            or (directory + "/").startswith(literal)
            or literal == directory
        ):
            return True
    return False


def ignore_file(root: Path, context: str, dockerfile: str) -> Path | None:
    beside = root / f"{dockerfile}.dockerignore"
    if beside.is_file():
        return beside
    in_context = root / context / ".dockerignore"
    return in_context if in_context.is_file() else None


def context_files(root: Path, context: str, dockerfile: str) -> list[str]:
    """The context's files that a build sees, relative to the context, sorted."""
    base = root / context
    rules = ignore_file(root, context, dockerfile)
    patterns = parse_ignore(rules.read_text()) if rules else []
    files: list[str] = []
    for dirpath, dirnames, filenames in os.walk(base):
        rel_dir = os.path.relpath(dirpath, base).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        keep = []
        for d in sorted(dirnames):
            rel = rel_dir + d
            if ignored(rel, patterns) and not _may_reinclude(rel, patterns):
                continue
            keep.append(d)
        dirnames[:] = keep
        files += [rel_dir + f for f in filenames if not ignored(rel_dir + f, patterns)]
    return sorted(files)


def build_hash(
    root: Path,
    *,
    context: str,
    dockerfile: str,
    build_args: Mapping[str, str],
    platform: str,
    target: str | None = None,
) -> str:
    """SHA-256 over everything that decides the image (see the module docstring)."""
    h = hashlib.sha256()
    base = root / context
    for rel in context_files(root, context, dockerfile):
        p = base / rel
        executable = os.access(p, os.X_OK)
        h.update(f"file\0{rel}\0{int(executable)}\0".encode())
        h.update(hashlib.sha256(p.read_bytes()).digest())
    h.update(b"dockerfile\0" + (root / dockerfile).read_bytes())
    for k, v in sorted(build_args.items()):
        h.update(f"arg\0{k}\0{v}\0".encode())
    h.update(f"platform\0{platform}\0target\0{target or ''}".encode())
    return h.hexdigest()


def image_tag(digest: str) -> str:
    """The tag for a build hash: short enough to read, long enough never to collide in practice."""
    return f"{TAG_PREFIX}{digest[:TAG_HEX]}"


def image_platform(cfg: PlatformConfig, instances: Mapping[str, InstanceFacts]) -> str:
    """linux/arm64 when the training pool's type is ARM only, else linux/amd64 (AWS facts)."""
    if cfg.training is not None and cfg.training.runtime.pool in cfg.node_pools:
        facts = instances.get(cfg.node_pools[cfg.training.runtime.pool].instance_type)
        if facts is not None and "x86_64" not in facts.architectures and "arm64" in facts.architectures:
            return "linux/arm64"
    return "linux/amd64"


@dataclass(frozen=True)
class ImageTag:
    """The tag and platform of one image to build."""

    tag: str
    platform: str


def unpinned_bases(repo: str, build: ImageBuild, dockerfile_text: str) -> list[ConfigError]:
    """One error per base image of ``build`` named without a digest, unless ``unpinned_base`` says why."""
    if build.unpinned_base:
        return []
    field = f"{CONFIG_KEY}.images.builds.{repo}"
    out = []
    for base in dockerfiles.base_images(dockerfile_text, build.build_args):
        if base.pinned:
            continue
        where = f"{field}.build_args.{base.arg}" if base.arg else f"{field}.dockerfile"
        out.append(
            ConfigError(
                where,
                f"the base image {base.ref!r} (FROM, line {base.line} of {build.dockerfile}) has no digest: "
                "a tag can be re-pushed, so what the image holds would be whatever the registry returns",
                f"set {where} to '{base.ref}@sha256:<digest>' (`docker buildx imagetools inspect {base.ref}` "
                f"prints it), or say why it cannot be pinned yet in {field}.unpinned_base",
            )
        )
    return out


def image_tags(
    cfg: PlatformConfig, instances: Mapping[str, InstanceFacts], *, root: Path = REPO_ROOT
) -> dict[str, ImageTag]:
    """Tag of every image ``images.builds`` builds (prebuilt ones have none); a missing Dockerfile or
    context is a config error naming the field."""
    platform = image_platform(cfg, instances)
    out: dict[str, ImageTag] = {}
    errors: list[ConfigError] = []
    for repo, b in sorted(cfg.images.builds.items()):
        if b.prebuilt:
            continue
        field = f"{CONFIG_KEY}.images.builds.{repo}"
        if not (root / b.dockerfile).is_file():
            errors.append(
                ConfigError(f"{field}.dockerfile", f"{b.dockerfile!r}: no such file in the repository")
            )
            continue
        if not (root / b.context).is_dir():
            errors.append(
                ConfigError(f"{field}.context", f"{b.context!r}: no such directory in the repository")
            )
            continue
        errors += unpinned_bases(repo, b, (root / b.dockerfile).read_text())
        digest = build_hash(
            root,
            context=b.context,
            dockerfile=b.dockerfile,
            build_args=b.effective_build_args(),
            platform=platform,
            target=b.target,
        )
        out[repo] = ImageTag(tag=image_tag(digest), platform=platform)
    if errors:
        raise ConfigErrors(errors)
    return out
