"""Argument types that check a value when it is parsed: a bad one is refused with a did-you-mean before the
command starts (argparse prints ``argument --region: ...`` and exits 2, ``EXIT_CONFIG``)."""

from __future__ import annotations

import argparse
import difflib
import re

from infra.cluster.calendar import CALENDAR, KUBERNETES_MINOR
from infra.io.regions import known_regions
from infra.stack.regions import region_hint


def aws_region(value: str) -> str:
    """An AWS region name (botocore's list, as the plan checks ``region``)."""
    known = known_regions()
    if value not in known:
        hint = region_hint(value, known) or "use an AWS region name such as 'us-east-1'"
        raise argparse.ArgumentTypeError(f"{value!r} is not an AWS region; {hint}")
    return value


def kubernetes_minor(value: str) -> str:
    """A Kubernetes minor as EKS names it (``1.35``). A minor newer than the EKS calendar
    (``infra/cluster/calendar.py``) is accepted: asking EKS about a new release is what the calendar row
    needs."""
    if re.fullmatch(KUBERNETES_MINOR, value):
        return value
    known = sorted(CALENDAR, key=lambda v: tuple(map(int, v.split("."))))
    close = difflib.get_close_matches(value.removeprefix("v"), known, n=1, cutoff=0.6)
    hint = (
        f"did you mean '{close[0]}'?"
        if close
        else f"use a minor such as '{known[-1]}' (EKS: {', '.join(known)})"
    )
    raise argparse.ArgumentTypeError(f"{value!r} is not a Kubernetes minor version; {hint}")
