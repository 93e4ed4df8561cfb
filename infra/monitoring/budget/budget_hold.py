"""Budget hold: a team that has spent its monthly budget gets its Kueue ClusterQueue held; the hold is lifted
when the month turns or the budget is raised. Runs as a CronJob (standard library only, from a ConfigMap).

Why a polling job rather than an Alertmanager webhook: it is level-triggered. Each run reads the current
state (Prometheus' ``aiplat:team_budget:spent_ratio``, the same series ``TeamBudgetExhausted`` fires on;
infra/monitoring/rules/cost.yaml) and makes each queue agree, so a missed run, a restart or an Alertmanager
outage delays a hold by one period and never leaves one stuck; a webhook would need a long-running server,
retries and a store of what it had seen.

Kueue v0.19.2 ClusterQueue ``spec.stopPolicy``
(config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml): ``Hold``: no new reservation; admitted
workloads run to completion. ``HoldAndDrain`` would evict them too: never set here. What this job set is
marked by the annotation ``HOLD_ANNOTATION`` (the month it held in), and only such a hold is ever lifted, so
a hold an operator set by hand stays. An operator lifts a budget hold for the rest of a month with the
annotation ``EXEMPT_ANNOTATION: <YYYY-MM>`` (docs/how-to/team-spend.md).

Environment: ``PROMETHEUS_URL`` (http://<service>.<namespace>:9090), ``BUDGET_QUEUES`` (JSON: team ->
ClusterQueue name, the teams with ``on_exhausted: hold``). The ServiceAccount may get and patch exactly those
ClusterQueues (infra/monitoring/documents.py budget_hold_rules).
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

HOLD_ANNOTATION = "aiplat.io/budget-hold"
EXEMPT_ANNOTATION = "aiplat.io/budget-exempt"
RATIO_SERIES = "aiplat:team_budget:spent_ratio"
KUEUE_PATH = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TIMEOUT_S = 30


@dataclass(frozen=True)
class Decision:
    """What to do with one ClusterQueue: ``action`` hold, release or keep; ``patch`` the JSON merge patch
    (None for keep); ``reason`` in words for the log."""

    action: str
    reason: str
    patch: dict[str, Any] | None = field(default=None)


def month_of(now: datetime) -> str:
    """The budget month of ``now`` (UTC), as the annotations hold it: ``YYYY-MM``."""
    return now.astimezone(UTC).strftime("%Y-%m")


def decide(cluster_queue: dict[str, Any], spent_ratio: float | None, month: str) -> Decision:
    """The decision for one team's ClusterQueue (as the API returns it), given the share of its monthly
    budget spent this month (None: Prometheus has no spend for it this month) and the current ``month``.

    - Over budget (ratio >= 1), not exempted for this month, queue admitting (``stopPolicy`` None or unset):
      hold, annotated with the month.
    - Under budget, or no spend recorded and the month of the hold is over, queue held by us (annotation
      and ``Hold``): release. No spend recorded in the month of the hold keeps it (missing data).
    - A hold we did not set (no annotation, or an operator's ``HoldAndDrain``) is never touched; a queue an
      operator released by hand (annotation, ``stopPolicy`` None) loses the stale annotation, and is held
      again while it is still over budget and not exempt.
    """
    meta = cluster_queue.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    policy = (cluster_queue.get("spec") or {}).get("stopPolicy") or "None"
    ours = HOLD_ANNOTATION in annotations
    exempt = annotations.get(EXEMPT_ANNOTATION) == month
    version = meta.get("resourceVersion")
    over = spent_ratio is not None and spent_ratio >= 1

    def patch(stop: str, hold: str | None) -> dict[str, Any]:
        # resourceVersion makes the API server refuse the patch if the queue changed since it was read
        md: dict[str, Any] = {"annotations": {HOLD_ANNOTATION: hold}}
        if version:
            md["resourceVersion"] = version
        return {"metadata": md, "spec": {"stopPolicy": stop}}

    spent = "no spend recorded" if spent_ratio is None else f"{spent_ratio:.0%} of the budget spent"
    if over and not exempt:
        if policy == "None":
            return Decision("hold", f"{spent} in {month}", patch("Hold", month))
        return Decision("keep", f"{spent}; already stopped ({policy})")
    why = f"{spent} in {month}" + (f"; exempted by {EXEMPT_ANNOTATION}" if over else "")
    if spent_ratio is None and annotations.get(HOLD_ANNOTATION) == month and policy == "Hold":
        # no series while the month of the hold lasts: the cost data is missing (OpenCost, Prometheus),
        # not the spend; lifting the hold on missing data would let the team overspend
        return Decision("keep", f"{spent} in {month}, the month of the hold; keeping it")
    if ours and policy == "Hold":
        return Decision("release", why, patch("None", None))
    if ours and policy == "None":
        stale = {"metadata": {"annotations": {HOLD_ANNOTATION: None}}}
        if version:
            stale["metadata"]["resourceVersion"] = version
        return Decision("release", f"{why}; released by hand, dropping the stale annotation", stale)
    return Decision("keep", why)


def spent_ratios(result: list[dict[str, Any]]) -> dict[str, float]:
    """Team -> spent ratio from a Prometheus instant-query ``result`` (``data.result`` of a vector)."""
    out: dict[str, float] = {}
    for sample in result:
        team = (sample.get("metric") or {}).get("team")
        if team:
            out[team] = float(sample["value"][1])
    return out


def _get_json(req: urllib.request.Request, context: ssl.SSLContext | None = None) -> Any:
    with urllib.request.urlopen(req, timeout=TIMEOUT_S, context=context) as resp:  # noqa: S310
        return json.load(resp)


def query_ratios(prometheus_url: str) -> dict[str, float]:
    """Every team's spent ratio now, from Prometheus' HTTP API (/api/v1/query)."""
    url = f"{prometheus_url.rstrip('/')}/api/v1/query?" + urllib.parse.urlencode({"query": RATIO_SERIES})
    body = _get_json(urllib.request.Request(url))
    if body.get("status") != "success":
        raise RuntimeError(f"Prometheus query {RATIO_SERIES} failed: {body}")
    return spent_ratios(body["data"]["result"])


class Kube:
    """The Kubernetes API from inside a pod: its ServiceAccount token and the cluster's CA."""

    def __init__(self, base: str | None = None, token: str | None = None) -> None:
        # in a pod: the API server's in-cluster address, the ServiceAccount's token and the cluster's CA
        if base is None:
            host = os.environ["KUBERNETES_SERVICE_HOST"]
            port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
            base = f"https://{host}:{port}"
        if token is None:
            with open(f"{SA_DIR}/token") as f:
                token = f.read().strip()
        self.base, self.token = base, token
        self.context = (
            ssl.create_default_context(cafile=f"{SA_DIR}/ca.crt") if base.startswith("https:") else None
        )

    def _request(self, path: str, method: str = "GET", body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.base}{path}", data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token}")
        if body is not None:
            req.add_header("Content-Type", "application/merge-patch+json")
        return _get_json(req, self.context)

    def get_cluster_queue(self, name: str) -> dict[str, Any]:
        return self._request(f"{KUEUE_PATH}/{name}")

    def patch_cluster_queue(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        return self._request(f"{KUEUE_PATH}/{name}", "PATCH", patch)


def main(kube: Any = None, now: datetime | None = None) -> int:
    """One pass over the queues of ``BUDGET_QUEUES`` (``kube``, ``now``: the API and the clock, for tests)."""
    queues: dict[str, str] = json.loads(os.environ["BUDGET_QUEUES"])
    month = month_of(now or datetime.now(UTC))
    ratios = query_ratios(os.environ["PROMETHEUS_URL"])
    kube = kube or Kube()
    failed = 0
    for team, name in sorted(queues.items()):
        try:
            decision = decide(kube.get_cluster_queue(name), ratios.get(team), month)
            if decision.patch is not None:
                kube.patch_cluster_queue(name, decision.patch)
            print(f"{team}: clusterqueue {name}: {decision.action}: {decision.reason}", flush=True)
        except Exception as exc:  # one team's failure must not stop the others; the job fails at the end
            failed += 1
            print(f"{team}: clusterqueue {name}: error: {exc}", file=sys.stderr, flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
