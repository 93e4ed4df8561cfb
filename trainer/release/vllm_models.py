"""The model architectures the pinned vLLM serves, as the release publisher and the fetch tool check them.

``trainer/release/data/vllm-architectures.txt`` is read from that vLLM version's own model registry
(``vllm/model_executor/models/registry.py`` of the PyPI wheel, recorded by
``tests/infra/inference/data/record_vllm.py``; its first line names the version, which
tests/trainer/test_vllm_models.py ties to ``infra/inference/config.py`` ``VLLM_VERSION``): the causal-LM
``architectures`` of a Hugging Face ``config.json`` that ``vllm serve`` runs, and those an older vLLM ran
that this one no longer does (so the refusal can say since when). Pure data, no torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "vllm-architectures.txt"
_HEAD = re.compile(r"^# vLLM (\d+\.\d+\.\d+) ")


@dataclass(frozen=True)
class Registry:
    """What one vLLM version's registry says about causal-LM architectures."""

    version: str
    serves: frozenset[str]
    removed: dict[str, str]  # architecture -> the last vLLM version that served it

    def refusal(self, architecture: str) -> str | None:
        """None when vLLM serves ``architecture``, else why not (one clause, for an error line)."""
        if architecture in self.serves:
            return None
        if architecture in self.removed:
            return (
                f"{architecture!r} was served by vLLM up to {self.removed[architecture]}, not by the pinned "
                f"{self.version}"
            )
        near = sorted(a for a in self.serves if a.lower().startswith(architecture.lower()[:4]))[:4]
        hint = f" (similar: {', '.join(near)})" if near else ""
        return f"{architecture!r} is not an architecture vLLM {self.version} serves{hint}"


def parse(text: str) -> Registry:
    """The registry data file's content (``serves <arch>`` / ``removed <arch> <version>`` lines)."""
    lines = text.splitlines()
    m = _HEAD.match(lines[0]) if lines else None
    if m is None:
        raise ValueError(f"{DATA.name}: the first line must name the vLLM version ('# vLLM X.Y.Z ...')")
    serves: set[str] = set()
    removed: dict[str, str] = {}
    for line in lines[1:]:
        if not line or line.startswith("#"):
            continue
        kind, _, rest = line.partition(" ")
        if kind == "serves":
            serves.add(rest.strip())
        elif kind == "removed":
            arch, _, version = rest.strip().partition(" ")
            removed[arch] = version
        else:
            raise ValueError(f"{DATA.name}: unknown line {line!r}")
    return Registry(version=m.group(1), serves=frozenset(serves), removed=removed)


@cache
def registry() -> Registry:
    """The pinned vLLM's registry (read once)."""
    return parse(DATA.read_text())
