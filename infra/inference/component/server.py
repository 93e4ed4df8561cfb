"""InferenceServer: the models' vLLM Deployments behind one ALB Ingress, with the Secret of the API keys and
the release key's ConfigMap; per model (ModelServer, named after the served name) its Deployment, Service,
PodDisruptionBudget and the KEDA ScaledObject that owns its HorizontalPodAutoscaler. The Ingress sends to
``ingress_service`` (the model-name router, infra/inference/router, which also owns the NetworkPolicies
between the ALB, itself and the vLLM pods).

Order matters twice. The Ingress (and so the controller's TargetGroupBinding) exists before the pods, because
the load balancer controller adds its readiness gate only to pods created after that
(docs/deploy/pod_readiness_gate.md, v3.5.0: "create ingress or service before pod"). The ScaledObject comes
after the Deployment and KEDA's CRDs. pulumi does not wait for the Deployment's pods (``SKIP_AWAIT``): they
wait for a model release that may not exist yet; the rollout gate judges them. Documents from
``infra/inference/documents/inference.py`` and ``infra/inference/documents/alb.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from infra.edge.documents import with_hosts
from infra.inference.documents import alb, catalog
from infra.inference.documents import inference as inf
from infra.resources.options import child_options

KEDA_API = "keda.sh/v1alpha1"  # ScaledObject of KEDA 2.20 (keda/templates/crds/crd-scaledobjects.yaml)
# pulumi-kubernetes waits for a Deployment until its new ReplicaSet is available unless the object carries
# this annotation set to "true" (provider/pkg/metadata/overrides.go SkipAwaitLogic; added in
# https://github.com/pulumi/pulumi-kubernetes/pull/417): then the create/update is done once the API server
# accepted the object, and the resources that depend on it (the ScaledObject) go ahead. The pods are ready
# only once the release named in inference.models.<name>.release.version is in the region's replica bucket
# and verifies, which a new platform does not have before its first training run is published and
# replicated, so awaiting them would fail the first `pulumi up` of every infer stack with
# ProgressDeadlineExceeded. The rollout's health gate judges the Deployment instead (infra/ops/health.py),
# and tells "release not replicated yet" apart from a broken rollout.
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}


@dataclass(frozen=True, kw_only=True)
class ModelServerArgs:
    """One model: its Deployment's spec and its autoscaling."""

    server: inf.ServerSpec
    autoscaling: inf.Autoscaling


@dataclass(frozen=True, kw_only=True)
class InferenceServerArgs:
    """The models (``models``, in config order; the vLLM ``image``, the fetch tool's ``fetch_image`` and
    ``release_root`` shared), the API keys (``api_keys``: a secret list, ``api_key_slots`` long, named
    ``api_keys_source`` in errors), the HTTPS entry (``ingress`` for ``host`` and ``paths`` with
    ``certificate_arn`` and ``waf_acl_arn``; None detaches any web ACL) and the Service it sends to
    (``ingress_service``, the router's), and what the ScaledObjects wait for (KEDA's
    release: its CRD)."""

    namespace: str
    models: Sequence[ModelServerArgs]
    api_key_slots: int
    image: pulumi.Input[str]
    fetch_image: pulumi.Input[str]
    release_root: pulumi.Input[str]
    api_keys: pulumi.Input[Sequence[str]]
    api_keys_source: str
    # PEM of the key release manifests are signed with (the train stack's releaseSigningPublicKey)
    release_public_key: pulumi.Input[str]
    host: str
    paths: Sequence[str]
    ingress: alb.IngressSpec
    ingress_service: str
    certificate_arn: pulumi.Input[str]
    waf_acl_arn: pulumi.Input[str] | None
    scaled_object_after: Sequence[pulumi.Resource] = field(default_factory=tuple)
    # more names the Ingress answers with the same paths (the global endpoint, infra/edge)
    extra_hosts: Sequence[str] = field(default_factory=tuple)
    # where the ALB writes its access logs: the Region's access-log bucket and the prefix in it (None: off)
    access_log_bucket: pulumi.Input[str] | None = None
    access_log_prefix: str = ""


class ModelServer(pulumi.ComponentResource):
    """One model's vLLM Deployment, Service, PodDisruptionBudget and KEDA ScaledObject (objects named
    ``catalog.model_object_name``)."""

    def __init__(
        self,
        name: str,
        args: ModelServerArgs,
        shared: InferenceServerArgs,
        *,
        deployment_after: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("aiplat:inference:ModelServer", name, None, opts)
        s = args.server

        def meta(annotations: dict[str, str] | None = None) -> k8s.meta.v1.ObjectMetaArgs:
            return k8s.meta.v1.ObjectMetaArgs(
                name=catalog.model_object_name(s.served_model_name),
                namespace=shared.namespace,
                labels=inf.labels(inf.selector(s)),
                annotations=annotations,
            )

        self.service = k8s.core.v1.Service(
            f"{name}-service", metadata=meta(), spec=inf.service_spec(s), opts=child_options(self, opts)
        )
        # Deploy-time values as leaves, so the rest of the spec (args, probes, security) stays known to the
        # policy pack at preview.
        spec = inf.deployment_spec(
            s, image=shared.image, fetch_image=shared.fetch_image, release_root=shared.release_root
        )
        self.deployment = k8s.apps.v1.Deployment(
            f"{name}-deployment",
            metadata=meta(dict(SKIP_AWAIT)),
            spec=spec,
            opts=child_options(self, opts, depends_on=[*deployment_after, self.service]),
        )
        self.pdb = k8s.policy.v1.PodDisruptionBudget(
            f"{name}-pdb", metadata=meta(), spec=inf.pdb_spec(s), opts=child_options(self, opts)
        )
        self.scaled_object = k8s.apiextensions.CustomResource(
            f"{name}-scaledobject",
            api_version=KEDA_API,
            kind="ScaledObject",
            metadata=meta(),
            spec=inf.scaled_object_spec(args.autoscaling),
            opts=child_options(self, opts, depends_on=[self.deployment, *shared.scaled_object_after]),
        )
        self.register_outputs({})


class InferenceServer(pulumi.ComponentResource):
    """The model servers of one region; ``load_balancer_hostname`` is the ALB's DNS name, ``models`` each
    served model's ModelServer by served name."""

    load_balancer_hostname: pulumi.Output[str]
    # the rollout tooling's own API key (stack output inferenceGateKey), valid beside the clients' keys
    gate_key: pulumi.Output[str]

    def __init__(self, name: str, args: InferenceServerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:inference:InferenceServer", name, None, opts)
        ns = args.namespace

        def meta(annotations: pulumi.Input[dict[str, str]] | None = None) -> k8s.meta.v1.ObjectMetaArgs:
            return k8s.meta.v1.ObjectMetaArgs(
                name=inf.NAME, namespace=ns, labels=inf.labels(), annotations=annotations
            )

        slots = args.api_key_slots
        source = args.api_keys_source
        # A key of the stack's own for the rollout's health gate: no client key leaves for the tooling, and
        # it is revoked by replacing this resource (`pulumi up --replace`), not by rotating the clients'.
        gate = random.RandomPassword(
            f"{name}-gate-key", length=48, special=False, opts=pulumi.ResourceOptions(parent=self)
        )
        self.gate_key = pulumi.Output.secret(gate.result)
        self.api_keys = k8s.core.v1.Secret(
            f"{name}-api-keys",
            metadata=meta(),
            type="Opaque",
            # the provider marks a Secret's data secret in the state and the plan
            string_data=pulumi.Output.all(args.api_keys, gate.result).apply(
                lambda v: inf.api_keys_secret_data(v[0], slots=slots, source=source, gate_key=v[1])
            ),
            opts=child_options(self, opts),
        )
        self.release_key = k8s.core.v1.ConfigMap(
            f"{name}-release-key",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=inf.RELEASE_KEY_CONFIG_MAP, namespace=ns, labels=inf.labels()
            ),
            data=pulumi.Output.from_input(args.release_public_key).apply(inf.release_key_data),
            opts=child_options(self, opts),
        )
        # ARNs as leaves, not through an apply: at a first preview the certificate's ARN is unknown, and an
        # apply would hide every annotation (TLS policy, listeners) from the policy pack.
        annotations = alb.ingress_annotations(
            args.ingress, certificate_arn=args.certificate_arn, waf_acl_arn=args.waf_acl_arn
        )
        if args.access_log_bucket is not None:
            log_prefix, ingress = args.access_log_prefix, args.ingress
            annotations[alb.PREFIX + "load-balancer-attributes"] = pulumi.Output.from_input(
                args.access_log_bucket
            ).apply(lambda bucket: alb.load_balancer_attributes(ingress, access_logs=(bucket, log_prefix)))
        self.ingress = k8s.networking.v1.Ingress(
            f"{name}-ingress",
            metadata=meta(annotations),
            spec=with_hosts(
                alb.ingress_spec(
                    host=args.host,
                    service=args.ingress_service,
                    service_port=inf.SERVICE_PORT_NAME,
                    paths=args.paths,
                ),
                args.extra_hosts,
            ),
            opts=child_options(self, opts),
        )
        # keyed by served name: adding a model never renames another's objects
        after = [self.ingress, self.api_keys, self.release_key]
        self.models = {
            m.server.served_model_name: ModelServer(
                f"{name}-{m.server.served_model_name}",
                m,
                args,
                deployment_after=after,
                opts=child_options(self, opts),
            )
            for m in args.models
        }
        self.load_balancer_hostname = self.ingress.status.apply(_hostname)
        self.register_outputs(
            {"load_balancer_hostname": self.load_balancer_hostname, "gate_key": self.gate_key}
        )


def _hostname(status: k8s.networking.v1.outputs.IngressStatus | None) -> str:
    """The ALB's DNS name from the Ingress status the controller writes."""
    ingress = status.load_balancer.ingress if status and status.load_balancer else None
    if not ingress or not ingress[0].hostname:
        raise ValueError(
            "the Ingress has no load balancer hostname; is the load balancer controller running?"
        )
    return ingress[0].hostname
