"""S3 general purpose bucket names: the rules S3 enforces, checked before anything is created.

Rules from https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html (general purpose
buckets). On top of S3's own rules we refuse dots: every bucket here is reached over TLS only, and a dotted
name breaks virtual-hosted-style TLS (the ``*.s3.<region>.amazonaws.com`` wildcard certificate matches one
label only) and S3 Transfer Acceleration. Pure: no Pulumi, no AWS calls.
"""

from __future__ import annotations

import ipaddress
import re

MIN_LEN = 3
MAX_LEN = 63
_CHARS = re.compile(r"^[a-z0-9.-]+$")
# Reserved by S3 for other kinds of names (access point aliases, Object Lambda, MRAP, directory and table
# buckets) or for AWS itself.
RESERVED_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
RESERVED_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")


def s3_problems(name: str) -> list[str]:
    """Every rule of S3's that ``name`` breaks (empty: S3 accepts it), each phrased for an error line."""
    problems: list[str] = []
    if not MIN_LEN <= len(name) <= MAX_LEN:
        problems.append(f"is {len(name)} characters long (S3 allows {MIN_LEN} to {MAX_LEN})")
    if not _CHARS.match(name or "-"):
        bad = sorted({c for c in name if not re.match(r"[a-z0-9.-]", c)})
        chars = ", ".join(repr(c) for c in bad)
        problems.append(f"contains {chars} (S3 allows only lower-case letters, digits, '.' and '-')")
    if name and not (name[0].isalnum() and name[-1].isalnum()):
        problems.append("must begin and end with a lower-case letter or a digit")
    if ".." in name:
        problems.append("contains two adjacent periods")
    try:
        ipaddress.IPv4Address(name)
        problems.append("is formatted as an IP address")
    except ValueError:
        pass
    for prefix in RESERVED_PREFIXES:
        if name.startswith(prefix):
            problems.append(f"starts with {prefix!r}, a prefix S3 reserves")
    for suffix in RESERVED_SUFFIXES:
        if name.endswith(suffix):
            problems.append(f"ends with {suffix!r}, a suffix S3 reserves")
    return problems


def project_problems(name: str) -> list[str]:
    """S3's rules plus ours (no dots, see the module docstring)."""
    problems = s3_problems(name)
    if "." in name and "contains two adjacent periods" not in problems:
        problems.append("contains '.' (dotted names break TLS to virtual-hosted-style S3 endpoints)")
    return problems


def default_bucket_name(prefix: str, environment: str, region: str, purpose: str) -> str:
    """``<prefix>-<env>-<region>-<purpose>``: unique per stack and purpose without the account id.

    Bucket names are global across accounts, so a deployment into a second account must override the
    names (``storage.bucket_names``) or change ``name_prefix``.
    """
    return f"{prefix}-{environment}-{region}-{purpose}"


def suggest(name: str) -> str:
    """A name close to ``name`` that passes ``project_problems`` (for the fix part of an error)."""
    s = re.sub(r"[^a-z0-9-]+", "-", name.lower())
    for prefix in RESERVED_PREFIXES:
        if s.startswith(prefix):
            s = s[len(prefix) :]
    for suffix in RESERVED_SUFFIXES:
        if s.endswith(suffix):
            s = s[: -len(suffix)]
    s = re.sub(r"-{2,}", "-", s).strip("-")[:MAX_LEN].strip("-")
    if len(s) < MIN_LEN:
        s = (s + "-bucket").strip("-")
    return s
