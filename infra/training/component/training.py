"""Training on the cluster: the Kubeflow Trainer v2 operator (KubeflowTrainer), our runtime
(TrainingRuntime) and the TrainJobs the stack declares (TrainJobs). The monitoring stack scrapes the
trainer's ports (its ``aiplat-trainer`` PodMonitor).

The documents come from ``infra/training/documents/runtime.py``; the Kubernetes provider comes in through
``opts.provider``. Upstream: Kubeflow Trainer's chart, pinned in config (never its templates or CRDs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from infra.cluster.component.namespaces import own_namespace
from infra.core.charts import ChartRef
from infra.resources.custom import custom_resource
from infra.resources.helm import chart_release
from infra.resources.options import child_options


def _child(parent: pulumi.Resource, opts: pulumi.ResourceOptions | None, **kw: Any) -> pulumi.ResourceOptions:
    """``child_options`` (children repeat the component's depends_on) plus other options."""
    base = child_options(parent, opts, depends_on=kw.pop("depends_on", ()))
    return pulumi.ResourceOptions.merge(base, pulumi.ResourceOptions(**kw))


@dataclass(frozen=True, kw_only=True)
class KubeflowTrainerArgs:
    """The chart (``oci://.../kubeflow-trainer`` and its version), its namespace and labels, its values."""

    chart: ChartRef
    namespace: str
    namespace_labels: Mapping[str, str]
    values: Mapping[str, Any]
    release_name: str = "kubeflow-trainer"


class KubeflowTrainer(pulumi.ComponentResource):
    """Kubeflow Trainer v2 (controller, webhooks, the three CRDs) with JobSet, from the pinned OCI chart.

    The Trainer CRDs are chart templates since v2.3.0 (upgraded with the release); JobSet's CRD sits in
    the subchart's ``crds/`` directory, which Helm installs once and never upgrades (docs/how-to/upgrade.md).
    """

    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: KubeflowTrainerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:training:KubeflowTrainer", name, None, opts)
        ns = own_namespace(
            f"{name}-namespace", name=args.namespace, labels=args.namespace_labels, opts=_child(self, opts)
        )
        # Atomic and awaited: the controller and its webhook are up before the runtime and TrainJobs,
        # which the webhook validates, are sent.
        self.release = chart_release(
            f"{name}-release",
            release_name=args.release_name,
            chart=args.chart,
            namespace=args.namespace,
            values=dict(args.values),
            opts=_child(self, opts, depends_on=[ns]),
        )
        self.register_outputs({"release": self.release.name})


@dataclass(frozen=True, kw_only=True)
class TrainingRuntimeArgs:
    """The ClusterTrainingRuntime document."""

    runtime: Mapping[str, Any]


class TrainingRuntime(pulumi.ComponentResource):
    """Our ``ClusterTrainingRuntime``."""

    runtime_name: str

    def __init__(self, name: str, args: TrainingRuntimeArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:training:TrainingRuntime", name, None, opts)
        self.runtime_name = str(args.runtime["metadata"]["name"])
        # The JobSet template's failurePolicy is immutable (CRD CEL 'self == oldSelf'): a change replaces
        # the runtime (the name is fixed, so delete first).
        self.runtime = custom_resource(
            f"{name}-runtime",
            args.runtime,
            _child(
                self,
                opts,
                replace_on_changes=["spec.template.spec.failurePolicy"],
                delete_before_replace=True,
            ),
        )
        self.register_outputs({"runtime_name": self.runtime_name})


@dataclass(frozen=True, kw_only=True)
class TrainJobsArgs:
    """TrainJob documents by a short key (the TrainJob's name)."""

    jobs: Mapping[str, Mapping[str, Any]]


class TrainJobs(pulumi.ComponentResource):
    """TrainJobs declared by the stack (runs and the bandwidth check).

    A TrainJob's runtimeRef and trainer section are immutable (CRD CEL), so any change to its spec
    replaces it: the running JobSet gets SIGTERM (the trainer checkpoints and exits 143) and the new one
    resumes from the newest checkpoint. Fixed names: the old one is deleted first.
    """

    def __init__(self, name: str, args: TrainJobsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:training:TrainJobs", name, None, opts)
        self.jobs = {
            key: custom_resource(
                f"{name}-{key}",
                doc,
                _child(
                    self,
                    opts,
                    replace_on_changes=["spec"],
                    delete_before_replace=True,
                    # `kubectl patch ... suspend=false` starts a declared job; a later `pulumi up` must not
                    # suspend it again.
                    ignore_changes=["spec.suspend"],
                ),
            )
            for key, doc in sorted(args.jobs.items())
        }
        self.register_outputs({"names": sorted(self.jobs)})
