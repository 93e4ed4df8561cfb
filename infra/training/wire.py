"""Wiring of the images and of training on the cluster (creates components only).

``wire_images`` (train stacks with ``images.builds``): ContainerImages into the Registry's repositories,
tagged by a hash of each build context. ``wire_training`` (stacks with a ``training`` section, once the
cluster exists): KubeflowTrainer, our TrainingRuntime, and the TrainJobs of the
declared runs and the bandwidth check. Stack outputs go to ``StackContext.exports``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from infra.context import StackContext
from infra.core import namespaces
from infra.core.trainer_settings import TrainerSettings
from infra.mirror.wire import cached_chart
from infra.storage.wire import StorageWiring
from infra.training.component.images import ContainerImages, ContainerImagesArgs, ImageBuildSpec
from infra.training.component.training import (
    KubeflowTrainer,
    KubeflowTrainerArgs,
    TrainingRuntime,
    TrainingRuntimeArgs,
    TrainJobs,
    TrainJobsArgs,
)
from infra.training.config import BANDWIDTH_CHECK_NAME
from infra.training.documents import runtime as t
from infra.training.documents import stack

# The namespace of the Trainer's controller runs only the controller and JobSet's, both of which the
# charts configure for the restricted profile (non-root, no capabilities, RuntimeDefault seccomp:
# kubeflow/trainer v2.3.0 and jobset v0.12.0 values.yaml).
PSS = namespaces.PodSecurity.restricted


def wire_images(
    ctx: StackContext, storage: StorageWiring, tags: Mapping[str, tuple[str, str]]
) -> ContainerImages | None:
    """Build (or take prebuilt) the images of ``images.builds``; exports ``images`` (repo -> by digest).

    ``tags``: repository -> (tag, platform) of each image to build, from a hash of its build context
    (``infra/io/build_context.py``, read by the program)."""
    cfg = ctx.cfg
    if not cfg.images.builds or storage.registry is None:
        return None
    builds: dict[str, ImageBuildSpec] = {}
    prebuilt: dict[str, str] = {}
    for repo, b in sorted(cfg.images.builds.items()):
        if b.prebuilt:
            prebuilt[repo] = b.prebuilt
            continue
        tag, platform = tags[repo]
        builds[repo] = ImageBuildSpec(
            repository_url=storage.registry.repository_urls[repo],
            tag=tag,
            # relative to the Pulumi project directory (the repository root), where `pulumi up` runs
            context=b.context,
            dockerfile=b.dockerfile,
            platform=platform,
            build_args=b.effective_build_args(),
            target=b.target,
        )
    images = ContainerImages(
        "images",
        ContainerImagesArgs(
            builds=builds,
            prebuilt=prebuilt,
            registry_id=ctx.account.account_id,
            build_on_preview=cfg.images.build_on_preview,
            # A push before ECR replication is configured never reaches the inference regions.
            # https://docs.aws.amazon.com/AmazonECR/latest/userguide/replication.html
            push_after=storage.registry.replication_ready,
        ),
        opts=pulumi.ResourceOptions(provider=ctx.provider, depends_on=[storage.registry]),
    )
    ctx.export("images", images.refs)
    return images


@dataclass
class TrainingWiring:
    operator: KubeflowTrainer
    runtime: TrainingRuntime
    jobs: TrainJobs | None


def wire_training(
    ctx: StackContext,
    images: ContainerImages | None,
    settings: Mapping[str, TrainerSettings],
    *,
    k8s_provider: pulumi.ProviderResource,
    system_pools: Sequence[str],
    k8s_depends_on: Sequence[pulumi.Resource] = (),
    price: Mapping[str, Any] | None = None,
) -> TrainingWiring | None:
    """Kubeflow Trainer, our runtime and the declared TrainJobs, on the cluster.

    ``k8s_depends_on``: what must exist first: the system pools and the cluster services (access gate,
    namespaces, the trainer's service account), never the GPU pools, whose capacity may be late.
    ``system_pools`` run the controllers. ``price``: the runtime pool's ``$AIPLAT_PRICE`` (run records' cost).
    """
    cfg = ctx.cfg
    training = cfg.training
    if training is None or images is None:
        return None
    pool = cfg.node_pools[training.runtime.pool]
    facts = ctx.facts.instances[pool.instance_type]
    k8s_opts = pulumi.ResourceOptions(provider=k8s_provider, depends_on=list(k8s_depends_on))
    op = training.operator
    operator = KubeflowTrainer(
        "kubeflow-trainer",
        KubeflowTrainerArgs(
            chart=cached_chart(ctx, op),
            namespace=op.namespace,
            namespace_labels=namespaces.pss_labels(PSS, cfg.cluster.kubernetes_version),
            values=t.trainer_chart_values(system_pools),
        ),
        opts=k8s_opts,
    )
    rt_settings = settings["runtime"]
    spec = stack.runtime_spec(cfg, facts, rt_settings, image="", price=price)
    runtime_doc = t.runtime_document(spec)
    image = images.refs[training.runtime.image]
    runtime_doc = _with_image(runtime_doc, image)
    runtime = TrainingRuntime(
        "training-runtime",
        TrainingRuntimeArgs(runtime=runtime_doc),
        opts=pulumi.ResourceOptions(provider=k8s_provider, depends_on=[*k8s_depends_on, operator]),
    )
    docs = {name: stack.run_trainjob(cfg, name, run, facts) for name, run in training.runs.items()}
    if training.bandwidth_check.enabled:
        docs[BANDWIDTH_CHECK_NAME], _basis = stack.bandwidth_trainjob(cfg, facts)
    jobs = (
        TrainJobs(
            "train-jobs",
            TrainJobsArgs(jobs=docs),
            opts=pulumi.ResourceOptions(provider=k8s_provider, depends_on=[*k8s_depends_on, runtime]),
        )
        if docs
        else None
    )
    ctx.export(
        "training",
        {
            "runtime": training.runtime.name,
            "namespace": cfg.storage.trainer.namespace,
            "trainJobs": sorted(docs),
            "image": image,
        },
    )
    return TrainingWiring(operator=operator, runtime=runtime, jobs=jobs)


def _with_image(doc: dict, image: pulumi.Output[str]) -> dict:
    """The runtime document with the trainer image (a digest known only once the image is built)."""
    pod = doc["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    # every container runs the trainer image: the node and the init container that builds the trust store
    for container in [*pod.get("initContainers", []), *pod["containers"]]:
        container["image"] = image
    # the run record holds the digest the runtime launched (t.IMAGE_DIGEST_ENV)
    for container in pod["containers"]:
        container["env"] = [
            {"name": t.IMAGE_DIGEST_ENV, "value": image.apply(t.image_digest)},
            *container["env"],
        ]
    return doc
