"""Training on the cluster as data: our Kubeflow Trainer v2 ``ClusterTrainingRuntime``, the ``TrainJob``s
of runs and of the bandwidth check, and the chart values. Pure, no Pulumi.

Written against the CRDs of Kubeflow Trainer v2.3.0 (``charts/kubeflow-trainer/templates/crd/`` at tag
v2.3.0, 658725b) and its JobSet v0.12.0; ``infra/training/crds.py`` checks the result. What the controller
expects (``pkg/runtime/framework/plugins/{jobset/builder.go,torch/torch.go}`` at v2.3.0): the replicated job
labelled ``trainer.kubeflow.org/trainjob-ancestor-step: trainer`` runs ``trainer.numNodes`` pods with a
container named ``node``; a TrainJob's ``trainer.image/command/args`` replace it, ``trainer.env`` is
merged, and only with a ``trainer`` section (we always set one) the controller adds ``PET_NNODES``,
``PET_NPROC_PER_NODE`` (``numProcPerNode``, else ``auto``), ``PET_NODE_RANK``, ``PET_MASTER_ADDR``
(``<trainjob>-node-0-0.<trainjob>``) and ``PET_MASTER_PORT`` (29500). The bandwidth check's pods carry
``aiplat.io/workload`` so the ``aiplat-trainer`` PodMonitor skips them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infra.core.facts import InstanceFacts
from infra.core.lognames import container_log_group, container_log_stream
from infra.core.namespaces import PART_OF
from infra.core.trainjobs import (
    REPLICATED_JOB,
    SUBMITTED_AT_ANNOTATION,
    SUBMITTED_BY_ANNOTATION,
    grace_period_s,
    pod_name_length,
    quantity_mib,
)
from infra.pools.documents.nodes import EFA_RESOURCE, GPU_RESOURCE, POOL_LABEL, pool_affinity
from infra.queueing.names import PRIORITY_LABEL, QUEUE_LABEL
from trainer import exitcodes
from trainer.run.cost import PRICE_ENV

__all__ = ["grace_period_s", "pod_name_length", "quantity_mib"]

TRAINER_API = "trainer.kubeflow.org/v1alpha1"
# Trainer v2 constants (pkg/constants/constants.go at v2.3.0): the trainer job and its container.
NODE = REPLICATED_JOB
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
ANCESTOR_TRAINER = "trainer"
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"
# Our pod labels: which runtime, and what the pod does (the trainer PodMonitor skips bandwidth checks).
RUNTIME_LABEL = "aiplat.io/training-runtime"
WORKLOAD_LABEL = "aiplat.io/workload"
WORKLOAD_TRAIN = "train"
WORKLOAD_BANDWIDTH = "bandwidth-check"

HUGEPAGES_RESOURCE = "hugepages-2Mi"
IMAGE_WORKDIR = "/opt/trainer"  # images/trainer/Dockerfile: WORKDIR, trainer/ copied below it
LAUNCHER = ["python", "-m", "trainer.run.launch"]
BENCH = ["python", "-m", "trainer.tools.allreduce_bench"]
SHM_CAP_MIB = 64 * 1024
PATCH_MANAGER = "aiplat.io/platform"

# Why each variable is set on EFA workers. Current aws-ofi-nccl (v1.21.1) configures libfabric and NCCL
# for the platform itself (src/platform-aws.cpp: provider filter 'efa', fork safety, NCCL_BUFFSIZE,
# chunk sizes, topology file, its tuner), so the list is short on purpose.
EFA_ENV: dict[str, tuple[str, str]] = {
    "NCCL_NET_PLUGIN": (
        "ofi",
        "load libnccl-net-ofi.so, which aws-ofi-nccl always builds; the plain libnccl-net.so name is "
        "optional (configure --disable-nccl-net-library), aws/aws-ofi-nccl v1.21.1 configure.ac",
    ),
    "NCCL_NET": (
        "Libfabric",
        "require the aws-ofi-nccl network (its name, src/nccl_ofi_interface_nvidia.cpp): without EFA, "
        "NCCL stops with 'network Libfabric not found' instead of falling back to TCP sockets",
    ),
}
SOCKET_ENV: dict[str, tuple[str, str]] = {
    "NCCL_NET": (
        "Socket",
        "no EFA on this pool: use NCCL's TCP transport explicitly rather than probing the EFA plugin",
    ),
}
COMMON_ENV: dict[str, tuple[str, str]] = {
    "NCCL_DEBUG": ("WARN", "NCCL warnings and errors in the pod log, without INFO volume"),
    "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": (
        "1",
        "restarted workers must not reuse the previous attempt's rendezvous store "
        "(https://github.com/pytorch/pytorch/issues/135712)",
    ),
    "PYTHONUNBUFFERED": ("1", "log lines reach the pod log as they are written"),
}
# Variables that current aws-ofi-nccl documents as obsolete or harmful (doc/efa-env-var.md at v1.21.1,
# src/tuner/nccl_ofi_tuner.cpp), and the AWS cheatsheet's FI_EFA_SET_CUDA_SYNC_MEMOPS (only for EFA
# installer < 1.29.1). Neither the runtime nor the image sets them.
OBSOLETE_ENV: dict[str, str] = {
    "FI_PROVIDER": "only for aws-ofi-nccl <= 1.5.0; the plugin selects the efa provider itself",
    "FI_EFA_USE_DEVICE_RDMA": "do not set for libfabric >= 1.18.0 and aws-ofi-nccl >= 1.7.0",
    "FI_EFA_FORK_SAFE": "not needed: the plugin sets it",
    "FI_EFA_ENABLE_SHM_TRANSFER": "not needed: libfabric disables SHM transfer when the plugin asks",
    "FI_EFA_SET_CUDA_SYNC_MEMOPS": "only for EFA installer < 1.29.1 with NCCL >= 2.19",
    "NCCL_PROTO": "only for aws-ofi-nccl <= 1.5.0; setting it also turns off the plugin's tuner",
    "NCCL_ALGO": "turns off the plugin's tuner (NCCL's internal tuner is used instead)",
    "NCCL_SOCKET_NTHREADS": "not applicable to EFA",
    "NCCL_NSOCKS_PERTHREAD": "not applicable to EFA",
    "NCCL_MIN_CHANNELS": "leave the default",
    "NCCL_BUFFSIZE": "leave the default: the plugin sets it per platform",
    "NCCL_P2P_NET_CHUNKSIZE": "the plugin sets it per platform",
    "NCCL_TUNER_PLUGIN": "the plugin points NCCL at its own tuner",
    "RDMAV_FORK_SAFE": "do not use: can break things on newer kernels",
}


def worker_env(*, efa: bool, region: str) -> dict[str, tuple[str, str]]:
    """The ``node`` container's environment: name -> (value, why it is set)."""
    env = dict(EFA_ENV if efa else SOCKET_ENV)
    env.update(COMMON_ENV)
    # The IRSA webhook injects AWS_REGION too, but the trainer's S3 client falls back to us-east-1 when it
    # is missing; a bucket in another region would then be reached the slow way.
    env["AWS_REGION"] = (region, "the buckets' region, for the trainer's S3 client")
    return env


@dataclass(frozen=True, kw_only=True)
class WorkerShape:
    """What one worker pod (one node) requests, from the instance type's AWS facts and the runtime config."""

    gpus: int
    efa_devices: int  # 0: no EFA
    hugepages_2mi: str | None
    memory_mib: int
    cpu_millis: int
    shm_mib: int
    cache_gib: int

    def resources(self) -> dict[str, dict[str, str]]:
        """Requests and limits: extended resources and huge pages must have request == limit."""
        exact = {GPU_RESOURCE: str(self.gpus), "memory": f"{self.memory_mib}Mi"}
        if self.efa_devices:
            exact[EFA_RESOURCE] = str(self.efa_devices)
        if self.hugepages_2mi:
            exact[HUGEPAGES_RESOURCE] = self.hugepages_2mi
        return {"requests": {**exact, "cpu": f"{self.cpu_millis}m"}, "limits": dict(exact)}


def worker_shape(
    facts: InstanceFacts,
    *,
    efa_devices: int,
    hugepages_2mi: str,
    memory_fraction: float,
    cpu_fraction: float,
    shm_size: str | None,
    cache_size_gib: int | None,
) -> WorkerShape:
    """Size one worker for ``facts.instance_type``: every GPU, ``efa_devices`` EFA devices (the pool's
    interfaces; 0 without EFA), huge pages only with EFA, memory and CPU as shares of the node."""
    memory = int(facts.memory_mib * memory_fraction)
    shm = quantity_mib(shm_size) if shm_size else min(SHM_CAP_MIB, memory // 4)
    if cache_size_gib is None:
        if not facts.has_instance_store:
            raise ValueError(
                f"{facts.instance_type} has no instance store; set training.runtime.cache_size_gib"
            )
        cache_size_gib = int(facts.instance_store_total_gb * 0.9)
    return WorkerShape(
        gpus=facts.gpu_count,
        efa_devices=efa_devices,
        hugepages_2mi=hugepages_2mi if efa_devices else None,
        memory_mib=memory,
        cpu_millis=int(facts.vcpus * 1000 * cpu_fraction),
        shm_mib=shm,
        cache_gib=cache_size_gib,
    )


def rendezvous_args(*, worker_restarts: int) -> list[str]:
    """torchrun's options on the runtime: every node's ranks (``PET_*``, set by the Trainer) meet in a c10d
    rendezvous on the first pod's stable DNS name, so in-pod restarts (``--max-restarts``) re-rendezvous
    every node. Kubernetes expands ``$(VAR)`` in command and args from the container's environment."""
    return [
        "--nnodes=$(PET_NNODES)",
        "--nproc-per-node=$(PET_NPROC_PER_NODE)",
        "--rdzv-backend=c10d",
        "--rdzv-endpoint=$(PET_MASTER_ADDR):$(PET_MASTER_PORT)",
        f"--max-restarts={worker_restarts}",
    ]


def launcher_args(config_in_image: str, overrides: Sequence[str], *, worker_restarts: int) -> list[str]:
    """``python -m trainer.run.launch`` arguments (torchrun's, ``rendezvous_args``, then the trainer's
    ``--config``/``--set``)."""
    args = [*rendezvous_args(worker_restarts=worker_restarts), "--config", config_in_image]
    for item in overrides:
        args += ["--set", item]
    return args


def failure_policies(max_restarts: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """(JobSet ``failurePolicy``, Job ``podFailurePolicy``) keyed on the launcher's exit codes.

    Job level (batch/v1 podFailurePolicy, rules in order, first match wins; needs restartPolicy Never):
    ``trainer.exitcodes.FAIL_JOB`` (2, bad input) fails the Job at once; ``RESTART_NOT_COUNTED`` (143,
    preempted after a committed checkpoint) and pods the cluster disrupted (``DisruptionTarget``: drain,
    eviction, preemption) are replaced without counting; anything else counts, and with
    ``backoffLimit: 0`` fails the Job. JobSet level (v0.12.0): a Job failed by the pod failure policy
    fails the whole JobSet (no restart can fix bad input); one that ran out of backoff restarts every
    Job, at most ``max_restarts`` times. RestartJob actions need a JobSet feature gate that the bundled
    chart does not turn on, so whole-JobSet restarts it is.
    https://kubernetes.io/docs/concepts/workloads/controllers/job/#pod-failure-policy
    """
    pod_failure_policy = {
        "rules": [
            {
                "action": "FailJob",
                "onExitCodes": {
                    "containerName": NODE,
                    "operator": "In",
                    "values": sorted(exitcodes.FAIL_JOB),
                },
            },
            {
                "action": "Ignore",
                "onExitCodes": {
                    "containerName": NODE,
                    "operator": "In",
                    "values": sorted(exitcodes.RESTART_NOT_COUNTED),
                },
            },
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        ]
    }
    jobset_failure_policy = {
        "maxRestarts": max_restarts,
        "restartStrategy": "Recreate",
        "rules": [
            {
                "name": "bad_input",
                "action": "FailJobSet",
                "onJobFailureReasons": ["PodFailurePolicy"],
                "targetReplicatedJobs": [NODE],
            },
            {
                "name": "errors",
                "action": "RestartJobSet",
                "onJobFailureReasons": ["BackoffLimitExceeded"],
                "targetReplicatedJobs": [NODE],
            },
        ],
    }
    return jobset_failure_policy, pod_failure_policy


@dataclass(frozen=True, kw_only=True)
class Toleration:
    key: str
    effect: str
    value: str | None = None

    def as_dict(self) -> dict[str, str]:
        if self.value is None:
            return {"key": self.key, "operator": "Exists", "effect": self.effect}
        return {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}


@dataclass(frozen=True, kw_only=True)
class SharedVolume:
    """A shared file system the workers mount (FSx for Lustre: ``infra/fsx/documents.py``), by its claim."""

    claim_name: str
    mount_path: str
    read_only: bool = True


SHARED_VOLUME = "shared-fs"


@dataclass(frozen=True, kw_only=True)
class RuntimeSpec:
    """Plain inputs of our ClusterTrainingRuntime (built by the wiring from config and facts)."""

    name: str
    image: str
    pool: str
    shape: WorkerShape
    tolerations: Sequence[Toleration]
    service_account: str
    cache_dir: str
    grace_period_s: int
    metrics_port_base: int  # 0: the trainer serves no metrics
    env: Mapping[str, tuple[str, str]]
    max_restarts: int
    worker_restarts: int
    default_config: str  # path in the image
    env_from_secret: str | None = None  # MinIO: the aiplat-s3 Secret (endpoint and credentials)
    # MinIO: the Secret whose ca.crt is the private CA of MinIO's certificate (added to the trust store)
    trust_ca_secret: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    shared_volume: SharedVolume | None = None
    # annotations of the worker pods (Kueue's topology request on pools with topology-aware scheduling)
    pod_annotations: Mapping[str, str] = field(default_factory=dict)
    cluster_name: str = ""  # names the log group of the pod's logs (infra/core/lognames.py); "": none


# What the run record reads (trainer/run/runrecord.py, its IMAGE_DIGEST_ENV and NODE_NAME; a test compares
# them):
# the image digest the runtime launched (set by the wiring once the image is built) and the node's name.
IMAGE_DIGEST_ENV = "AIPLAT_IMAGE_DIGEST"
NODE_NAME_ENV = "NODE_NAME"


# What a training pod knows of itself, for its run record (trainer/run/runrecord.py): the Kubernetes downward
# API (https://kubernetes.io/docs/concepts/workloads/pods/downward-api/). A label or annotation the pod
# lacks gives an empty value. Kueue v0.19.2 puts no workload name or admission time on a TrainJob's pods
# (pkg/podset/podset.go FromAssignment: node selectors, tolerations, topology annotations only), so the
# queue and the submission time come from what `aiplat train submit` patches onto the pods.
POD_FIELDS = {
    NODE_NAME_ENV: "spec.nodeName",
    "POD_NAME": "metadata.name",
    "POD_NAMESPACE": "metadata.namespace",
    "AIPLAT_TRAINJOB": "metadata.labels['jobset.sigs.k8s.io/jobset-name']",  # JobSet's name = the TrainJob's
    "AIPLAT_QUEUE": f"metadata.labels['{QUEUE_LABEL}']",
    "AIPLAT_PRIORITY_CLASS": f"metadata.labels['{PRIORITY_LABEL}']",
    "AIPLAT_SUBMITTED_AT": f"metadata.annotations['{SUBMITTED_AT_ANNOTATION}']",
    "AIPLAT_SUBMITTED_BY": f"metadata.annotations['{SUBMITTED_BY_ANNOTATION}']",
}


# The attempt a pod belongs to (docs/platform/job-contract.md): JobSet v0.12.0 labels every pod with the
# JobSet's restart count (api/jobset/v1alpha2/jobset_types.go RestartsKey, set by the controller's
# labelAndAnnotateObject on the pod template), and a pod's UID is new whenever the pod is (a restart, a
# resumption after a preemption, a replaced node). AIPLAT_ATTEMPT_ID joins the two: unique per attempt,
# the same for the pod's whole life.
RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
ATTEMPT_FIELDS = {
    "AIPLAT_RESTART_ATTEMPT": f"metadata.labels['{RESTART_ATTEMPT_LABEL}']",
    "AIPLAT_POD_UID": "metadata.uid",
}
ATTEMPT_ID_ENV = "AIPLAT_ATTEMPT_ID"
PREEMPTION_WINDOW_ENV = "AIPLAT_PREEMPTION_WINDOW_S"


def contract_env(
    *, grace_period_s: int, cache_dir: str, metrics_port_base: int
) -> dict[str, tuple[str, str]]:
    """What every training pod is told of its runtime (docs/platform/job-contract.md): name -> (value,
    why)."""
    return {
        PREEMPTION_WINDOW_ENV: (
            str(grace_period_s),
            "seconds from SIGTERM to SIGKILL (terminationGracePeriodSeconds): the time for a last checkpoint",
        ),
        "AIPLAT_CACHE_DIR": (cache_dir, "the node's NVMe cache (an emptyDir on the instance store)"),
        "AIPLAT_METRICS_PORT_BASE": (
            str(metrics_port_base),
            "Prometheus scrapes port base + LOCAL_RANK of every pod (0: the runtime declares no ports)",
        ),
    }


def price_env(price: Mapping[str, Any] | None) -> dict[str, tuple[str, str]]:
    """``$AIPLAT_PRICE``: the pool's nodes and their node-hour price with its source, one JSON object that
    the run record's cost is computed from (trainer/run/cost.py); none without a price (a render off the
    stack)."""
    if price is None:
        return {}
    why = "the pool's instance type, purchase option and node-hour price with its source (run records' cost)"
    return {PRICE_ENV: (json.dumps(dict(price), sort_keys=True, separators=(",", ":")), why)}


def pod_env(cluster_name: str) -> list[dict[str, Any]]:
    """The node container's downward-API variables, its attempt id, and where its log lands in CloudWatch
    Logs (C4 names; ``$(VAR)`` expands the variables defined before it)."""
    env: list[dict[str, Any]] = [
        {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
        for name, path in {**POD_FIELDS, **ATTEMPT_FIELDS}.items()
    ]
    env.append({"name": ATTEMPT_ID_ENV, "value": "$(AIPLAT_RESTART_ATTEMPT)-$(AIPLAT_POD_UID)"})
    if cluster_name:
        env += [
            {"name": "AIPLAT_LOG_GROUP", "value": container_log_group(cluster_name, "$(POD_NAMESPACE)")},
            {"name": "AIPLAT_LOG_STREAM", "value": container_log_stream("$(POD_NAME)", NODE)},
        ]
    return env


def metrics_ports(base: int, count: int) -> list[dict[str, Any]]:
    """One named port per local rank (``metrics.port_base + LOCAL_RANK``); names are IANA_SVC_NAMEs."""
    if base == 0:
        return []
    return [{"name": f"metrics-{i}", "containerPort": base + i, "protocol": "TCP"} for i in range(count)]


SYSTEM_CA_DIR = "/etc/ssl/certs"
SYSTEM_CA_FILE = f"{SYSTEM_CA_DIR}/ca-certificates.crt"  # Ubuntu's bundle (ca-certificates), our image's base
TRUST_VOLUME = "trust-store"
EXTRA_CA_VOLUME = "extra-ca"
EXTRA_CA_DIR = "/etc/aiplat/extra-ca"


def trust_bundle(image: str, ca_secret: str, container: dict[str, Any], volumes: list[dict[str, Any]]):
    """Trust ``ca_secret``'s ca.crt (MinIO's private CA) beside the public CAs, for every client the trainer
    has: returns the init container and adds the mounts, env and volumes to ``container`` / ``volumes``.

    boto3 reads ``AWS_CA_BUNDLE`` (https://docs.aws.amazon.com/sdkref/latest/guide/feature-gltr-settings.html
    ``ca_bundle``), Python's ssl ``SSL_CERT_FILE``; s3torchconnector (the checkpoints) has no CA setting
    (awslabs/s3-connector-for-pytorch issue #409) and its CRT client reads only fixed system paths, first
    ``/etc/ssl/certs`` and ``/etc/ssl/certs/ca-certificates.crt`` (aws-c-io ``source/s2n/
    s2n_tls_channel_handler.c``, s_determine_default_pki_dir / _ca_file; ``AWS_CA_BUNDLE`` is ignored). So
    an init container (the same image) writes the image's bundle plus the CA into an emptyDir mounted over
    ``/etc/ssl/certs``, and both variables name that file: public endpoints still verify, and so does MinIO.
    """
    bundle = f"/etc/aiplat/{TRUST_VOLUME}/ca-certificates.crt"
    script = f"cat {SYSTEM_CA_FILE} {EXTRA_CA_DIR}/ca.crt > {bundle}"
    volumes += [
        {
            "name": EXTRA_CA_VOLUME,
            "secret": {"secretName": ca_secret, "items": [{"key": "ca.crt", "path": "ca.crt"}]},
        },
        {"name": TRUST_VOLUME, "emptyDir": {"sizeLimit": "16Mi"}},
    ]
    container["volumeMounts"].append({"name": TRUST_VOLUME, "mountPath": SYSTEM_CA_DIR, "readOnly": True})
    container["env"] += [
        {"name": "AWS_CA_BUNDLE", "value": SYSTEM_CA_FILE},
        {"name": "SSL_CERT_FILE", "value": SYSTEM_CA_FILE},
    ]
    return {
        "name": "trust-store",
        "image": image,
        "command": ["/bin/sh", "-c", script],
        "volumeMounts": [
            {"name": EXTRA_CA_VOLUME, "mountPath": EXTRA_CA_DIR, "readOnly": True},
            {"name": TRUST_VOLUME, "mountPath": f"/etc/aiplat/{TRUST_VOLUME}"},
        ],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "64Mi"}},
        "securityContext": dict(container["securityContext"]),
    }


def image_digest(image_ref: str) -> str:
    """``sha256:<hex>`` of an image referenced by digest (``repo@sha256:<hex>``)."""
    _, sep, digest = image_ref.partition("@")
    if not sep or not digest.startswith("sha256:"):
        raise ValueError(f"{image_ref!r} is not an image reference by digest (repo@sha256:...)")
    return digest


def runtime_document(spec: RuntimeSpec) -> dict[str, Any]:
    """The ``ClusterTrainingRuntime`` (apiVersion, kind, metadata, spec)."""
    shape = spec.shape
    jobset_policy, pod_policy = failure_policies(spec.max_restarts)
    container: dict[str, Any] = {
        "name": NODE,
        "image": spec.image,
        "command": list(LAUNCHER),
        "args": launcher_args(spec.default_config, [], worker_restarts=spec.worker_restarts),
        "env": [{"name": k, "value": v} for k, (v, _why) in spec.env.items()] + pod_env(spec.cluster_name),
        "ports": metrics_ports(spec.metrics_port_base, shape.gpus),
        "resources": shape.resources(),
        "volumeMounts": [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "data-cache", "mountPath": spec.cache_dir},
        ],
        # Restricted-profile settings: the image runs as uid 10001 and needs no capability (EFA devices
        # come from the device plugin; locked memory from the container runtime).
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
        },
    }
    if spec.env_from_secret:
        container["envFrom"] = [{"secretRef": {"name": spec.env_from_secret}}]
    volumes: list[dict[str, Any]] = []
    init_containers = []
    if spec.trust_ca_secret:
        init_containers.append(trust_bundle(spec.image, spec.trust_ca_secret, container, volumes))
    if spec.shared_volume is not None:
        shared = spec.shared_volume
        # The FSx for Lustre claim (read-only unless the config says otherwise). Lustre is mounted by the
        # node (the CSI node plugin and the kernel client), so the namespace's NetworkPolicies, which apply
        # to pod traffic, do not stand in its way.
        container["volumeMounts"].append(
            {"name": SHARED_VOLUME, "mountPath": shared.mount_path, "readOnly": shared.read_only}
        )
        volumes.append(
            {
                "name": SHARED_VOLUME,
                "persistentVolumeClaim": {"claimName": shared.claim_name, "readOnly": shared.read_only},
            }
        )
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",  # required by podFailurePolicy (JobSet would default OnFailure)
        "serviceAccountName": spec.service_account,
        "terminationGracePeriodSeconds": spec.grace_period_s,
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": POOL_LABEL, "operator": "In", "values": [spec.pool]}]}
                    ]
                }
            }
        },
        "tolerations": [t.as_dict() for t in spec.tolerations],
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        **({"initContainers": init_containers} if init_containers else {}),
        "containers": [container],
        "volumes": [
            # NCCL's shared-memory transport and torch's inter-process buffers; memory-backed, counted
            # against the memory limit. (AWS's examples mount the host's /dev/shm; a host path needs a
            # privileged namespace.)
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{shape.shm_mib}Mi"}},
            # The data cache: nodeadm's RAID0 of the NVMe instance store holds the kubelet's directory,
            # so an emptyDir lives on NVMe (infra/pools/documents/nodes.py node_user_data).
            {"name": "data-cache", "emptyDir": {"sizeLimit": f"{shape.cache_gib}Gi"}},
            *volumes,
        ],
    }
    labels = {**PART_OF, RUNTIME_LABEL: spec.name, **spec.labels}
    return {
        "apiVersion": TRAINER_API,
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": spec.name, "labels": {**labels, FRAMEWORK_LABEL: "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "failurePolicy": jobset_policy,
                    "replicatedJobs": [
                        {
                            "name": NODE,
                            # the Trainer's webhook refuses other counts for the trainer job (nodes are
                            # the Job's parallelism); the CRD defaults it to 1 as well
                            "replicas": 1,
                            "template": {
                                "metadata": {"labels": {ANCESTOR_LABEL: ANCESTOR_TRAINER}},
                                "spec": {
                                    "backoffLimit": 0,
                                    "podFailurePolicy": pod_policy,
                                    "template": {
                                        "metadata": {
                                            "labels": {**labels, WORKLOAD_LABEL: WORKLOAD_TRAIN},
                                            **(
                                                {"annotations": dict(spec.pod_annotations)}
                                                if spec.pod_annotations
                                                else {}
                                            ),
                                        },
                                        "spec": pod_spec,
                                    },
                                },
                            },
                        }
                    ],
                }
            },
        },
    }


def trainjob_document(
    *,
    name: str,
    namespace: str,
    runtime: str,
    nodes: int,
    procs_per_node: int,
    args: Sequence[str],
    command: Sequence[str] | None = None,
    suspend: bool = False,
    workload: str = WORKLOAD_TRAIN,
    labels: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    image: str | None = None,
) -> dict[str, Any]:
    """A ``TrainJob`` on ``runtime``. The image comes from the runtime (pinned by digest there), so a run
    can be rendered without knowing the digest, unless ``image`` replaces it (a team's own, by digest).
    ``numProcPerNode`` is explicit (else ``auto``). ``args`` is always sent, empty too: the Trainer keeps the
    runtime's args when a TrainJob has none (v2.3.0 pkg/runtime/framework/plugins/jobset/builder.go)."""
    trainer: dict[str, Any] = {"numNodes": nodes, "numProcPerNode": procs_per_node}
    if image is not None:
        trainer["image"] = image
    if command is not None:
        trainer["command"] = list(command)
    trainer["args"] = list(args)
    if env:
        trainer["env"] = [{"name": k, "value": v} for k, v in env.items()]
    spec: dict[str, Any] = {
        "runtimeRef": {"name": runtime, "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"},
        "trainer": trainer,
        "suspend": suspend,
    }
    if workload != WORKLOAD_TRAIN:
        # Relabel the pods so the PodMonitor (training pods only) does not scrape them.
        spec["runtimePatches"] = [
            {
                "manager": PATCH_MANAGER,
                "trainingRuntimeSpec": {
                    "template": {
                        "spec": {
                            "replicatedJobs": [
                                {
                                    "name": NODE,
                                    "template": {
                                        "spec": {
                                            "template": {"metadata": {"labels": {WORKLOAD_LABEL: workload}}}
                                        }
                                    },
                                }
                            ]
                        }
                    }
                },
            }
        ]
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {**PART_OF, WORKLOAD_LABEL: workload, **(labels or {})},
        },
        "spec": spec,
    }


def run_overrides(*, data_source: str, checkpoint_uri: str, extra: Mapping[str, str]) -> list[str]:
    """``--set`` overrides of a run: where its data and checkpoints are, then the run's own."""
    return [f"data.source={data_source}", f"checkpoint.uri={checkpoint_uri}"] + [
        f"{k}={v}" for k, v in sorted(extra.items())
    ]


def bench_args(*, min_busbw_gbps: float, max_bytes: int) -> list[str]:
    """Arguments of ``trainer.tools.allreduce_bench`` in launch mode: it starts one rank per GPU on every
    node and exits with the ranks' code (2 below the threshold: the failure policy fails the job at once;
    torchrun would report any failure as 1, which counts and restarts)."""
    return [
        "--launch",
        "--nnodes=$(PET_NNODES)",
        "--nproc-per-node=$(PET_NPROC_PER_NODE)",
        "--rdzv-endpoint=$(PET_MASTER_ADDR):$(PET_MASTER_PORT)",
        f"--max-bytes={max_bytes}",
        f"--min-busbw={min_busbw_gbps}",
    ]


# The bandwidth check logs NCCL's choice of network and transport ("NET/OFI Selected provider is efa",
# "Using network Libfabric"): the first thing to read when the number is low.
BENCH_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}


def trainer_chart_values(system_pools: Sequence[str]) -> dict[str, Any]:
    """Values of the kubeflow-trainer chart (v2.3.0 values.yaml): CRDs as templates (upgraded with the
    release), the JobSet subchart (jobset v0.12.0 values.yaml: ``controller.affinity``), none of the
    chart's own runtimes (ours replaces them); both controllers on the system pools."""
    affinity = pool_affinity(system_pools)
    return {
        "crds": {"enabled": True},
        "manager": {"affinity": affinity},
        "jobset": {"install": True, "controller": {"affinity": affinity}},
        "runtimes": {"defaultEnabled": False},
    }
