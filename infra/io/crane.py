"""crane, go-containerregistry's registry CLI (https://github.com/google/go-containerregistry/tree/main/cmd/crane),
run as a subprocess: ``crane digest`` reads an image's digest from its registry, ``crane copy`` copies an
image (its index and every platform's manifest, byte for byte, so the digest stays) from one registry to
another, ``crane auth login`` stores a registry's credentials in the Docker config crane reads.

And the ECR sign-in crane needs for our registry and for EKS's: the password ``ecr:GetAuthorizationToken``
returns, given to crane on stdin, never on its command line.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from collections.abc import Callable
from typing import Any

# (argv, stdin) -> stdout. Raises CraneError (Missing: the registry has no such manifest).
Crane = Callable[[list[str], str | None], str]

INSTALL = (
    "install crane (go-containerregistry): "
    "`go install github.com/google/go-containerregistry/cmd/crane@latest`, or a release binary from "
    "https://github.com/google/go-containerregistry/releases, or set AIPLAT_CRANE to its path"
)
# what crane prints when the registry has no such repository or manifest (the OCI distribution spec's
# error codes, and ECR's own)
_MISSING = ("MANIFEST_UNKNOWN", "NAME_UNKNOWN", "RepositoryNotFoundException", "ImageNotFoundException")


class CraneError(RuntimeError):
    """crane failed or is not installed; the message says which command and why."""


class CraneMissing(CraneError):
    """crane is not installed."""


class Missing(CraneError):
    """The registry has no such repository or manifest."""


def crane_path() -> str | None:
    return os.environ.get("AIPLAT_CRANE") or shutil.which("crane")


def crane_runner(binary: str | None = None) -> Crane:
    """Runs ``crane`` (``AIPLAT_CRANE``, else the one on PATH). No timeout: a copy of a large image takes
    as long as the network does; crane's own retries handle a registry that stalls."""
    path = binary or crane_path()

    def run(argv: list[str], stdin: str | None = None) -> str:
        if path is None:
            raise CraneMissing(f"crane is not installed: {INSTALL}")
        try:
            done = subprocess.run([path, *argv], input=stdin, capture_output=True, text=True, check=False)
        except OSError as exc:
            raise CraneMissing(f"crane ({path}) does not run: {exc}; {INSTALL}") from exc
        if done.returncode != 0:
            why = (done.stderr or done.stdout).strip().splitlines()
            line = why[-1] if why else f"exit {done.returncode}"
            kind = Missing if any(m in (done.stderr or "") for m in _MISSING) else CraneError
            raise kind(f"`crane {' '.join(argv)}` failed: {line}")
        return done.stdout

    return run


def crane_version(crane: Crane) -> str:
    return crane(["version"], None).strip() or "unknown version"


def ecr_region(host: str) -> str | None:
    """The region of an ECR registry host (``<account>.dkr.ecr.<region>.amazonaws.com[.cn]``), else None."""
    parts = host.split(".")
    if len(parts) >= 6 and parts[1:3] == ["dkr", "ecr"] and parts[4] == "amazonaws":
        return parts[3]
    return None


def ecr_login(crane: Crane, ecr: Any, host: str) -> None:
    """Sign crane in to ECR registry ``host`` with a token from ``ecr`` (a boto3 client of the host's
    region): the token is valid for 12 hours, for every registry of that region the caller may read."""
    data = ecr.get_authorization_token()["authorizationData"][0]
    user, _, password = base64.b64decode(data["authorizationToken"]).decode().partition(":")
    crane(["auth", "login", host, "--username", user, "--password-stdin"], password)
