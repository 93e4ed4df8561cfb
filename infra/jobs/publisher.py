"""The release publisher's Job (``aiplat release publish``): a ``batch/v1`` Job that runs
``python -m trainer.release.publish`` on a team job's output. Pure: built from plain values, validated by
the caller against the Kubernetes schema.

It runs where the admission policies and IAM let only it run: the namespace and service account of
``storage.publisher`` (``release-publisher``/``publisher``: the one role that may write ``release/`` and
``kms:Sign``, infra/storage/config/storage.py), on the publisher's own nodes (``nodeSelector`` and
toleration: infra/admission/publisher_nodes.py refuses the pod without both), in the trainer image by
digest, as the restricted Pod Security Standard asks (non-root, no privilege escalation, every capability
dropped, RuntimeDefault seccomp:
https://kubernetes.io/docs/concepts/security/pod-security-standards/#restricted). ``/tmp`` is an
``emptyDir`` on the node's root volume: the publisher copies the folder there, hashes and checks it, and
uploads that copy (``node_pools.publisher.root_volume_gib`` bounds the model size).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from infra.core.labels import PUBLISHER_NODE_LABEL, PUBLISHER_TAINT

CONTAINER = "publish"
TEAM_LABEL, JOB_LABEL = "aiplat.io/team", "aiplat.io/source-job"
# the Job's pods carry it (batch/v1: set by the Job controller on every pod of the Job)
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
NON_ROOT_UID = 10001  # the trainer image's user (images/trainer/Dockerfile: USER 10001)


@dataclass(frozen=True, kw_only=True)
class PublishSpec:
    """What one publication needs: the folder, whose it is, the run record it came from, where it goes."""

    name: str  # the Job's name
    namespace: str  # storage.publisher.namespace (release-publisher)
    service_account: str  # storage.publisher.service_account: the one its IAM role trusts (IRSA)
    image: str  # the trainer image, <repository>@sha256:<digest>
    region: str
    team: str
    job: str
    from_uri: str  # s3://<checkpoints>/<team>/outputs/<job>/model/
    run_record: str  # s3://<checkpoints>/<team>/checkpoints/<job>/run-records/<attempt>.end.json
    release_root: str  # s3://<artifacts>
    model_name: str
    step: int
    signing_key: str  # the stack's releaseSigningKeyArn


def publish_args(spec: PublishSpec) -> list[str]:
    """The publisher's command line (trainer/release/publish.py)."""
    return [
        "python", "-m", "trainer.release.publish",
        "--from", spec.from_uri,
        "--team", spec.team,
        "--run-record", spec.run_record,
        "--step", str(spec.step),
        "--release-root", spec.release_root,
        "--model-name", spec.model_name,
        "--signing-key", spec.signing_key,
    ]  # fmt: skip


def publisher_job(spec: PublishSpec) -> dict[str, Any]:
    """The Job, as ``kubectl apply`` would take it."""
    label_key, label_value = PUBLISHER_NODE_LABEL
    key, value, effect = PUBLISHER_TAINT
    labels = {TEAM_LABEL: spec.team, JOB_LABEL: spec.job}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": spec.name, "namespace": spec.namespace, "labels": labels},
        "spec": {
            "backoffLimit": 0,  # a refusal is final; a second try would only refuse again
            "ttlSecondsAfterFinished": 7 * 24 * 3600,  # the log stays readable for a week
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": spec.service_account,
                    "restartPolicy": "Never",
                    "nodeSelector": {label_key: label_value},
                    "tolerations": [{"key": key, "operator": "Equal", "value": value, "effect": effect}],
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": NON_ROOT_UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [
                        {
                            "name": CONTAINER,
                            "image": spec.image,
                            "args": publish_args(spec),
                            "env": [{"name": "AWS_REGION", "value": spec.region}],
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                        }
                    ],
                    "volumes": [{"name": "tmp", "emptyDir": {}}],
                },
            },
        },
    }
