"""Wiring of the admission policies: the stack's ECR namespace, account and region, the publisher's and
the trainer's service accounts, the teams' namespaces, from the config (``infra/admission/documents.py``
says what they enforce)."""

from __future__ import annotations

import pulumi

from infra.admission.addons import AddonIdentity, service_account_user
from infra.admission.component import AdmissionPolicies, AdmissionPoliciesArgs
from infra.admission.documents import AdmissionRules, admission_objects, eks_addon_registry
from infra.context import StackContext
from infra.core.namespaces import PodSecurity, pss_labels
from infra.core.teams import team_namespace
from infra.mirror.wire import cached_image, recorded_images


def addon_identities(ctx: StackContext) -> list[AddonIdentity]:
    """The add-ons' service accounts the charts create under our release names and values, and where each
    may write the guarded kinds. Listed whether the stack installs the add-on or not (a username nobody
    holds matches nothing); tests/infra/admission/test_addons.py checks the names against each capability's.
    - kube-prometheus-stack 88.5.3: the operator's ``<fullname>-operator`` (fullnameOverride ``kps``,
      templates/_helpers.tpl), managing objects in the monitoring namespace only (infra/monitoring values).
    - cert-manager v1.21.1 (release ``cert-manager``: fullname ``cert-manager``, ``-cainjector``,
      ``-webhook``): the controller writes a Certificate's Secret where the Certificate is (the CA in
      cert-manager's namespace; with MinIO, its namespace and the trust Certificates of the trainer's and
      the inference server's namespaces, infra/pod_storage).
    - KEDA 2.20.2 (keda/values.yaml serviceAccount.*.name): keda-operator, keda-metrics-server, keda-webhook.
    - Karpenter (``karpenter`` in kube-system; it may delete pods anywhere, as it evicts them), the load
      balancer controller (its service account in
      kube-system), which also adds its finalizers to Services and Ingresses everywhere (eks-charts
      stable/aws-load-balancer-controller templates/rbac.yaml: patch/update, no create)."""
    cfg = ctx.cfg
    monitoring = cfg.cluster_services.monitoring_namespace
    certificates = {"cert-manager"}
    if cfg.storage.backend == "minio" and cfg.storage.minio is not None:
        certificates |= {
            cfg.storage.minio.namespace,
            cfg.storage.trainer.namespace,
            cfg.storage.inference.namespace,
        }
    keda = cfg.inference.keda.namespace if cfg.inference is not None else "keda"

    def sa(
        namespace: str,
        name: str,
        namespaces: set[str] | None = None,
        anywhere: tuple[str, ...] = (),
        deletes: tuple[str, ...] = (),
    ) -> AddonIdentity:
        return AddonIdentity(
            name=name,
            username=service_account_user(namespace, name),
            namespaces=sorted(namespaces or {namespace}),
            anywhere=anywhere,
            deletes=deletes,
        )

    return [
        sa(monitoring, "kps-operator"),
        sa("cert-manager", "cert-manager", certificates),
        sa("cert-manager", "cert-manager-cainjector"),
        sa("cert-manager", "cert-manager-webhook"),
        sa(keda, "keda-operator"),
        sa(keda, "keda-metrics-server"),
        sa(keda, "keda-webhook"),
        # karpenter-provider-aws v1.14.1 charts/karpenter/templates/clusterrole-core.yaml: pods delete
        sa("kube-system", "karpenter", deletes=("pods",)),
        sa("kube-system", "aws-load-balancer-controller", anywhere=("services", "ingresses")),
    ]


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
        addons=addon_identities(ctx),
    )


def kube_system_labels(ctx: StackContext) -> dict[str, str]:
    """kube-system's Pod Security labels: ``privileged`` enforced, the only level its pods pass (vpc-cni's
    aws-node and kube-proxy run on the host network with NET_ADMIN and a privileged init container, the
    EBS and FSx CSI node plugins privileged with host paths, the device plugins with host paths), so every
    such pod is warned about and audited at ``restricted``; what may run there is held by
    aiplat-kube-system-images and aiplat-addon-namespaces instead.
    https://kubernetes.io/docs/concepts/security/pod-security-admission/"""
    return pss_labels(PodSecurity.privileged, ctx.cfg.cluster.kubernetes_version)


def wire_admission(
    ctx: StackContext, *, k8s_provider: pulumi.ProviderResource, k8s_depends_on: list[pulumi.Resource]
) -> AdmissionPolicies:
    """The policies and bindings, once the cluster answers (``k8s_depends_on``: the access gate)."""
    policies = AdmissionPolicies(
        "admission",
        AdmissionPoliciesArgs(
            objects=admission_objects(admission_rules(ctx)),
            namespace_labels={"kube-system": kube_system_labels(ctx)},
        ),
        opts=pulumi.ResourceOptions(provider=k8s_provider, depends_on=k8s_depends_on),
    )
    ctx.export("admissionPolicies", policies.policy_names)
    return policies
