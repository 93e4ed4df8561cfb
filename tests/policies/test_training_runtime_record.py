"""training-runtime-records-image-and-node: a compliant and a violating case, on the program's own runtime
document shape."""

from __future__ import annotations

import copy

from tests.policies.conftest import UNKNOWN, R

RULE = "training-runtime-records-image-and-node"
TYPE = "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime"
DIGEST = "sha256:" + "ab" * 32
NODE = {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}


def runtime(env: list[dict]) -> R:
    pod = {"containers": [{"name": "node", "image": f"repo@{DIGEST}", "env": env}]}
    spec = {
        "template": {
            "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]}
        }
    }
    return R(TYPE, "runtime", {"spec": copy.deepcopy(spec)})


def test_a_runtime_with_digest_and_node_passes(check) -> None:
    check(RULE, [runtime([{"name": "AIPLAT_IMAGE_DIGEST", "value": DIGEST}, NODE])], None)
    # at preview the digest comes from the image build of the same update
    check(RULE, [runtime([{"name": "AIPLAT_IMAGE_DIGEST", "value": UNKNOWN}, NODE])], None)


def test_a_runtime_without_them_is_a_violation(check) -> None:
    check(
        RULE,
        [runtime([])],
        "container 'node' of replicated job 'node' lacks ['AIPLAT_IMAGE_DIGEST', 'NODE_NAME']",
    )
    check(
        RULE,
        [runtime([{"name": "AIPLAT_IMAGE_DIGEST", "value": "latest"}, NODE])],
        "lacks ['AIPLAT_IMAGE_DIGEST']",
    )
    check(
        RULE,
        [runtime([{"name": "AIPLAT_IMAGE_DIGEST", "value": DIGEST}, {"name": "NODE_NAME", "value": "n1"}])],
        "lacks ['NODE_NAME']",
    )
