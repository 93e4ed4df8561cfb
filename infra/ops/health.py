"""The rollout's health gate after ``up`` (production ``HealthGate``).

Checks, in order: **outputs** ``rollout.yaml`` requires are present; **nodes** of every node group ACTIVE
and Ready (until ``nodes_ready_timeout_s``); **inference-rollout**, per model of ``inference.models``: its
Deployment rolled out as ``kubectl rollout status`` judges it (pulumi skips the wait,
``pulumi.com/skipAwait``), until ``first_load_timeout_s``, with the releases its fetch containers name being
the model's ``release.version`` and its adapters' (promotion and rollback are that version's change: a
rolled-out Deployment's every pod fetched, verified and loaded them, its readiness probe asking vLLM);
**inference**, through the ALB and the model-name router with the API key of the secret output
``inferenceGateKey``: ``GET <inferenceUrl>/v1/models`` (the router's list) names every served name, and a
one-token ``POST /v1/completions`` for each (bases and adapters) is answered 200 by that model. New pods whose
release fetch (the init container) finds no release at all in the region's replica bucket is **no model
release yet** (``GateCheck.awaiting``), not a failure, and the endpoint check is skipped; a version that is
not there while others are is a failed rollout, and the running ReplicaSet keeps serving
(``maxUnavailable: 0``). The judging is pure; the calls are in
``infra/io/cluster_health.py``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from infra.core.config import Role
from infra.inference.config import LATEST, RELEASE_VERSION
from infra.inference.documents import catalog
from infra.inference.documents import inference as inf
from infra.io.aws_live import Clients
from infra.io.cluster_health import (
    NodeGroupHealth,
    cluster_access,
    eks_token,
    http_json,
    list_nodes,
    list_pods,
    nodegroup_health,
    read_deployment,
    release_folders,
)
from infra.ops.rollout import GateCheck
from infra.schema.platform import PlatformConfig
from infra.stack.rollout import HealthGateConfig
from infra.storage.config.storage import RELEASE_PREFIX

NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"  # set by EKS on managed node group nodes
NO_RELEASE = "no model release yet"
# What a stack that passed with NO_RELEASE waits for (GateCheck.awaiting).
AWAITING_RELEASE = "a model release"


def required_outputs(cfg: PlatformConfig, health: HealthGateConfig) -> list[str]:
    names = list(health.required_outputs)
    if cfg.role is Role.infer:
        names.append(health.inference_url_output)
    return names


def outputs_check(outputs: Mapping[str, Any], required: list[str]) -> GateCheck:
    missing = [k for k in required if outputs.get(k) in (None, "", [], {})]
    if missing:
        return GateCheck("outputs", False, f"missing stack outputs: {', '.join(missing)}")
    return GateCheck("outputs", True, f"{len(required)} required outputs present")


def _ready(node: Mapping[str, Any]) -> bool:
    conditions = node.get("status", {}).get("conditions", [])
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def nodes_check(groups: list[NodeGroupHealth], nodes: list[Mapping[str, Any]]) -> GateCheck:
    """Every node group ACTIVE, no health issues, at least ``desired`` Ready nodes carrying its label."""
    problems: list[str] = []
    seen: list[str] = []
    for g in groups:
        if g.error or g.status != "ACTIVE" or g.issues:
            why = g.error or (f"{g.status}; " + "; ".join(g.issues) if g.issues else g.status)
            problems.append(f"node group {g.name}: {why}")
            continue
        ready = sum(
            1
            for n in nodes
            if n.get("metadata", {}).get("labels", {}).get(NODEGROUP_LABEL) == g.name and _ready(n)
        )
        if ready < g.desired:
            problems.append(f"node group {g.name}: {ready} of {g.desired} nodes Ready")
        else:
            seen.append(f"{g.name} {ready}/{g.desired}")
    if problems:
        return GateCheck("nodes", False, "; ".join(problems))
    return GateCheck("nodes", True, "Ready: " + ", ".join(seen) if seen else "no node groups")


def rollout_status(deployment: Mapping[str, Any]) -> tuple[str, str]:
    """("done" | "waiting" | "timed out", why) for a Deployment, judged as ``kubectl rollout status`` does
    (kubectl/pkg/polymorphichelpers/rollout_status.go, DeploymentStatusViewer): the controller saw the
    current spec, the progress deadline did not pass, every replica runs the new template, old ones are gone
    and the new ones are available."""
    meta, spec, status = (deployment.get(k) or {} for k in ("metadata", "spec", "status"))
    if meta.get("generation", 0) > status.get("observedGeneration", 0):
        return "waiting", "the Deployment controller has not seen the current spec yet"
    progressing = next((c for c in status.get("conditions", []) if c.get("type") == "Progressing"), {})
    if progressing.get("reason") == "ProgressDeadlineExceeded":
        return "timed out", f"exceeded its progress deadline ({progressing.get('message', '')})"
    replicas = spec.get("replicas")
    updated = status.get("updatedReplicas", 0)
    available = status.get("availableReplicas", 0)
    if replicas is not None and updated < replicas:
        return "waiting", f"{updated} of {replicas} new replicas updated"
    if status.get("replicas", 0) > updated:
        return "waiting", f"{status['replicas'] - updated} old replicas pending termination"
    if available < updated:
        return "waiting", f"{available} of {updated} updated replicas available"
    return "done", f"{available} of {updated} replicas available"


def fetch_failure(pod: Mapping[str, Any]) -> tuple[int, str, str] | None:
    """(exit code, its one line, the init container) when one of the pod's release fetches (init containers:
    the base, then each adapter) has failed, now or last time (Kubernetes restarts a failed init container
    with back-off)."""
    status = pod.get("status", {})
    fetches = (
        c
        for c in status.get("initContainerStatuses", [])
        if c.get("name") == inf.FETCH_CONTAINER
        or str(c.get("name", "")).startswith(f"{inf.FETCH_ADAPTER_CONTAINER}-")
    )
    for fetch in fetches:
        for state in (fetch.get("state", {}), fetch.get("lastState", {})):
            done = state.get("terminated")
            if done and done.get("exitCode", 0) != 0:
                line = (done.get("message") or done.get("reason") or "").strip().splitlines()
                return int(done["exitCode"]), (line[-1] if line else ""), str(fetch.get("name"))
    return None


def pod_problem(pod: Mapping[str, Any]) -> str | None:
    """None when the pod's server is up (running, past its startup probe; ready or not), else why not:
    unscheduled, the release fetch failing (with its line), waiting (image pull, crash loop...) or still
    starting."""
    name = pod.get("metadata", {}).get("name", "?")
    status = pod.get("status", {})
    for c in status.get("conditions", []):
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return f"{name}: not scheduled: {c.get('reason', '')}: {c.get('message', '')}".rstrip(": ")
    failed = fetch_failure(pod)
    if failed is not None:
        code, line, container = failed
        why = inf.FETCH_EXIT_CODES.get(code, "failed")
        return f"{name}: {container} exit {code} ({why}): {line}".rstrip(": ")
    server = next((c for c in status.get("containerStatuses", []) if c.get("name") == inf.CONTAINER), None)
    if server is None:
        return f"{name}: {status.get('phase', 'Pending')}, container {inf.CONTAINER} not created yet"
    state = server.get("state", {})
    if "waiting" in state:
        w = state["waiting"]
        return f"{name}: {w.get('reason', 'waiting')}: {w.get('message', '')}".rstrip(": ")
    if "terminated" in state:
        return f"{name}: container exited ({state['terminated'].get('reason', '')})"
    if not server.get("started"):
        return f"{name}: starting (startup probe on {inf.HEALTH_PATH} not passed yet)"
    return None


def inference_rollout_check(
    deployment: Mapping[str, Any] | None,
    pods: Sequence[Mapping[str, Any]],
    versions: Sequence[str] | None,
    *,
    where: str,
    version: str,
    model: str,
    releases: Mapping[str, str] | None = None,
) -> tuple[GateCheck, bool]:
    """Model ``model``'s Deployment rollout and whether that judgment is settled (False: poll again).

    ``versions``: the release versions under ``where`` (the replica bucket's ``release/<release name>/``),
    None when they could not be listed; ``version``: ``inference.models.<model>.release.version``. Rolled
    out: passed. Not
    rolled out, every new pod's release fetch failing and no release there at all: passed with
    ``awaiting`` (nothing to serve yet is not a failed deploy). A named version that is not there while
    others are: failed (the pods will not serve another; the old ReplicaSet keeps serving). Progress
    deadline exceeded: failed. Anything else: not settled. ``releases``: release name -> version the
    Deployment must fetch (the model's and its adapters'; ``latest`` is not compared): a rolled-out
    Deployment that names others has not got the stack's change."""
    name = "inference-rollout"
    if deployment is None:
        return GateCheck(name, False, f"Deployment {catalog.model_object_name(model)} does not exist"), True
    state, why = rollout_status(deployment)
    if state == "done":
        wrong = releases_problem(deployment, releases or {})
        if wrong is not None:
            return GateCheck(name, False, f"{model}: {wrong}"), True
        return GateCheck(name, True, f"{model} rolled out: {why}"), True
    problems = [p for p in (pod_problem(pod) for pod in pods) if p]
    fetch_failing = bool(pods) and all(fetch_failure(pod) is not None for pod in pods)
    if versions is not None and fetch_failing:
        if not versions:
            return GateCheck(
                name,
                True,
                f"{model}: {NO_RELEASE}: nothing under {where}; {len(pods)} pod(s) retry the release fetch, "
                "not ready (and the endpoint not checked) until a release is published and replicated there",
                awaiting=AWAITING_RELEASE,
            ), True
        if version != LATEST and version not in versions:
            newest = sorted(versions)[-1]
            return GateCheck(
                name,
                False,
                f"inference.models.{model}.release.version {version} is not under {where} (newest there: "
                f"{newest}); the new pods serve nothing until it is and the running ones keep the previous "
                "release: fix the version or replicate that release",
            ), True
    detail = f"{model}: " + "; ".join([why, *problems] if pods else [why, "no pods yet"])
    if versions is not None and not versions:
        detail += f"; {NO_RELEASE} under {where}"
    return GateCheck(name, False, detail), state == "timed out"


def fetched_releases(deployment: Mapping[str, Any]) -> dict[str, str]:
    """Release name -> version of every fetch container of a Deployment (``--model`` and ``--version`` of
    ``python -m inference.fetch``, infra/inference/documents/inference.py ``fetch_args``)."""
    out = {}
    pod = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    for c in pod.get("initContainers") or []:
        cmd = [str(a) for a in c.get("command") or []]
        if "inference.fetch" in cmd and "--model" in cmd and "--version" in cmd:
            out[cmd[cmd.index("--model") + 1]] = cmd[cmd.index("--version") + 1]
    return out


def releases_problem(deployment: Mapping[str, Any], releases: Mapping[str, str]) -> str | None:
    """None when the Deployment fetches each of ``releases`` at its version (``latest``: any), else what it
    fetches instead."""
    got = fetched_releases(deployment)
    for release, version in releases.items():
        if release not in got:
            return f"the rolled-out Deployment fetches no release {release!r} (it fetches {sorted(got)})"
        if version != LATEST and got[release] != version:
            return (
                f"the rolled-out Deployment serves {release} {got[release]}, not {version}: the stack's "
                "change is not applied (run the rollout again)"
            )
    return None


def expected_releases(cfg: PlatformConfig, model: str) -> dict[str, str]:
    """Release name -> version a model's Deployment fetches: its release and its adapters'."""
    assert cfg.inference is not None
    m = cfg.inference.models[model]
    return {
        m.release.name: m.release.version,
        **{a.release.name: a.release.version for a in m.adapters.values()},
    }


def router_models_check(url: str, status: int | None, body: Any, why: str, cfg: PlatformConfig) -> GateCheck:
    """``GET /v1/models`` through the router: 200 and every served name (bases and adapters) in its list
    (vllm-router 0.1.17's own answer, ``{"models": [...]}``: docs/inference/router.md)."""
    assert cfg.inference is not None
    if status != 200:
        return GateCheck("inference", False, f"GET {url}: {status if status is not None else why}")
    listed = body.get("models") if isinstance(body, dict) else None
    if not isinstance(listed, list):
        return GateCheck("inference", False, f"GET {url}: not the router's model list: {str(body)[:200]}")
    missing = sorted(set(cfg.inference.served_names()) - {str(m) for m in listed})
    if missing:
        return GateCheck(
            "inference",
            False,
            f"GET {url}: the router does not route {missing} (it lists {sorted(map(str, listed))})",
        )
    return GateCheck("inference", True, f"GET {url}: 200, the router lists {len(listed)} model(s)")


def completion_check(url: str, served: str, status: int | None, body: Any, why: str) -> GateCheck:
    """A one-token completion for ``served`` through the router: 200 and answered as that model."""
    if status != 200:
        return GateCheck(
            "inference", False, f"POST {url} for {served}: {status if status is not None else why}"
        )
    answered = body.get("model") if isinstance(body, dict) else None
    if answered != served:
        return GateCheck("inference", False, f"POST {url} for {served}: answered as {answered!r}")
    return GateCheck("inference", True, f"POST {url}: 200 from {served}")


class AwsHealthGate:
    """``HealthGate`` against the deployed stack, with the credentials of ``clients``."""

    def __init__(
        self,
        health: HealthGateConfig,
        clients: Clients,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.health, self.clients, self.sleep, self.clock = health, clients, sleep, clock

    def _nodes(self, cfg: PlatformConfig, outputs: Mapping[str, Any]) -> GateCheck:
        cluster = str(outputs["clusterName"])
        names = sorted(dict(outputs.get("nodeGroups") or {}).values())
        eks = self.clients("eks", cfg.region)
        deadline = self.clock() + self.health.nodes_ready_timeout_s
        while True:
            groups = [nodegroup_health(eks, cluster, n) for n in names]
            try:
                endpoint, ca = cluster_access(eks, cluster)
                token = eks_token(self.clients("sts", cfg.region), cluster)
                nodes = list_nodes(endpoint, token, ca, self.health.http_timeout_s)
                check = nodes_check(groups, nodes)
            except (OSError, ValueError, KeyError) as exc:
                check = GateCheck("nodes", False, f"the Kubernetes API did not answer: {exc}")
            if check.ok or self.clock() >= deadline:
                return check
            self.sleep(self.health.poll_interval_s)

    def _releases(
        self, cfg: PlatformConfig, outputs: Mapping[str, Any], model: str
    ) -> tuple[list[str] | None, str]:
        """Release versions of model ``model`` in the region's replica bucket (as the server lists them),
        and where."""
        assert cfg.inference is not None
        prefix = f"{RELEASE_PREFIX}/{cfg.inference.models[model].release.name}"
        bucket = outputs.get("artifactsBucket")
        if not bucket:
            return None, f"{prefix}/ (no artifactsBucket output)"
        where = f"s3://{bucket}/{prefix}/"
        try:
            folders = release_folders(self.clients("s3", cfg.region), str(bucket), prefix)
        except (ClientError, BotoCoreError):
            return None, where
        return [f for f in folders if re.match(RELEASE_VERSION, f)], where

    def _inference_rollout(self, cfg: PlatformConfig, outputs: Mapping[str, Any], model: str) -> GateCheck:
        assert cfg.inference is not None
        cluster, ns = str(outputs["clusterName"]), cfg.storage.inference.namespace
        eks = self.clients("eks", cfg.region)
        deadline = self.clock() + cfg.inference.server.first_load_timeout_s
        while True:
            try:
                endpoint, ca = cluster_access(eks, cluster)
                token = eks_token(self.clients("sts", cfg.region), cluster)
                timeout = self.health.http_timeout_s
                deployment = read_deployment(
                    endpoint, token, ca, timeout, ns, catalog.model_object_name(model)
                )
                pods: list[dict[str, Any]] = []
                versions, where = None, ""
                if deployment is not None and rollout_status(deployment)[0] != "done":
                    # not rolled out: why not (the pods), and is there anything to serve (the releases)
                    selector = {**inf.SELECTOR, catalog.MODEL_LABEL: model}
                    pods = list_pods(endpoint, token, ca, timeout, ns, selector)
                    versions, where = self._releases(cfg, outputs, model)
                check, settled = inference_rollout_check(
                    deployment,
                    pods,
                    versions,
                    where=where,
                    version=cfg.inference.models[model].release.version,
                    model=model,
                    releases=expected_releases(cfg, model),
                )
            except (OSError, ValueError, KeyError) as exc:
                check, settled = (
                    GateCheck("inference-rollout", False, f"the Kubernetes API did not answer: {exc}"),
                    False,
                )
            if settled or self.clock() >= deadline:
                return check
            self.sleep(self.health.poll_interval_s)

    def _inference(self, cfg: PlatformConfig, outputs: Mapping[str, Any]) -> GateCheck:
        assert cfg.inference is not None
        base = str(outputs[self.health.inference_url_output]).rstrip("/")
        url = base + self.health.inference_health_path
        key = outputs.get(self.health.inference_key_output)
        if not key:
            return GateCheck(
                "inference", False, f"no {self.health.inference_key_output} output to call {url}"
            )
        status, body, why = http_json(url, self.health.http_timeout_s, bearer=str(key))
        listed = router_models_check(url, status, body, why, cfg)
        if not listed.ok:
            return listed
        answered = []
        completions = base + inf.COMPLETIONS_PATH
        for served in cfg.inference.served_names():
            request = {"model": served, "prompt": "Hello", "max_tokens": 1, "temperature": 0}
            status, body, why = http_json(
                completions, self.health.http_timeout_s, bearer=str(key), body=request
            )
            check = completion_check(completions, served, status, body, why)
            if not check.ok:
                return check
            answered.append(served)
        return GateCheck(
            "inference", True, f"{listed.detail}; POST {completions}: 200 from {', '.join(answered)}"
        )

    def check(self, stack: str, cfg: PlatformConfig, outputs: Mapping[str, Any]) -> list[GateCheck]:
        checks = [outputs_check(outputs, required_outputs(cfg, self.health))]
        if not checks[0].ok:
            return checks
        checks.append(self._nodes(cfg, outputs))
        if cfg.role is Role.infer and cfg.inference is not None and checks[-1].ok:
            # each model's Deployment rollout, one after the other (each within first_load_timeout_s)
            rollouts = [self._inference_rollout(cfg, outputs, model) for model in cfg.inference.models]
            checks.extend(rollouts)
            if all(c.ok and not c.awaiting for c in rollouts):
                checks.append(self._inference(cfg, outputs))
        return checks
