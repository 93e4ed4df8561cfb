"""Record facts that live in upstream repositories into the data files the plan reads
(``aiplat facts upstream``): the EFA device plugin chart's supported instance types, and the AWS Load
Balancer Controller's IAM policy.

A ref (branch, tag or commit) is first resolved to its commit with GitHub's "Get a commit" API and the
``sha`` media type (https://docs.github.com/en/rest/commits/commits#get-a-commit), so every source written
names the commit it was read at; the files are then read from raw.githubusercontent.com at that commit.
"""

from __future__ import annotations

import datetime
import json
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

GITHUB_API = "https://api.github.com"
GITHUB_RAW = "https://raw.githubusercontent.com"
EFA_REPO, EFA_CHART_DIR = "aws/eks-charts", "stable/aws-efa-k8s-device-plugin"
LBC_REPO, LBC_POLICY_PATH = "kubernetes-sigs/aws-load-balancer-controller", "docs/install/iam_policy.json"
TIMEOUT_S = 30


class UpstreamError(Exception):
    """An upstream file could not be read or is not what the data file needs."""


@dataclass(frozen=True)
class GitHub:
    """Where GitHub's API and raw files answer (a mirror or a test server may stand in)."""

    api: str = GITHUB_API
    raw: str = GITHUB_RAW

    def _get(self, url: str, accept: str | None = None) -> str:
        request = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return response.read().decode()
        except OSError as exc:  # URLError, HTTPError, timeouts
            raise UpstreamError(f"GET {url}: {exc}") from None

    def commit(self, repo: str, ref: str) -> str:
        """The commit SHA ``ref`` names in ``repo``."""
        sha = self._get(f"{self.api}/repos/{repo}/commits/{ref}", "application/vnd.github.sha").strip()
        if len(sha) != 40:
            raise UpstreamError(f"{repo}@{ref}: GitHub answered {sha[:80]!r}, not a commit SHA")
        return sha

    def file(self, repo: str, sha: str, path: str) -> str:
        return self._get(f"{self.raw}/{repo}/{sha}/{path}")


def blob_url(repo: str, sha: str, path: str) -> str:
    """The file's page on GitHub at the commit: the ``source`` written with a fact."""
    return f"https://github.com/{repo}/blob/{sha}/{path}"


def efa_plugin_entry(github: GitHub, ref: str, today: datetime.date) -> tuple[str, dict[str, Any]]:
    """(chart version, its entry for the EFA plugin data file) read from the chart at ``ref``: the
    instance types of ``supportedInstanceLabels.values`` (the chart's required node affinity) and the image
    tag its values deploy (the image cache pins it, ``infra/mirror/pins.py``)."""
    sha = github.commit(EFA_REPO, ref)
    where = f"{EFA_REPO}@{sha[:7]} {EFA_CHART_DIR}"
    try:
        chart = yaml.safe_load(github.file(EFA_REPO, sha, f"{EFA_CHART_DIR}/Chart.yaml"))
        values = yaml.safe_load(github.file(EFA_REPO, sha, f"{EFA_CHART_DIR}/values.yaml"))
    except yaml.YAMLError as exc:
        raise UpstreamError(f"{where}: not YAML ({exc})") from None
    try:
        listed = values["supportedInstanceLabels"]["values"]
        version, app = str(chart["version"]), str(chart["appVersion"])
        image_tag = str(values["image"].get("tag") or app)  # the chart's default: its appVersion
    except (KeyError, TypeError) as exc:
        raise UpstreamError(f"{where}: no {exc} where the chart keeps it") from None
    return version, {
        "app_version": app,
        "image_tag": image_tag,
        "source": blob_url(EFA_REPO, sha, f"{EFA_CHART_DIR}/values.yaml"),
        "date": today.isoformat(),
        "instance_types": sorted(set(listed)),
    }


def lbc_policy_document(github: GitHub, tag: str, today: datetime.date) -> dict[str, Any]:
    """The controller's IAM policy file at ``tag``, with its tag, commit, source and date."""
    sha = github.commit(LBC_REPO, tag)
    try:
        policy = json.loads(github.file(LBC_REPO, sha, LBC_POLICY_PATH))
    except ValueError as exc:
        raise UpstreamError(f"{LBC_REPO}@{tag} {LBC_POLICY_PATH}: not JSON ({exc})") from None
    if not isinstance(policy, dict) or not policy.get("Statement"):
        raise UpstreamError(f"{LBC_REPO}@{tag} {LBC_POLICY_PATH}: no IAM policy statements")
    return {
        "tag": tag,
        "commit": sha,
        "source": blob_url(LBC_REPO, sha, LBC_POLICY_PATH),
        "date": today.isoformat(),
        "policy": policy,
    }


def write_json(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")


def record_efa_plugin(path: Path, version: str, entry: dict[str, Any]) -> tuple[set[str], set[str]]:
    """Add (or replace) ``version`` in the EFA plugin data file and make it the default; the instance
    types added and dropped against the previous default."""
    doc = json.loads(path.read_text())
    before = set(doc["versions"].get(doc["default"], {}).get("instance_types", ()))
    doc["versions"][version] = entry
    doc["default"] = version
    write_json(path, doc)
    after = set(entry["instance_types"])
    return after - before, before - after


def record_lbc_policy(path: Path, document: dict[str, Any]) -> tuple[str, bool]:
    """Replace the controller policy data file's content; (the tag before, whether the policy changed)."""
    doc = json.loads(path.read_text())
    changed = doc.get("policy") != document["policy"]
    write_json(path, {"about": doc.get("about", ""), **document})
    return str(doc.get("tag")), changed
