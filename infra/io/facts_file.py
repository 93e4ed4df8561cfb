"""Refreshed AWS facts: one dated JSON file per region, written by ``aiplat facts refresh --region R``.

The offline plan, ``aiplat cost`` and ``aiplat train render`` answer AWS data calls from moto's bundled
snapshot (``infra/io/snapshot.py``) unless a file here covers the stack's region: then that file answers,
and every fact-based refusal names it and its date. The files live in ``facts/`` at the project root
(next to ``stacks/``, so a team can commit them and plan against the same data), or in the folder
``AIPLAT_FACTS_DIR`` names.

A file holds what the EC2 API answered, in its own (PascalCase) shapes, so the one mapping in
``infra/core/facts.py`` reads it as it reads moto's snapshot and the provider's answers.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.core.errors import ConfigError, ConfigErrors
from infra.core.facts import AvailabilityZone
from infra.io.stackfiles import project_root

FACTS_DIR_ENV = "AIPLAT_FACTS_DIR"
FORMAT = 1  # the file's layout version; a reader refuses others


def facts_dir() -> Path:
    """Where refreshed facts files live: ``$AIPLAT_FACTS_DIR``, else ``facts/`` at the project root."""
    override = os.environ.get(FACTS_DIR_ENV)
    return Path(override) if override else project_root() / "facts"


def facts_path(region: str, folder: Path | None = None) -> Path:
    return (folder or facts_dir()) / f"{region}.json"


@dataclass(frozen=True)
class FactsFile:
    """One region's facts as the EC2 API answered them on ``fetched_at`` (UTC)."""

    region: str
    fetched_at: dt.datetime
    endpoint: str  # the EC2 endpoint that answered
    zones: tuple[AvailabilityZone, ...]
    instance_types: Mapping[str, Mapping[str, Any]]  # name -> DescribeInstanceTypes entry
    region_offerings: frozenset[str]
    zone_offerings: Mapping[str, frozenset[str]]  # zone name -> types offered there
    path: Path | None = None

    @property
    def label(self) -> str:
        """What answered, for messages: the file and the day its data was read."""
        where = str(self.path) if self.path else f"facts file for {self.region}"
        return f"AWS facts {where}, read from {self.endpoint} on {self.fetched_at:%Y-%m-%d}"

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "region": self.region,
            "fetched_at": self.fetched_at.astimezone(dt.UTC).isoformat(timespec="seconds"),
            "endpoint": self.endpoint,
            "apis": [
                "ec2:DescribeAvailabilityZones",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeInstanceTypeOfferings",
            ],
            "zones": [{"name": z.name, "zone_id": z.zone_id, "zone_type": z.zone_type} for z in self.zones],
            "offerings": {
                "region": sorted(self.region_offerings),
                "availability-zone": {az: sorted(ts) for az, ts in sorted(self.zone_offerings.items())},
            },
            "instance_types": {t: self.instance_types[t] for t in sorted(self.instance_types)},
        }


def write_facts_file(facts: FactsFile, folder: Path | None = None) -> Path:
    """Write ``facts`` to ``<folder>/<region>.json`` (atomically: a reader never sees half a file)."""
    path = facts_path(facts.region, folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(facts.to_json(), indent=1, sort_keys=False) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def _bad(path: Path, field: str, problem: str) -> ConfigErrors:
    fix = f"run aiplat facts refresh --region {path.stem} again, or delete {path} to use moto's snapshot"
    return ConfigErrors([ConfigError(field, problem, fix, source=str(path))])


def read_facts_file(region: str, folder: Path | None = None) -> FactsFile | None:
    """The refreshed facts of ``region``, or None when no file covers it. A file that is not one this
    module wrote is refused (``ConfigErrors`` naming the file and the field), never half-read."""
    path = facts_path(region, folder)
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise _bad(path, "file", f"is not readable JSON ({exc})") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        got = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
        raise _bad(path, "format", f"{got!r} is not facts file format {FORMAT}")
    if raw.get("region") != region:
        raise _bad(path, "region", f"{raw.get('region')!r} but the file is named for {region!r}")
    try:
        fetched = dt.datetime.fromisoformat(str(raw["fetched_at"]))
        offerings = raw["offerings"]
        return FactsFile(
            region=region,
            fetched_at=fetched,
            endpoint=str(raw["endpoint"]),
            zones=tuple(AvailabilityZone(z["name"], z["zone_id"], z["zone_type"]) for z in raw["zones"]),
            instance_types=dict(raw["instance_types"]),
            region_offerings=frozenset(offerings["region"]),
            zone_offerings={az: frozenset(ts) for az, ts in offerings["availability-zone"].items()},
            path=path,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise _bad(path, str(exc).strip("'\""), f"missing or malformed ({type(exc).__name__})") from None
