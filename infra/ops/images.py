"""``aiplat images``: the charts' images of a stack, their digests read from the registry, and the copy of
the images whose registry no pull through cache rule takes into the stack's own ECR.

``resolve`` asks the registry for the digest of every pinned image that has none recorded (``crane digest``,
go-containerregistry's CLI), and with ``check`` compares the recorded ones too; what it reads is written
into ``infra/mirror/digests.py`` (``render_digests``), with ``crane digest`` as the source and the date.
``copy`` copies each image that is neither cached nor present yet, by digest, into
``<registry>/<prefix>/copy/<upstream image>`` (ECR creates the repository on the push, from the stack's
creation template: ``infra/mirror/component.py``), then reads the digest back. Nothing here guesses a
digest: an answer that is not ``sha256:<64 hex>`` is an error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from infra.io.crane import Crane, CraneError, Missing
from infra.mirror.digests import RecordedDigest
from infra.mirror.documents import CacheLayout, Placement, placement
from infra.mirror.pins import PINS, ImagePin
from infra.mirror.rules import stack_pins

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig

DIGEST = re.compile(r"sha256:[a-f0-9]{64}")
DIGESTS_FILE = Path(__file__).resolve().parents[1] / "mirror" / "digests.py"
WIDTH = 110  # ruff's line-length (pyproject.toml)


def ref(pin: ImagePin) -> str:
    return f"{pin.image}:{pin.tag}"


def read_digest(crane: Crane, reference: str) -> str:
    """The digest the registry gives ``reference`` (its index's, for a multi-platform image)."""
    out = crane(["digest", reference], None).strip()
    if not DIGEST.fullmatch(out):
        raise CraneError(f"`crane digest {reference}` answered {out[:80]!r}, not a sha256 digest")
    return out


class Outcome(StrEnum):
    recorded = "recorded"  # read now, none was recorded
    same = "same"  # the recorded digest is the registry's
    differs = "differs"  # the registry gives another digest than the recorded one
    failed = "failed"


@dataclass(frozen=True)
class Resolved:
    pin: ImagePin
    outcome: Outcome
    digest: str | None
    detail: str = ""


def resolve(
    pins: Iterable[ImagePin], crane: Crane, *, check: bool, version: str, today: date
) -> tuple[list[Resolved], dict[tuple[str, str], RecordedDigest]]:
    """Read the digest of every pin without one (and of every pin, with ``check``). Returns the outcomes and
    the digests to record: the ones read for pins that had none, and the registry's where it differs from
    the recorded one (the registry is the source of truth; the old value and its source go in the note)."""
    outcomes: list[Resolved] = []
    new: dict[tuple[str, str], RecordedDigest] = {}
    seen: set[tuple[str, str]] = set()
    for pin in pins:
        key = (pin.image, pin.tag)
        if key in seen or (pin.digest is not None and not check):
            continue
        seen.add(key)
        try:
            got = read_digest(crane, ref(pin))
        except CraneError as exc:
            outcomes.append(Resolved(pin, Outcome.failed, None, str(exc)))
            continue
        source = f"the registry: `crane digest {ref(pin)}` (crane {version})"
        if pin.digest is None:
            outcomes.append(Resolved(pin, Outcome.recorded, got))
            new[key] = RecordedDigest(digest=got, source=source, read=today.isoformat())
        elif pin.digest == got:
            outcomes.append(Resolved(pin, Outcome.same, got))
        else:
            was = f"{pin.digest} ({pin.digest_source or pin.source})"
            outcomes.append(Resolved(pin, Outcome.differs, got, f"recorded {was}"))
            new[key] = RecordedDigest(
                digest=got, source=f"{source}; it replaced {pin.digest[:19]}...", read=today.isoformat()
            )
    return outcomes, new


class CopyOutcome(StrEnum):
    present = "present"  # already in our repository under its tag, same digest
    copied = "copied"
    no_digest = "no digest"  # nothing to copy by: run resolve first
    conflict = "conflict"  # the tag holds another image (tags are immutable)
    failed = "failed"


@dataclass(frozen=True)
class Copied:
    pin: ImagePin
    target: str
    outcome: CopyOutcome
    detail: str = ""


def copy_images(pins: Iterable[ImagePin], cache: CacheLayout, crane: Crane) -> list[Copied]:
    """Copy every pin the layout places in the copy area, by digest, unless it is there already."""
    out: list[Copied] = []
    for pin in pins:
        where = placement(cache, pin.image)
        if where.kind is not Placement.copied:
            continue
        target = f"{where.registry}/{where.repository}:{pin.tag}"
        if pin.digest is None:
            out.append(Copied(pin, target, CopyOutcome.no_digest, "run `aiplat images resolve` first"))
            continue
        try:
            have = read_digest(crane, target)
        except Missing:
            have = None
        except CraneError as exc:
            out.append(Copied(pin, target, CopyOutcome.failed, str(exc)))
            continue
        if have == pin.digest:
            out.append(Copied(pin, target, CopyOutcome.present))
            continue
        if have is not None:
            out.append(Copied(pin, target, CopyOutcome.conflict, f"{target} is {have}; the tag is immutable"))
            continue
        try:
            crane(["copy", f"{pin.image}@{pin.digest}", target], None)
            after = read_digest(crane, target)
        except CraneError as exc:
            out.append(Copied(pin, target, CopyOutcome.failed, str(exc)))
            continue
        if after != pin.digest:
            out.append(Copied(pin, target, CopyOutcome.failed, f"copied, but {target} reads {after}"))
        else:
            out.append(Copied(pin, target, CopyOutcome.copied))
    return out


def selected_pins(configs: Iterable[PlatformConfig]) -> list[ImagePin]:
    """The pins of every chart the given stacks install, once each, in pins.py's order (not the images our
    values switch off: ``ImagePin.off``)."""
    wanted: set[tuple[str, str]] = set()
    for cfg in configs:
        wanted |= {(p.chart, p.version) for p in stack_pins(cfg)}
    return [p for p in PINS if (p.chart, p.version) in wanted and p.off is None]


# ---------------------------------------------------------------------------------------------- the file


def _q(text: str) -> str:
    """A double-quoted Python literal of ``text`` (ruff's quote style)."""
    return json.dumps(text)


def _field(name: str, text: str, indent: str) -> list[str]:
    """``name=<text>,`` as ruff formats it: one line if it fits in WIDTH, else the string split at spaces
    over parenthesized lines."""
    first = f"{indent}{name}={_q(text)},"
    if len(first) <= WIDTH:
        return [first]
    inner = indent + "    "
    parts, line = [], ""
    for word in re.split(r"(?<= )", text):
        if line and len(inner) + len(_q(line + word)) > WIDTH:
            parts.append(line)
            line = ""
        line += word
    parts.append(line)
    return [f"{indent}{name}=("] + [f"{inner}{_q(p)}" for p in parts] + [f"{indent}),"]


TABLE = "DIGESTS: dict[tuple[str, str], RecordedDigest] = {"


def _head() -> str:
    """What infra/mirror/digests.py holds above its table (docstring, imports, RecordedDigest): kept as is."""
    head, found, _ = DIGESTS_FILE.read_text().partition("\n" + TABLE)
    if not found:
        raise ValueError(f"{DIGESTS_FILE} has no line {TABLE!r}: restore it from git")
    return head.rstrip("\n")


def render_digests(digests: Mapping[tuple[str, str], RecordedDigest]) -> str:
    """The whole of infra/mirror/digests.py for ``digests`` (sorted by image and tag), its head kept."""
    lines = [_head(), "", "", TABLE]
    for (image, tag), d in sorted(digests.items()):
        lines.append(f"    ({_q(image)}, {_q(tag)}): RecordedDigest(")
        for name in ("digest", "source", "read"):
            lines.extend(_field(name, getattr(d, name), " " * 8))
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def merged(new: Mapping[tuple[str, str], RecordedDigest]) -> dict[tuple[str, str], RecordedDigest]:
    from infra.mirror.digests import DIGESTS

    return {**DIGESTS, **new}
