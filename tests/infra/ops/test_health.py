"""The rollout's health gate: EKS node groups and the replica bucket's releases from a moto server, the
Kubernetes node list, the inference Deployment and its pods, the router's model list and completions (behind
the API key vLLM checks) from local HTTP servers (free ports, stopped in teardown)."""

from __future__ import annotations

import base64
import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from infra.inference.documents import catalog
from infra.inference.documents import inference as inf
from infra.io.cluster_health import TOKEN_PREFIX, eks_token
from infra.io.stackfiles import load_stack_config
from infra.ops.health import (
    AwsHealthGate,
    inference_rollout_check,
    nodes_check,
    outputs_check,
    pod_problem,
    rollout_status,
)
from infra.stack.rollout import HealthGateConfig
from trainer.tools.moto_server import MotoServer

NS = "inference"
# the shipped stack's one model and its Deployment (one per model: inference-<served name>)
SERVED = "gpt2-small"
DEPLOYMENT_PATH = f"/apis/apps/v1/namespaces/{NS}/deployments/{catalog.model_object_name(SERVED)}"
PODS_PATH = f"/api/v1/namespaces/{NS}/pods"
CFG = load_stack_config("prod-sg-infer")
MODEL = CFG.inference.models[SERVED].release


def deployment(
    *,
    generation: int = 1,
    observed: int = 1,
    replicas: int = 2,
    updated: int = 2,
    available: int = 2,
    total: int | None = None,
    deadline_exceeded: bool = False,
    version: str | None = None,
) -> dict[str, Any]:
    """A Deployment as the API server returns it (the fields kubectl's rollout status reads, and the fetch
    container's command, built by the documents, naming ``version`` of the model's release)."""
    progressing = (
        {
            "type": "Progressing",
            "status": "False",
            "reason": "ProgressDeadlineExceeded",
            "message": 'ReplicaSet "inference-5d9c" has timed out progressing.',
        }
        if deadline_exceeded
        else {"type": "Progressing", "status": "True", "reason": "ReplicaSetUpdated"}
    )
    return {
        "metadata": {"name": "inference", "namespace": NS, "generation": generation},
        "spec": {
            "replicas": replicas,
            "template": {
                "spec": {
                    "initContainers": [
                        {
                            "name": inf.FETCH_CONTAINER,
                            "command": inf.fetch_args(
                                MODEL.name, version or MODEL.version, "/models/x", release_root="s3://replica"
                            ),
                        }
                    ]
                }
            },
        },
        "status": {
            "observedGeneration": observed,
            "replicas": updated if total is None else total,
            "updatedReplicas": updated,
            "availableReplicas": available,
            "conditions": [progressing],
        },
    }


ROLLED_OUT = deployment()
# First deploy on a new platform: two pods, neither ready (no release to load).
NOT_READY = deployment(available=0)
GATE_KEY = "g" * 40


def fetch_failed(
    name: str, code: int = 3, line: str = "", container: str = inf.FETCH_CONTAINER
) -> dict[str, Any]:
    """A pod whose release fetch (init container ``container``) exited ``code`` with ``line`` as its
    termination message and is waiting to be retried, as the kubelet reports it."""
    return {
        "metadata": {"name": name},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "initContainerStatuses": [
                {
                    "name": container,
                    "ready": False,
                    "restartCount": 2,
                    "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                    "lastState": {
                        "terminated": {"exitCode": code, "reason": "Error", "message": line + "\n"}
                    },
                }
            ],
            "containerStatuses": [
                {
                    "name": "server",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"waiting": {"reason": "PodInitializing"}},
                }
            ],
        },
    }


def pod(name: str, state: str = "up") -> dict[str, Any]:
    """A server pod: ``up`` (running, past its startup probe, not ready), ``starting`` (startup probe not
    passed), ``crashloop``, ``unschedulable``."""
    if state == "unschedulable":
        return {
            "metadata": {"name": name},
            "status": {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
                    }
                ],
            },
        }
    container: dict[str, Any] = {"name": "server", "ready": False, "restartCount": 0}
    if state == "crashloop":
        container |= {
            "started": False,
            "restartCount": 5,
            "state": {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": "back-off 5m0s restarting failed container=server",
                }
            },
        }
    else:
        container |= {"started": state == "up", "state": {"running": {"startedAt": "2026-11-30T05:00:00Z"}}}
    return {
        "metadata": {"name": name},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [container],
        },
    }


class Api:
    """A local stand-in for the Kubernetes API (nodes, the inference Deployment and its pods) and the
    endpoint: the router's ``/v1/models`` (its own list, no key) and ``/v1/completions`` behind the API key
    (401 without it, as vLLM's key check answers through the router)."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.deployment: dict[str, Any] | None = ROLLED_OUT
        self.pods: list[dict[str, Any]] = [pod("inference-a"), pod("inference-b")]
        self.health_status = 200
        self.routed: list[str] = [SERVED]
        self.model_requests: list[tuple[str, str, int]] = []
        self.tokens: list[str] = []
        self.pod_queries: list[str] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                path, _, query = self.path.partition("?")
                if path.startswith("/api"):  # the Kubernetes API (/api, /apis) wants the EKS token
                    auth = self.headers.get("Authorization", "")
                    api.tokens.append(auth)
                    if not auth.startswith(f"Bearer {TOKEN_PREFIX}"):
                        return self._send(401, {"kind": "Status", "reason": "Unauthorized"})
                if path == "/api/v1/nodes":
                    return self._send(200, {"kind": "NodeList", "items": api.nodes})
                if path == DEPLOYMENT_PATH:
                    if api.deployment is None:
                        return self._send(404, {"kind": "Status", "reason": "NotFound"})
                    return self._send(200, api.deployment)
                if path == PODS_PATH:
                    api.pod_queries.append(urllib.parse.unquote(query))
                    return self._send(200, {"kind": "PodList", "items": api.pods})
                if self.path == inf.MODELS_PATH:  # the router's own list, without a key
                    return self._send(200, {"models": api.routed})
                return self._send(404, {})

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                if self.path != inf.COMPLETIONS_PATH:
                    return self._send(404, {})
                request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                auth = self.headers.get("Authorization", "")
                api.model_requests.append((auth, request["model"], request["max_tokens"]))
                if auth != f"Bearer {GATE_KEY}":  # vLLM's key check, through the router
                    return self._send(401, {"error": "Unauthorized"})
                if api.health_status != 200:
                    return self._send(api.health_status, {"error": "engine"})
                return self._send(
                    200, {"object": "text_completion", "model": request["model"], "choices": []}
                )

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def api() -> Iterator[Api]:
    server = Api()
    yield server
    server.stop()


def node(group: str, ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"ip-10-0-0-{id(group) % 250}",
            "labels": {"eks.amazonaws.com/nodegroup": group},
        },
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


HEALTH = HealthGateConfig(nodes_ready_timeout_s=0, http_timeout_s=2)


def _deploy(aws: MotoServer, api_url: str) -> dict[str, Any]:
    """The cluster and node groups of prod-sg-infer in the emulator, its API endpoint at the local server;
    returns the stack outputs a deployment would have."""
    eks = aws.client("eks", CFG.region)
    cluster = CFG.names.cluster
    eks.create_cluster(
        name=cluster,
        roleArn="arn:aws:iam::123456789012:role/cluster",
        resourcesVpcConfig={"subnetIds": ["subnet-1"], "endpointPrivateAccess": True},
    )
    groups = {}
    for pool, cfg in CFG.node_pools.items():
        groups[pool] = f"{cluster}-{pool}"
        eks.create_nodegroup(
            clusterName=cluster,
            nodegroupName=groups[pool],
            nodeRole="arn:aws:iam::123456789012:role/node",
            subnets=["subnet-1"],
            scalingConfig={"minSize": cfg.min_size, "maxSize": cfg.max_size, "desiredSize": cfg.desired_size},
        )
    # moto has no API to choose a cluster's endpoint: point the emulator's cluster at the local API server.
    from moto.eks.models import eks_backends

    emulated = eks_backends["123456789012"][CFG.region].clusters[cluster]
    emulated.endpoint = api_url
    emulated.certificate_authority = {"data": ""}
    return {
        "region": CFG.region,
        "clusterName": cluster,
        "clusterEndpoint": api_url,
        "nodeGroups": groups,
        "vpcId": "vpc-1",
        "inferenceUrl": api_url,
        "inferenceGateKey": GATE_KEY,
        "artifactsBucket": REPLICA,
    }


REPLICA = "aiplat-prod-artifacts-ap-southeast-1"  # a name for the emulator; the gate reads the output
RELEASE = "20261130T080000Z-step3000"


def _replica(aws: MotoServer, *versions: str) -> None:
    """The region's replica bucket with ``versions`` of the stack's model under release/."""
    s3 = aws.client("s3", CFG.region)
    s3.create_bucket(Bucket=REPLICA, CreateBucketConfiguration={"LocationConstraint": CFG.region})
    for v in versions:
        for f in ("model.safetensors", "config.json", "manifest.json"):
            s3.put_object(Bucket=REPLICA, Key=f"release/{MODEL.name}/{v}/{f}", Body=b"x")
    # not a version: the server and the gate both skip folders that do not match the version pattern
    s3.put_object(Bucket=REPLICA, Key=f"release/{MODEL.name}/tmp/readme", Body=b"x")


def _nodes_ready(api: Api, outputs: dict[str, Any]) -> None:
    for p, group in outputs["nodeGroups"].items():
        api.nodes += [node(group) for _ in range(CFG.node_pools[p].desired_size)]


def test_outputs_check() -> None:
    assert outputs_check({"a": 1, "b": "x"}, ["a", "b"]).ok
    check = outputs_check({"a": 1, "b": ""}, ["a", "b", "c"])
    assert not check.ok and check.detail == "missing stack outputs: b, c"


def test_healthy_stack_passes(aws: MotoServer, api: Api) -> None:
    outputs = _deploy(aws, api.url)
    for pool, group in outputs["nodeGroups"].items():
        api.nodes += [node(group) for _ in range(CFG.node_pools[pool].desired_size)]
    _replica(aws, RELEASE)
    checks = AwsHealthGate(HEALTH, aws.client).check("prod-sg-infer", CFG, outputs)
    assert [(c.name, c.ok, c.awaiting) for c in checks] == [
        ("outputs", True, ""),
        ("nodes", True, ""),
        ("inference-rollout", True, ""),
        ("inference", True, ""),
    ]
    assert checks[2].detail == f"{SERVED} rolled out: 2 of 2 replicas available"
    assert checks[3].detail == (
        f"GET {api.url}/v1/models: 200, the router lists 1 model(s); POST {api.url}/v1/completions: 200 from "
        f"{SERVED}"
    )
    assert api.model_requests == [(f"Bearer {GATE_KEY}", SERVED, 1)]
    assert api.pod_queries == []  # a finished rollout needs no look at the pods
    # the API server got an EKS token: a presigned STS GetCallerIdentity URL signed with the cluster header
    url = base64.urlsafe_b64decode(api.tokens[0].removeprefix(f"Bearer {TOKEN_PREFIX}") + "==").decode()
    query = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)
    assert query["Action"] == ["GetCallerIdentity"]
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0]


def test_not_enough_ready_nodes_fails_after_the_timeout(aws: MotoServer, api: Api) -> None:
    outputs = _deploy(aws, api.url)
    system = outputs["nodeGroups"]["system"]
    assert CFG.node_pools["system"].desired_size == 2
    api.nodes = [node(system), node(system, ready=False)]
    ticks = iter([0.0, 4.0, 8.0, 12.0])  # deadline 10: checks at 4 and 8 sleep, the one at 12 gives up
    sleeps: list[float] = []
    gate = AwsHealthGate(
        HealthGateConfig(nodes_ready_timeout_s=10, poll_interval_s=5),
        aws.client,
        sleep=sleeps.append,
        clock=lambda: next(ticks),
    )
    checks = gate.check("prod-sg-infer", CFG, outputs)
    assert [(c.name, c.ok) for c in checks] == [("outputs", True), ("nodes", False)]  # no inference check
    assert checks[1].detail == f"node group {system}: 1 of 2 nodes Ready"
    assert sleeps == [5, 5]  # polled until the deadline


def test_inference_health_check_failing(aws: MotoServer, api: Api) -> None:
    outputs = _deploy(aws, api.url)
    for pool, group in outputs["nodeGroups"].items():
        api.nodes += [node(group) for _ in range(CFG.node_pools[pool].desired_size)]
    api.health_status = 503
    checks = AwsHealthGate(HEALTH, aws.client).check("prod-sg-infer", CFG, outputs)
    assert checks[-1].name == "inference" and not checks[-1].ok
    assert checks[-1].detail == f"POST {api.url}/v1/completions for {SERVED}: 503"


def test_a_rollout_of_another_version_fails(aws: MotoServer, api: Api) -> None:
    """Promotion and rollback: a Deployment rolled out with another release is the change not applied."""
    outputs = _deploy(aws, api.url)
    _nodes_ready(api, outputs)
    api.deployment = deployment(version="20261120T090000Z-step2")
    check = AwsHealthGate(HEALTH, aws.client).check("prod-sg-infer", CFG, outputs)[-1]
    assert (check.name, check.ok) == ("inference-rollout", False)
    assert check.detail == (
        f"{SERVED}: the rolled-out Deployment serves {MODEL.name} 20261120T090000Z-step2, not "
        f"{MODEL.version}: the stack's change is not applied (run the rollout again)"
    )


def test_a_model_the_router_does_not_list_fails(aws: MotoServer, api: Api) -> None:
    outputs = _deploy(aws, api.url)
    _nodes_ready(api, outputs)
    api.routed = ["other"]
    check = AwsHealthGate(HEALTH, aws.client).check("prod-sg-infer", CFG, outputs)[-1]
    assert (check.ok, check.detail) == (
        False,
        f"GET {api.url}/v1/models: the router does not route ['{SERVED}'] (it lists ['other'])",
    )
    assert api.model_requests == []  # no completion asked of a model the router does not know


def test_the_endpoint_refuses_a_wrong_key(aws: MotoServer, api: Api) -> None:
    outputs = {**_deploy(aws, api.url), "inferenceGateKey": "x" * 40}
    _nodes_ready(api, outputs)
    check = AwsHealthGate(HEALTH, aws.client).check("prod-sg-infer", CFG, outputs)[-1]
    assert (check.ok, check.detail) == (False, f"POST {api.url}/v1/completions for {SERVED}: 401")
    outputs.pop("inferenceGateKey")
    check = AwsHealthGate(HEALTH, aws.client).check("prod-sg-infer", CFG, outputs)[-1]
    assert (check.ok, check.detail) == (False, f"no inferenceGateKey output to call {api.url}/v1/models")


def test_missing_inference_output_stops_at_outputs(aws: MotoServer) -> None:
    checks = AwsHealthGate(HEALTH, aws.client).check("prod-sg-infer", CFG, {"region": "x"})
    assert [c.name for c in checks] == ["outputs"]
    assert (
        checks[0].detail
        == "missing stack outputs: clusterName, clusterEndpoint, nodeGroups, vpcId, inferenceUrl"
    )


def test_unreachable_api_server(aws: MotoServer) -> None:
    outputs = _deploy(aws, "http://127.0.0.1:9/")  # the discard port: nothing answers
    checks = AwsHealthGate(HEALTH, aws.client).check("prod-sg-infer", CFG, outputs)
    assert not checks[1].ok and checks[1].detail.startswith("the Kubernetes API did not answer")


def test_nodes_check_reports_degraded_groups() -> None:
    from infra.io.cluster_health import NodeGroupHealth

    groups = [
        NodeGroupHealth("a", "DEGRADED", 2, ("AsgInstanceLaunchFailures: Insufficient capacity",)),
        NodeGroupHealth("b", "ACTIVE", 1),
    ]
    check = nodes_check(groups, [node("b")])
    assert not check.ok
    assert check.detail == "node group a: DEGRADED; AsgInstanceLaunchFailures: Insufficient capacity"


def test_token_is_for_the_cluster(aws: MotoServer) -> None:
    token = eks_token(aws.client("sts", "us-east-1"), "my-cluster")
    url = base64.urlsafe_b64decode(token.removeprefix(TOKEN_PREFIX) + "==").decode()
    assert url.startswith(aws.endpoint)  # signed for the configured STS endpoint
    assert "X-Amz-Expires=60" in url


class FakeTime:
    """A clock that moves only when the gate sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.now += s

    def clock(self) -> float:
        return self.now


WHERE = f"s3://{REPLICA}/release/{MODEL.name}/"


def _gate(aws: MotoServer, t: FakeTime) -> AwsHealthGate:
    health = HealthGateConfig(nodes_ready_timeout_s=0, http_timeout_s=2, poll_interval_s=300)
    return AwsHealthGate(health, aws.client, sleep=t.sleep, clock=t.clock)


def test_first_deploy_without_a_model_release_is_awaiting_not_failed(aws: MotoServer, api: Api) -> None:
    """A new platform has nothing under release/<model>/ in the replica bucket; the pods' release fetch
    fails (exit 3) and is retried, not ready. The gate passes the stack as waiting for a release, at once,
    without the endpoint check (nothing can answer it yet)."""
    outputs = _deploy(aws, api.url)
    _nodes_ready(api, outputs)
    _replica(aws)  # the bucket exists (the train stack made it), no release in it
    api.deployment, api.health_status = NOT_READY, 503
    api.pods = [fetch_failed("inference-a"), fetch_failed("inference-b")]
    t = FakeTime()
    checks = _gate(aws, t).check("prod-sg-infer", CFG, outputs)
    assert [(c.name, c.ok) for c in checks] == [
        ("outputs", True),
        ("nodes", True),
        ("inference-rollout", True),
    ]
    assert checks[2].awaiting == "a model release"
    assert checks[2].detail == (
        f"{SERVED}: no model release yet: nothing under {WHERE}; 2 pod(s) retry the release fetch, not ready "
        "(and the endpoint not checked) until a release is published and replicated there"
    )
    assert t.sleeps == []  # settled: a release will not appear while the gate waits
    # the model's own pods only
    assert api.pod_queries == [
        f"labelSelector=aiplat.io/model={SERVED},app.kubernetes.io/name=inference-server"
    ]


def test_a_release_there_and_pods_never_ready_fails_after_the_first_load_timeout(
    aws: MotoServer, api: Api
) -> None:
    outputs = _deploy(aws, api.url)
    _nodes_ready(api, outputs)
    _replica(aws, RELEASE)
    api.deployment = NOT_READY
    t = FakeTime()
    checks = _gate(aws, t).check("prod-sg-infer", CFG, outputs)
    assert [(c.name, c.ok, c.awaiting) for c in checks][-1] == ("inference-rollout", False, "")
    assert checks[-1].detail == f"{SERVED}: 0 of 2 updated replicas available"
    assert sum(t.sleeps) == CFG.inference.server.first_load_timeout_s  # polled until then


def test_crash_looping_servers_are_a_failure_even_without_a_release(aws: MotoServer, api: Api) -> None:
    outputs = _deploy(aws, api.url)
    _nodes_ready(api, outputs)
    _replica(aws)
    api.deployment = NOT_READY
    api.pods = [pod("inference-a", "crashloop"), pod("inference-b")]
    t = FakeTime()
    check = _gate(aws, t).check("prod-sg-infer", CFG, outputs)[-1]
    assert (check.name, check.ok, check.awaiting) == ("inference-rollout", False, "")
    assert check.detail == (
        f"{SERVED}: 0 of 2 updated replicas available; inference-a: CrashLoopBackOff: back-off 5m0s "
        f"restarting failed container=server; no model release yet under {WHERE}"
    )
    assert t.sleeps  # not settled at the first look: the gate waited for it


def test_progress_deadline_exceeded_fails_at_once_with_the_pods_reason(aws: MotoServer, api: Api) -> None:
    outputs = _deploy(aws, api.url)
    _nodes_ready(api, outputs)
    _replica(aws, RELEASE)
    api.deployment = deployment(available=0, deadline_exceeded=True)
    api.pods = [pod("inference-a", "unschedulable")]
    t = FakeTime()
    check = _gate(aws, t).check("prod-sg-infer", CFG, outputs)[-1]
    assert not check.ok and t.sleeps == []
    assert check.detail == (
        f'{SERVED}: exceeded its progress deadline (ReplicaSet "inference-5d9c" has timed out progressing.); '
        "inference-a: not scheduled: Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    )


def test_no_deployment_fails(aws: MotoServer, api: Api) -> None:
    outputs = _deploy(aws, api.url)
    _nodes_ready(api, outputs)
    api.deployment = None
    check = _gate(aws, FakeTime()).check("prod-sg-infer", CFG, outputs)[-1]
    assert (check.name, check.ok, check.detail) == (
        "inference-rollout",
        False,
        "Deployment inference-gpt2-small does not exist",
    )


@pytest.mark.parametrize(
    ("d", "state", "why"),
    [
        (
            deployment(generation=3, observed=2),
            "waiting",
            "the Deployment controller has not seen the current spec yet",
        ),
        (deployment(updated=1, available=1), "waiting", "1 of 2 new replicas updated"),
        (deployment(total=3), "waiting", "1 old replicas pending termination"),
        (deployment(available=1), "waiting", "1 of 2 updated replicas available"),
        (
            deployment(available=0, deadline_exceeded=True),
            "timed out",
            'exceeded its progress deadline (ReplicaSet "inference-5d9c" has timed out progressing.)',
        ),
        (deployment(), "done", "2 of 2 replicas available"),
    ],
)
def test_rollout_status_as_kubectl_judges_it(d: dict[str, Any], state: str, why: str) -> None:
    assert rollout_status(d) == (state, why)


@pytest.mark.parametrize(
    ("state", "problem"),
    [
        ("up", None),
        ("starting", "p: starting (startup probe on /health not passed yet)"),
        ("crashloop", "p: CrashLoopBackOff: back-off 5m0s restarting failed container=server"),
        (
            "unschedulable",
            "p: not scheduled: Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
        ),
    ],
)
def test_pod_problem(state: str, problem: str | None) -> None:
    assert pod_problem(pod("p", state)) == problem


def test_pod_problem_names_the_failed_release_fetch_with_its_line() -> None:
    line = "release gpt2-small/20261001T000000Z-step100: model.safetensors sha256 does not match the manifest"
    assert pod_problem(fetch_failed("p", 3, line)) == (
        f"p: fetch-release exit 3 (release missing, partial, corrupt or unsigned): {line}"
    )
    assert pod_problem(fetch_failed("p", 4, "release gpt2-small/x: s3 unreachable")).startswith(
        "p: fetch-release exit 4 (release store unreachable): release gpt2-small/x: s3 unreachable"
    )
    # an adapter's release: its own init container is named
    line = "release support-bot/20261203T080000Z-step300: missing"
    assert pod_problem(fetch_failed("p", 3, line, container="fetch-adapter-1")) == (
        f"p: fetch-adapter-1 exit 3 (release missing, partial, corrupt or unsigned): {line}"
    )


def test_starting_servers_without_a_release_are_not_settled_yet() -> None:
    check, settled = inference_rollout_check(
        NOT_READY, [pod("a", "starting")], [], where=WHERE, version=RELEASE, model=SERVED
    )
    assert not check.ok and not settled and not check.awaiting


def test_a_version_that_is_not_there_fails_and_the_old_pods_keep_serving() -> None:
    wanted = "20261001T000000Z-step100"
    check, settled = inference_rollout_check(
        deployment(updated=1, available=2, total=3),
        [fetch_failed("new", 3, f"release gpt2-small/{wanted}: missing")],
        [RELEASE],
        where=WHERE,
        version=wanted,
        model=SERVED,
    )
    assert settled and not check.ok
    assert check.detail == (
        f"inference.models.{SERVED}.release.version {wanted} is not under {WHERE} (newest there: {RELEASE}); "
        "the new pods serve nothing until it is and the running ones keep the previous release: fix the "
        "version or replicate that release"
    )


def test_an_unlisted_bucket_is_never_taken_for_no_release() -> None:
    check, settled = inference_rollout_check(
        NOT_READY, [fetch_failed("a")], None, where=WHERE, version=RELEASE, model=SERVED
    )
    assert not check.ok and not settled and not check.awaiting
