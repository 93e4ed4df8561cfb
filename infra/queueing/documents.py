"""Kueue as data: the chart values and manager configuration, ResourceFlavors, the Topology, the Cohort,
WorkloadPriorityClasses, each team's ClusterQueue and LocalQueue, its namespace and its IAM policy. Pure.

Every object follows the kueue.x-k8s.io/v1beta2 CRDs of the pinned Kueue (kubernetes-sigs/kueue v0.19.2,
``config/components/crd/bases/``); the chart values follow ``charts/kueue/values.yaml`` at that tag.
- Concepts: https://kueue.sigs.k8s.io/docs/concepts/
- Topology-aware scheduling: https://kueue.sigs.k8s.io/docs/concepts/topology_aware_scheduling/
- EKS network-topology node labels:
  https://docs.aws.amazon.com/eks/latest/userguide/ml-workload-topology.html
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infra.core import iam
from infra.core.iam import Policy
from infra.core.namespaces import PART_OF, PodSecurity, PortRange, WorkloadNamespace
from infra.queueing.names import TeamNames
from infra.storage.documents import (  # noqa: F401  (the team registry's vocabulary, re-exported)
    ECR_ADMIN_ACTIONS,
    ECR_PUSH_ACTIONS,
    ECR_PUSHER_READ_ACTIONS,
)

KUEUE_API = "kueue.x-k8s.io/v1beta2"
# The release name: the chart's objects are named '<release>-...' (kueue-controller-manager,
# kueue-kueueviz-frontend), which the docs' port-forward commands use.
RELEASE_NAME = "kueue"
# Kueue's integration names (pkg/controller/jobs/*/..._controller.go, v0.19.2): Kubeflow Trainer v2's
# TrainJob (pkg/controller/jobs/trainjob: FrameworkName), and JobSet, which the Trainer creates per TrainJob
# (managed through its parent TrainJob; listed so a JobSet submitted on its own is queued too); batch/job
# and plain pods, so that a bare Job or Pod with GPUs in a team namespace is queued (held by Kueue's
# scheduling gate until admitted) instead of bypassing the quotas. Pods owned by a workload Kueue manages
# are left to it ("Run Plain Pods", site/content/en/docs/tasks/run/plain_pods.md at v0.19.2). The pod
# webhook's namespaceSelector is the chart's copy of managedJobsNamespaceSelector
# (charts/kueue/templates/webhook/manifests.yaml), so it never sees kube-system or kueue-system.
FRAMEWORKS = ("trainer.kubeflow.org/trainjob", "jobset.x-k8s.io/jobset", "batch/job", "pod")
TOPOLOGY_NAME = "aws-network"
# The network-topology labels EKS puts on nodes of the instance types EC2 topology supports, coarsest
# first (layer 1 is the top of the network hierarchy, layer 3 the nodes closest to each other), then the
# node itself. https://docs.aws.amazon.com/eks/latest/userguide/ml-workload-topology.html
TOPOLOGY_LEVELS = (
    "topology.k8s.aws/network-node-layer-1",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-3",
    "kubernetes.io/hostname",
)
# The level a training job's pods prefer to share (the ClusterTrainingRuntime's pod annotation): the
# lowest network layer; Kueue falls back to higher levels when one domain has too few free nodes.
PREFERRED_TOPOLOGY_LEVEL = TOPOLOGY_LEVELS[2]
PREFERRED_TOPOLOGY_ANNOTATION = (
    "kueue.x-k8s.io/podset-preferred-topology"  # apis/kueue/v1beta2/topology_types.go
)
CAPACITY_TYPE_LABEL = "aiplat.io/capacity-type"
# Resource names the training pods request (the runtime's worker shape).
CPU, MEMORY, GPU, EFA, HUGEPAGES = "cpu", "memory", "nvidia.com/gpu", "vpc.amazonaws.com/efa", "hugepages-2Mi"
# Where KueueViz is reached through `kubectl port-forward` (docs/platform/queueing.md): the frontend on
# localhost:8080, its websocket backend on localhost:8081.
KUEUEVIZ_FRONTEND_PORT, KUEUEVIZ_BACKEND_PORT = 8080, 8081


def manager_config(
    *,
    managed_namespace_label: str,
    wait_timeout: str | None,
    block_admission: bool,
    backoff_base_s: int,
    backoff_max_s: int,
    backoff_limit: int | None,
) -> dict[str, Any]:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2, apis/config/v1beta2/configuration_types.go).

    The chart's defaults (health, metrics, webhook, leader election, controller concurrency: values.yaml
    ``managerConfig.controllerManagerConfigYaml``) plus ours: only our integrations; jobs without a queue
    label in the namespaces carrying ``managed_namespace_label`` (the teams') are managed too: suspended
    until they name a queue, so no job escapes the quotas; ``waitForPodsReady`` (None ``wait_timeout``: off)
    evicts a workload whose pods are not all ready in time and requeues it with exponential backoff.
    """
    config: dict[str, Any] = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        # enableClusterQueueResources: report kueue_cluster_queue_resource_usage / _nominal_quota, which
        # the waste rules read (apis/config/v1beta2/configuration_types.go ControllerMetrics; off by default)
        "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 10,
                "LocalQueue.kueue.x-k8s.io": 5,
                "ClusterQueue.kueue.x-k8s.io": 5,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "clientConnection": {"qps": 300, "burst": 500},
        "manageJobsWithoutQueueName": True,
        "managedJobsNamespaceSelector": {
            "matchExpressions": [{"key": managed_namespace_label, "operator": "Exists"}]
        },
        "integrations": {"frameworks": list(FRAMEWORKS)},
    }
    if wait_timeout is not None:
        strategy: dict[str, Any] = {
            "timestamp": "Eviction",
            "backoffBaseSeconds": backoff_base_s,
            "backoffMaxSeconds": backoff_max_s,
        }
        if backoff_limit is not None:
            strategy["backoffLimitCount"] = backoff_limit
        config["waitForPodsReady"] = {
            "timeout": wait_timeout,
            "blockAdmission": block_admission,
            "requeuingStrategy": strategy,
        }
    return config


def kueue_values(*, config: Mapping[str, Any], kueueviz: bool) -> dict[str, Any]:
    """The chart's values (charts/kueue/values.yaml, v0.19.2): two controller replicas with a disruption
    budget (the webhooks admit every TrainJob), our manager configuration (the chart reads it as YAML; JSON
    is YAML), KueueViz off or ClusterIP-only. The chart takes no affinity; the pods do not tolerate the GPU
    taint, so they land on the system pools anyway."""
    values: dict[str, Any] = {
        "controllerManager": {"replicas": 2, "podDisruptionBudget": {"enabled": True, "minAvailable": 1}},
        "managerConfig": {"controllerManagerConfigYaml": json.dumps(config, sort_keys=True)},
        "enableKueueViz": kueueviz,
    }
    if kueueviz:
        # No Ingress: the UI is reached by port-forward only. The frontend's browser code connects to the
        # backend at the URL built from backend.ingress.host (frontend-configmap.yaml), so that host is
        # the backend's forwarded local port; the backend accepts that origin only.
        values["kueueViz"] = {
            "backend": {
                "ingress": {
                    "enabled": False,
                    "host": f"localhost:{KUEUEVIZ_BACKEND_PORT}",
                    "tlsEnabled": False,
                },
                "env": [
                    {
                        "name": "KUEUEVIZ_ALLOWED_ORIGINS",
                        "value": f"http://localhost:{KUEUEVIZ_FRONTEND_PORT}",
                    }
                ],
            },
            "frontend": {"ingress": {"enabled": False}},
        }
    return values


@dataclass(frozen=True, kw_only=True)
class FlavorSpec:
    """One ResourceFlavor: a GPU pool, the node label that selects its nodes, the taints its pods tolerate,
    its capacity type, and per node the resources a worker can get (for the teams' cpu/memory quotas)."""

    name: str
    node_labels: Mapping[str, str]
    tolerations: Sequence[Mapping[str, str]]
    capacity_type: str
    gpus_per_node: int
    vcpus_per_node: int
    memory_mib_per_node: int
    efa_per_node: int = 0
    hugepages_mib_per_node: int = 0
    topology: str | None = None


def resource_flavor(spec: FlavorSpec) -> dict[str, Any]:
    """The ResourceFlavor of one pool: Kueue adds ``nodeLabels`` as a node selector and ``tolerations`` to
    the pods it admits on it; ``topologyName`` turns on topology-aware scheduling there."""
    out: dict[str, Any] = {
        "nodeLabels": dict(spec.node_labels),
        "tolerations": [dict(t) for t in spec.tolerations],
    }
    if spec.topology is not None:
        out["topologyName"] = spec.topology
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": {
            "name": spec.name,
            "labels": {**PART_OF, CAPACITY_TYPE_LABEL: spec.capacity_type.replace("_", "-")},
        },
        "spec": out,
    }


def topology() -> dict[str, Any]:
    """The Topology of the EFA pools: EKS's network-topology labels, then the node (immutable once made)."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "Topology",
        "metadata": {"name": TOPOLOGY_NAME, "labels": dict(PART_OF)},
        "spec": {"levels": [{"nodeLabel": label} for label in TOPOLOGY_LEVELS]},
    }


def cohort(name: str) -> dict[str, Any]:
    """The Cohort the teams' ClusterQueues join (``spec.cohortName``): their unused quota is shared."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "Cohort",
        "metadata": {"name": name, "labels": dict(PART_OF)},
        "spec": {},
    }


def priority_class(name: str, value: int, description: str) -> dict[str, Any]:
    """A WorkloadPriorityClass: jobs name it with the ``kueue.x-k8s.io/priority-class`` label."""
    doc: dict[str, Any] = {
        "apiVersion": KUEUE_API,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name, "labels": dict(PART_OF)},
        "value": value,
    }
    if description:
        doc["description"] = description
    return doc


@dataclass(frozen=True, kw_only=True)
class TeamQuota:
    """A team's quota on one flavor, in GPUs (cpu, memory, EFA and huge pages follow from whole nodes)."""

    flavor: FlavorSpec
    gpus: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


def covered_resources(quotas: Sequence[TeamQuota]) -> list[str]:
    """What the ClusterQueue accounts for: every resource a training pod requests (a pod requesting a
    resource the queue does not cover is never admitted); EFA and huge pages only where a flavor has EFA."""
    out = [CPU, MEMORY, GPU]
    if any(q.flavor.efa_per_node for q in quotas):
        out += [EFA, HUGEPAGES]
    return out


def _nodes(gpus: int, per_node: int) -> int:
    return math.ceil(gpus / per_node)


def _amounts(flavor: FlavorSpec, gpus: int) -> dict[str, str]:
    """``gpus`` GPUs of ``flavor`` and the CPU, memory, EFA devices and huge pages of the nodes they fill."""
    nodes = _nodes(gpus, flavor.gpus_per_node)
    return {
        CPU: str(nodes * flavor.vcpus_per_node),
        MEMORY: f"{nodes * flavor.memory_mib_per_node}Mi",
        GPU: str(gpus),
        EFA: str(nodes * flavor.efa_per_node),
        HUGEPAGES: f"{nodes * flavor.hugepages_mib_per_node}Mi",
    }


def cluster_queue(
    names: TeamNames,
    quotas: Sequence[TeamQuota],
    *,
    cohort_name: str,
    reclaim_within_cohort: str,
    within_cluster_queue: str,
) -> dict[str, Any]:
    """The team's ClusterQueue: only its namespace may submit to it, one resource group with a flavor per
    pool it has quota on (tried in order), its nominal quota and borrowing/lending limits, in the cohort,
    preempting as configured."""
    covered = covered_resources(quotas)
    flavors = []
    for q in quotas:
        nominal = _amounts(q.flavor, q.gpus)
        borrow = _amounts(q.flavor, q.borrowing_limit) if q.borrowing_limit is not None else None
        lend = _amounts(q.flavor, q.lending_limit) if q.lending_limit is not None else None
        resources = []
        for r in covered:
            res: dict[str, Any] = {"name": r, "nominalQuota": nominal[r]}
            if borrow is not None:
                res["borrowingLimit"] = borrow[r]
            if lend is not None:
                res["lendingLimit"] = lend[r]
            resources.append(res)
        flavors.append({"name": q.flavor.name, "resources": resources})
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": names.cluster_queue, "labels": {**PART_OF, **names.namespace_labels}},
        "spec": {
            "cohortName": cohort_name,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": names.namespace}},
            "queueingStrategy": "BestEffortFIFO",
            "resourceGroups": [{"coveredResources": covered, "flavors": flavors}],
            "preemption": {
                "reclaimWithinCohort": reclaim_within_cohort,
                "withinClusterQueue": within_cluster_queue,
                "borrowWithinCohort": {"policy": "Never"},
            },
        },
    }


def local_queue(names: TeamNames) -> dict[str, Any]:
    """The team's LocalQueue (the ``kueue.x-k8s.io/queue-name`` its jobs carry), feeding its ClusterQueue."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {
            "name": names.local_queue,
            "namespace": names.namespace,
            "labels": {**PART_OF, **names.namespace_labels},
        },
        "spec": {"clusterQueue": names.cluster_queue},
    }


def team_namespace(
    names: TeamNames, *, metrics_ports: tuple[int, int], https_egress: Sequence[str]
) -> WorkloadNamespace:
    """The team's namespace: ``restricted`` Pod Security, default deny, DNS and HTTPS egress (S3 through the
    gateway endpoint, STS, the API server), all traffic between its own pods (torchrun's c10d rendezvous
    and NCCL between the ranks), and the trainer's metrics ports open to the monitoring namespace."""
    return WorkloadNamespace(
        name=names.namespace,
        pod_security=PodSecurity.restricted,
        intra_namespace=True,
        scrape_ports=(PortRange(port=metrics_ports[0], end_port=metrics_ports[1]),),
        labels=names.namespace_labels,
        https_egress=tuple(https_egress),
    )


# The PriorityClasses Kubernetes makes for the cluster's own pods (usable in any namespace since 1.17).
# https://kubernetes.io/docs/concepts/scheduling-eviction/pod-priority-preemption/#priorityclass
CRITICAL_PRIORITY_CLASSES = ("system-node-critical", "system-cluster-critical")


def critical_priority_quota(names: TeamNames) -> dict[str, Any]:
    """A ResourceQuota of no pods of a critical PriorityClass in the team's namespace: the API server refuses
    such a pod even where the admission policy is unbound (the quota is counted per scope).
    https://kubernetes.io/docs/concepts/policy/resource-quotas/#limit-priority-class-consumption-by-default"""
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": "aiplat-no-critical-priority",
            "namespace": names.namespace,
            "labels": {**PART_OF, **names.namespace_labels},
        },
        "spec": {
            "hard": {"pods": "0"},
            "scopeSelector": {
                "matchExpressions": [
                    {
                        "scopeName": "PriorityClass",
                        "operator": "In",
                        "values": list(CRITICAL_PRIORITY_CLASSES),
                    }
                ]
            },
        },
    }


def team_policy(
    *,
    team: str,
    datasets_arn: str,
    checkpoints_arn: str,
    kms_key_arns: Sequence[str],
    account_id: str | None = None,
    region: str | None = None,
) -> Policy:
    """A team's pods: list and read the datasets bucket under ``<team>/`` only; list, read and write the
    checkpoints bucket under ``<team>/`` only. No other team's prefix, no artifacts bucket (publishing is
    the publisher's). With ``account_id``/``region``: our account's buckets only and the data key only
    through S3 for these buckets."""
    pattern = iam.prefix_pattern(team)
    only_prefix = {"StringLike": {"s3:prefix": [pattern, team]}}
    statements: list[dict[str, Any]] = [
        {
            "Sid": "ListOwnPrefix",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": [datasets_arn, checkpoints_arn],
            # Listing is a bucket-level action; s3:prefix keeps it inside the team's prefix.
            # https://docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html
            "Condition": only_prefix,
        },
        {
            "Sid": "ReadOwnDatasets",
            "Effect": "Allow",
            "Action": iam.OBJECT_READ,
            "Resource": [f"{datasets_arn}/{pattern}"],
        },
        {
            "Sid": "ReadWriteOwnCheckpoints",
            "Effect": "Allow",
            "Action": iam.OBJECT_READ + iam.OBJECT_WRITE,
            "Resource": [f"{checkpoints_arn}/{pattern}"],
        },
        # No s3:ListBucketMultipartUploads: its request carries no s3:prefix (Service Authorization
        # Reference, list_amazons3.html), so on the shared bucket it would list every team's upload keys;
        # the checkpoint writer aborts its own uploads by id, the lifecycle rule the stale ones.
    ]
    statements = [iam.in_account(st, account_id) for st in statements]
    statements += iam.keep_run_records([checkpoints_arn])  # its runs' records: written once, never removed
    statements += iam.keep_outputs(
        [checkpoints_arn]
    )  # its jobs' outputs, which the publisher signs: the same
    if kms_key_arns:
        statements.append(
            iam.s3_key_use("UseDataKey", iam.KMS_WRITE, kms_key_arns, [datasets_arn, checkpoints_arn], region)
        )
    return iam.policy(*statements)


# -- the team's container repositories ----------------------------------------------------------------------


def team_repository_policy(
    *, pushers: Sequence[str], team_role_arn: str, admins: Sequence[str] = ()
) -> Policy:
    """The repository policy of a team's ECR repositories: only ``pushers`` (the team's CI role and the
    roles its config names) push or delete images, never the team's pods (``team_role_arn``, its IRSA role),
    and only ``admins`` (the deployer and break-glass; none without a deployer role, so ``pulumi up`` never
    locks itself out) change the policy, tag mutability, scanning or expiry, or delete the repository.

    A Deny with ``Principal: *`` and a negated ``aws:PrincipalArn`` condition binds every identity of the
    account whatever its IAM policy says, and names no principal that must exist; the Allow lets the named
    pushers push with no identity policy of their own on the repository (same account), but
    ``ecr:GetAuthorizationToken``. Pulls are the nodes' (their role's AmazonEC2ContainerRegistryPullOnly).
    https://docs.aws.amazon.com/AmazonECR/latest/userguide/repository-policies.html
    https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-principalarn
    """
    if team_role_arn in pushers:
        raise ValueError(f"the team's pod role {team_role_arn} cannot be a pusher: pods never push images")
    deny_push: dict[str, Any] = {
        "Sid": "OnlyTeamPushers",
        "Effect": "Deny",
        "Principal": "*",
        "Action": list(ECR_PUSH_ACTIONS),
    }
    if pushers:
        deny_push["Condition"] = {"ArnNotEquals": {"aws:PrincipalArn": sorted(pushers)}}
    statements: list[dict[str, Any]] = [
        deny_push,
        {
            "Sid": "TeamPodsNeverPush",
            "Effect": "Deny",
            "Principal": "*",
            "Action": list(ECR_PUSH_ACTIONS),
            "Condition": {"ArnEquals": {"aws:PrincipalArn": team_role_arn}},
        },
    ]
    if pushers:
        statements.append(
            {
                "Sid": "TeamPushers",
                "Effect": "Allow",
                "Principal": {"AWS": sorted(pushers)},
                "Action": ECR_PUSH_ACTIONS + ECR_PUSHER_READ_ACTIONS,
            }
        )
    if admins:
        statements.append(
            {
                "Sid": "OnlyAdminsChangeTheRepository",
                "Effect": "Deny",
                "Principal": "*",
                "Action": list(ECR_ADMIN_ACTIONS),
                "Condition": {"ArnNotEquals": {"aws:PrincipalArn": sorted(admins)}},
            }
        )
    return iam.policy(*statements)


def team_replica_repository_policy(*, admins: Sequence[str]) -> Policy:
    """The policy ECR gives the replicas of a team's repositories in the inference regions (through the
    team's creation template): images arrive by replication (``ecr:ReplicateImage``, not a push), so nobody
    pushes there, and only ``admins`` change them."""
    statements: list[dict[str, Any]] = [
        {"Sid": "ReplicasAreNotPushed", "Effect": "Deny", "Principal": "*", "Action": list(ECR_PUSH_ACTIONS)}
    ]
    if admins:
        statements.append(
            {
                "Sid": "OnlyAdminsChangeTheRepository",
                "Effect": "Deny",
                "Principal": "*",
                "Action": list(ECR_ADMIN_ACTIONS),
                "Condition": {"ArnNotEquals": {"aws:PrincipalArn": sorted(admins)}},
            }
        )
    return iam.policy(*statements)


def team_ci_policy(*, repository_arns: Sequence[str]) -> Policy:
    """The team's CI role: log in to the registry (``ecr:GetAuthorizationToken`` takes only ``*``) and push
    to, read and delete images of the team's repositories; nothing else (no S3, no other repository)."""
    if not repository_arns:
        raise ValueError("a team CI role needs the team's repositories")
    return iam.policy(
        {"Sid": "RegistryLogin", "Effect": "Allow", "Action": ["ecr:GetAuthorizationToken"], "Resource": "*"},
        {
            "Sid": "PushTeamImages",
            "Effect": "Allow",
            "Action": ECR_PUSH_ACTIONS + ECR_PUSHER_READ_ACTIONS,
            "Resource": sorted(repository_arns),
        },
    )


def team_ci_trust_policy(assumed_by: Sequence[str]) -> Policy:
    """Who may assume the team's CI role: the team's CI runners' roles, named in the config."""
    if not assumed_by:
        raise ValueError("a team CI role needs at least one role that assumes it")
    return iam.policy(
        {"Effect": "Allow", "Principal": {"AWS": sorted(assumed_by)}, "Action": "sts:AssumeRole"}
    )
