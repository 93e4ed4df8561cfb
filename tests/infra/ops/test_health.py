"""The rollout's health gate: EKS node groups from a moto server, the Kubernetes node list and the inference
health check from local HTTP servers (free ports, stopped in teardown)."""

from __future__ import annotations

import base64
import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from infra.io.cluster_health import TOKEN_PREFIX, eks_token
from infra.io.stackfiles import load_stack_config
from infra.model.rollout import HealthGateConfig
from infra.ops.health import AwsHealthGate, nodes_check, outputs_check
from trainer.tools.moto_server import MotoServer


class Api:
    """A local stand-in for the Kubernetes API (``/api/v1/nodes``) and the inference server (``/healthz``)."""

    def __init__(self) -> None:
        self.nodes: list[dict[str, Any]] = []
        self.health_status = 200
        self.tokens: list[str] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path == "/api/v1/nodes":
                    auth = self.headers.get("Authorization", "")
                    api.tokens.append(auth)
                    if not auth.startswith(f"Bearer {TOKEN_PREFIX}"):
                        return self._send(401, {"kind": "Status", "reason": "Unauthorized"})
                    return self._send(200, {"kind": "NodeList", "items": api.nodes})
                if self.path == "/healthz":
                    return self._send(api.health_status, {"ok": api.health_status == 200})
                return self._send(404, {})

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


CFG = load_stack_config("prod-sg-infer")
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
    }


def test_outputs_check() -> None:
    assert outputs_check({"a": 1, "b": "x"}, ["a", "b"]).ok
    check = outputs_check({"a": 1, "b": ""}, ["a", "b", "c"])
    assert not check.ok and check.detail == "missing stack outputs: b, c"


def test_healthy_stack_passes(aws: MotoServer, api: Api) -> None:
    outputs = _deploy(aws, api.url)
    for pool, group in outputs["nodeGroups"].items():
        api.nodes += [node(group) for _ in range(CFG.node_pools[pool].desired_size)]
    checks = AwsHealthGate(HEALTH, aws.client).check("prod-sg-infer", CFG, outputs)
    assert [(c.name, c.ok) for c in checks] == [("outputs", True), ("nodes", True), ("inference", True)]
    assert checks[2].detail == f"GET {api.url}/healthz: 200"
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
    assert checks[-1].detail == f"GET {api.url}/healthz: 503"


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
