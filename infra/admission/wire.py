"""Wiring of the admission policies: the stack's ECR namespace, account and region, the publisher's and
the trainer's service accounts, the teams' namespaces, from the config (``infra/admission/documents.py``
says what they enforce)."""

from __future__ import annotations

import pulumi

from infra.admission.component import AdmissionPolicies, AdmissionPoliciesArgs
from infra.admission.documents import AdmissionRules, admission_objects, eks_addon_registry
from infra.context import StackContext
from infra.core.teams import team_namespace
from infra.mirror.wire import cached_image, recorded_images


def admission_rules(ctx: StackContext) -> AdmissionRules:
    """What the stack's policies allow. An infer stack runs its images from the ECR replica in its own
    region, under the same repository namespace (ECR replication keeps names and digests)."""
    st = ctx.cfg.storage
    suffix = "amazonaws.com.cn" if ctx.account.partition == "aws-cn" else "amazonaws.com"
    return AdmissionRules(
        account_id=ctx.account.account_id,
        region=ctx.cfg.region,
        ecr_namespace=ctx.names.env_prefix,
        publisher_namespace=st.publisher.namespace,
        publisher_service_account=st.publisher.service_account,
        trainer_service_account=st.trainer.service_account,
        partition_dns_suffix=suffix,
        team_namespaces={team_namespace(t, c.namespace): t for t, c in ctx.cfg.teams.items()},
        # the charts' recorded images, and the EFA exporter's (monitoring.efa_exporter_image, by digest)
        system_images=(*recorded_images(ctx), cached_image(ctx, ctx.cfg.monitoring.efa_exporter_image)),
        eks_registry=eks_addon_registry(ctx.cfg.region, suffix),
    )


def wire_admission(
    ctx: StackContext, *, k8s_provider: pulumi.ProviderResource, k8s_depends_on: list[pulumi.Resource]
) -> AdmissionPolicies:
    """The policies and bindings, once the cluster answers (``k8s_depends_on``: the access gate)."""
    policies = AdmissionPolicies(
        "admission",
        AdmissionPoliciesArgs(objects=admission_objects(admission_rules(ctx))),
        opts=pulumi.ResourceOptions(provider=k8s_provider, depends_on=k8s_depends_on),
    )
    ctx.export("admissionPolicies", policies.policy_names)
    return policies
