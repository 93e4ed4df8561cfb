"""Small pure facts about TrainJobs shared by the rules and the document builders."""

from __future__ import annotations

import math

REPLICATED_JOB = "node"  # Trainer v2's trainer replicated job (pkg/constants/constants.go, v2.3.0)
# When `aiplat train submit` created the job (UTC, ISO 8601 with Z): on the TrainJob and its pods, whose
# run record reads it through the downward API.
SUBMITTED_AT_ANNOTATION = "aiplat.io/submitted-at"
# Who ran `aiplat train submit` (the STS caller ARN): on the TrainJob and its pods, whose run record reads it
# through the downward API.
SUBMITTED_BY_ANNOTATION = "aiplat.io/submitted-by"


def pod_name_length(trainjob: str, nodes: int) -> int:
    """Length of the longest pod name JobSet v0.12.0 generates for a TrainJob (its webhook refuses more
    than 63): ``<jobset>-<replicatedJob>-<jobIndex>-<podIndex>-<5 random>``
    (pkg/webhooks/jobset_webhook.go, pkg/util/placement GenPodName)."""
    return len(f"{trainjob}-{REPLICATED_JOB}-0-{nodes - 1}-abcde")


def grace_period_s(shutdown_window_s: float, margin_s: int) -> int:
    """Termination grace: the trainer's shutdown window (a checkpoint after SIGTERM) plus a margin."""
    return math.ceil(shutdown_window_s) + margin_s


def quantity_mib(q: str) -> int:
    """'5120Mi' -> 5120, '64Gi' -> 65536 (binary suffixes only, as the config allows)."""
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024, "Ti": 1024 * 1024}
    return int(int(q[:-2]) * units[q[-2:]])


def pod_name_prefix(trainjob: str, node_rank: int) -> str:
    """What the pod of node ``node_rank`` of a TrainJob is named before JobSet's random suffix (the pod
    index of the trainer's indexed Job is the node rank)."""
    return f"{trainjob}-{REPLICATED_JOB}-0-{node_rank}-"
