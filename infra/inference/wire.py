"""Wiring of model serving (infer stacks with an ``inference`` section): config + facts + the training stack's
replica + the API keys -> the certificate, the optional web ACL, KEDA, the InferenceServer and the DNS name.

Where things come from:

- release (the fetch tool's ``--root``): ``s3://<replica bucket>``, ``artifactReplicas.<region>.bucket`` of
  ``storage.source_stack``; the versions: ``inference.models.<name>.release`` and its adapters' releases;
- images (vLLM: ``engine.image``, the fetch tool: ``image``):
  ``artifactReplicas.<region>.repositories.<repository>`` at the digest of the train stack's build of that
  repository (its ``images`` output) or at ``digest`` (ECR replication keeps digests), or ``ref``;
- API keys: the Pulumi secret ``aiplat:inference-api-keys`` (read by the program, infra/io/inference.py);
- dtype: each model's ``engine.dtype``, or from the GPUs its pools may launch (``engine_dtype``);
- service account: ``storage.inference`` (the cluster services bind it to the IRSA role reading the replica);
- certificate: ``https.certificate_arn``, or a DNS-validated ACM certificate in ``https.dns_zone_id``;
- ALB source addresses: the public (internet-facing) or private (internal) subnets of the VPC layout
  (``infra/network/documents/cidr.py``);
- autoscaling metric, per model: ``vllm:num_requests_running + vllm:num_requests_waiting`` of its served
  name (vLLM's ``model_name`` label) summed over the pods the ``aiplat-inference`` PodMonitor scrapes;
- the Ingress's backend: the model-name router (infra/inference/router), whose table is
  ``InferenceWiring.backends``: every served name (bases and adapters) and its base's Service;
- global name (``global_endpoint``): ``infra/edge`` adds its certificate to the listener and its host to
  the Ingress, then the region's latency record of the ALB (docs/inference/global-endpoint.md).

Stack outputs: ``inferenceUrl`` (``https://<domain>``: where ``aiplat rollout``'s health gate asks
``/v1/models``) and ``inference`` (each model's release, adapters, Service and autoscaling; images, load
balancer, certificate, TLS policy).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from infra.cluster.wire import ClusterWiring
from infra.context import StackContext
from infra.core import namespaces, naming
from infra.core.config import Role
from infra.edge import documents as edge_docs
from infra.edge.component import GlobalCertificate, GlobalRecord
from infra.edge.wire import api_keys_for, wire_global_certificate, wire_global_record
from infra.inference.component.keda import Keda, KedaArgs
from infra.inference.component.server import InferenceServer, InferenceServerArgs, ModelServerArgs
from infra.inference.component.serving import (
    InferenceWebAcl,
    InferenceWebAclArgs,
    ServingCertificate,
    ServingCertificateArgs,
    ServingDnsRecord,
    ServingDnsRecordArgs,
)
from infra.inference.config import (
    API_KEYS_SECRET,
    Exposure,
    ImageConfig,
    InferenceConfig,
    ServedModelConfig,
    WafMode,
)
from infra.inference.documents import alb, catalog, keda
from infra.inference.documents import inference as inf
from infra.inference.router import documents as rd
from infra.inference.router.component import InferenceRouter, InferenceRouterArgs
from infra.inference.rules import engine_dtype
from infra.mirror.wire import cached_chart
from infra.monitoring import documents as mon
from infra.network.documents import cidr
from infra.network.zones import vpc_zones
from infra.pools.documents import nodes
from infra.services.wire import ClusterServicesWiring, system_pools
from infra.storage.documents import ALB_LOG_PREFIX
from infra.storage.wire import StorageWiring


@dataclass
class InferenceWiring:
    """What the inference wiring created (tests and later wiring read it)."""

    server: InferenceServer
    router: InferenceRouter
    keda: Keda
    # every served name (bases and adapters) -> its base's Service: what a router in front needs
    backends: list[catalog.Backend]
    namespace: str
    certificate: ServingCertificate | None
    web_acl: InferenceWebAcl | None
    dns: ServingDnsRecord | None
    global_certificate: GlobalCertificate | None = None
    global_record: GlobalRecord | None = None


def load_balancer_cidrs(ctx: StackContext, exposure: Exposure) -> list[str]:
    """The subnets the controller puts the ALB in (found by their ``kubernetes.io/role/elb`` or
    ``internal-elb`` tag, infra/network/component.py): the addresses it sends to the pods from."""
    tier = cidr.Tier.public if exposure is Exposure.internet_facing else cidr.Tier.private
    layout = cidr.plan_subnets(ctx.cfg.network.vpc_cidr, vpc_zones(ctx.cfg, ctx.facts))
    return [s.cidr for s in layout if s.tier is tier]


def image_ref(image: ImageConfig, storage: StorageWiring, *, field: str) -> pulumi.Input[str]:
    """An image by digest: ``ref``; else ``repository``'s replica in this region at ``digest`` or at the
    digest of the image the train stack built (its ``images`` output). A train stack's prebuilt image from
    outside its own registry is not replicated: it is used as it is. ``field`` names the config in errors."""
    if image.ref is not None:
        return image.ref
    assert storage.replica is not None and storage.source is not None  # wire_inference checks
    repo = image.repository

    def replica_repository(r: dict[str, Any]) -> str:
        repos = r.get("repositories") or {}
        if repo not in repos:
            raise ValueError(
                f"{field}.repository {repo!r} is not replicated here by the train stack (it "
                f"replicates {sorted(repos)}); add it to registry.repositories of storage.source_stack"
            )
        return repos[repo]

    replica = storage.replica.apply(replica_repository)
    if image.digest is not None:
        return pulumi.Output.concat(replica, "@", image.digest)

    def from_build(v: list[Any]) -> str:
        local, built, home = v
        built_ref = (built or {}).get(repo)
        if not built_ref:
            raise ValueError(
                f"the train stack exports no {repo!r} image (images.builds.{repo}); set "
                f"{field}.digest or {field}.ref"
            )
        name, _, digest = str(built_ref).partition("@")
        # built into the train stack's own repository: replicated here with the same digest
        return f"{local}@{digest}" if name == (home or {}).get(repo) else str(built_ref)

    return pulumi.Output.all(
        replica, storage.source.get_output("images"), storage.source.get_output("repositories")
    ).apply(from_build)


def server_spec(ctx: StackContext, cfg: InferenceConfig, served: str) -> inf.ServerSpec:
    """The Deployment spec of model ``served`` (a key of ``inference.models``)."""
    model = cfg.models[served]
    st, res, srv, eng = ctx.cfg.storage, model.resources, cfg.server, model.engine
    lora = model.lora
    return inf.ServerSpec(
        model_name=model.release.name,
        model_version=model.release.version,
        served_model_name=served,
        region=ctx.cfg.region,
        service_account=st.inference.service_account,
        pool_label=nodes.POOL_LABEL,
        pools=list(model.node_pools),
        gpu_taint=(nodes.GPU_TAINT_KEY, nodes.GPU_TAINT_VALUE),
        cpu=res.cpu,
        cpu_limit=res.cpu_limit,
        memory=res.memory,
        model_volume_size=res.model_volume_size,
        tmp_size=res.tmp_size,
        shm_size=res.shm_size,
        dtype=engine_dtype(ctx.cfg, model).value,
        max_model_len=eng.max_model_len,
        gpu_memory_utilization=eng.gpu_memory_utilization,
        max_num_seqs=eng.max_num_seqs,
        gpus=eng.gpus_per_pod,
        api_key_slots=cfg.auth.api_key_slots,
        prestop_s=srv.prestop_s,
        shutdown_timeout_s=srv.shutdown_timeout_s,
        first_load_timeout_s=srv.first_load_timeout_s,
        api_paths=tuple(inf.api_paths(chat=eng.serve_chat)),
        lora=catalog.LoraSpec(
            max_loras=lora.max_loras, max_lora_rank=lora.max_lora_rank, max_cpu_loras=lora.max_cpu_loras
        )
        if lora is not None
        else None,
        adapters=tuple(
            catalog.AdapterSpec(served_name=n, release_name=a.release.name, release_version=a.release.version)
            for n, a in model.adapters.items()
        ),
    )


def server_specs(ctx: StackContext, cfg: InferenceConfig) -> list[inf.ServerSpec]:
    """Every model's Deployment spec, in config order."""
    return [server_spec(ctx, cfg, served) for served in cfg.models]


def serves_chat(cfg: InferenceConfig) -> bool:
    """Whether the Ingress routes chat completions: where any model has a chat template (``serve_chat``);
    the pods of a model without one refuse the path (their gate's paths are the model's own)."""
    return any(m.engine.serve_chat for m in cfg.models.values())


def _autoscaling(ctx: StackContext, model: ServedModelConfig, served: str) -> inf.Autoscaling:
    cfg = ctx.cfg
    return inf.Autoscaling(
        target=catalog.model_object_name(served),
        prometheus_url=f"http://{mon.PROMETHEUS_SERVICE}.{cfg.cluster_services.monitoring_namespace}"
        f".svc:{mon.PROMETHEUS_PORT}",
        query=inf.requests_query(cfg.storage.inference.namespace, mon.INFERENCE_JOB, served),
        target_per_replica=model.autoscaling.target_requests_per_replica,
        min_replicas=model.replicas.min,
        max_replicas=model.replicas.max,
        scale_down_stabilization_s=model.autoscaling.scale_down_stabilization_s,
    )


def inference_log_groups(ctx: StackContext) -> list[str]:
    """The log groups of the inference capability the logs key encrypts: the web ACL's request logs."""
    serving = ctx.cfg.inference
    if ctx.cfg.role is not Role.infer or serving is None or serving.https.waf is not WafMode.create:
        return []
    return [naming.waf_log_group(ctx.names.stack_prefix, "inference")]


def lbc_web_acls(ctx: StackContext) -> list[str]:
    """The WAFv2 web ACLs the stack's Ingress names, which the load balancer controller may put in front of
    its ALB (``wafv2:AssociateWebACL``): the one ``waf: create`` makes (its ARN by name: the id is AWS's),
    the one ``waf: arn`` names, none otherwise (``waf: off`` and train stacks associate no web ACL)."""
    serving = ctx.cfg.inference
    if ctx.cfg.role is not Role.infer or serving is None:
        return []
    https = serving.https
    if https.waf is WafMode.arn:
        assert https.waf_acl_arn is not None  # the config's validator
        return [https.waf_acl_arn]
    if https.waf is WafMode.create:
        name = naming.web_acl_name(ctx.names.stack_prefix, "inference")
        a = ctx.account
        return [f"arn:{a.partition}:wafv2:{ctx.cfg.region}:{a.account_id}:regional/webacl/{name}/*"]
    return []


def wire_keda(ctx: StackContext, cfg: InferenceConfig, opts: pulumi.ResourceOptions) -> Keda:
    """KEDA in its own restricted namespace, admitted to Prometheus."""
    chart = cfg.keda
    monitoring_ns = ctx.cfg.cluster_services.monitoring_namespace
    return Keda(
        "keda",
        KedaArgs(
            chart=cached_chart(ctx, chart),
            namespace=chart.namespace,
            namespace_labels=namespaces.pss_labels(
                namespaces.PodSecurity.restricted, ctx.cfg.cluster.kubernetes_version
            ),
            values=keda.keda_values(system_pools=system_pools(ctx)),
            network_policies=keda.namespace_policies(
                vpc_cidr=ctx.cfg.network.vpc_cidr,
                monitoring_namespace=monitoring_ns,
                prometheus_port=mon.PROMETHEUS_PORT,
            ),
            monitoring_namespace=monitoring_ns,
            monitoring_policy=keda.prometheus_from_keda_policy(
                keda_namespace=chart.namespace, prometheus_port=mon.PROMETHEUS_PORT
            ),
        ),
        opts=opts,
    )


def wire_inference(
    ctx: StackContext,
    cluster: ClusterWiring,
    services: ClusterServicesWiring | None,
    storage: StorageWiring,
    *,
    own_api_keys: Callable[[], pulumi.Input[Sequence[str]]],
    k8s_depends_on: Sequence[pulumi.Resource] = (),
    stack: str = "",
    logs_key_arn: pulumi.Input[str] | None = None,
    monitoring_crds: pulumi.Resource | None = None,
) -> InferenceWiring | None:
    """Serve the model (None on train stacks, without an ``inference`` section, or with the cluster
    services skipped). ``own_api_keys``: reads the stack's own secret list of API keys
    (``aiplat:inference-api-keys``), called only without a global endpoint's key set (infra/edge);
    ``k8s_depends_on``: what the pods need first (the inference service account); ``logs_key_arn``: the
    key of the web ACL's log group (``inference_log_groups``); ``monitoring_crds``: the monitoring stack's CRD
    release, which the router's PodMonitor waits for (None: no monitoring stack, no PodMonitor)."""
    cfg = ctx.cfg
    serving = cfg.inference
    if (
        cfg.role is not Role.infer
        or serving is None
        or services is None
        or storage.replica is None
        or storage.source is None
    ):
        return None
    https = serving.https
    eks = cluster.cluster
    after_services = services.after_ready

    certificate = None
    if https.certificate_arn is not None:
        certificate_arn: pulumi.Input[str] = https.certificate_arn
    else:
        assert https.dns_zone_id is not None  # rule inference-certificate
        certificate = ServingCertificate(
            "serving-certificate",
            ServingCertificateArgs(domain=https.domain, zone_id=https.dns_zone_id),
            opts=ctx.in_region,
        )
        certificate_arn = certificate.certificate_arn

    # the global name (infra/edge): its certificate joins the listener's, its host the Ingress rules
    ge = serving.global_endpoint
    global_certificate = None
    if ge is not None:
        assert https.dns_zone_id is not None  # rule global-endpoint-zone
        global_certificate = wire_global_certificate(ctx, ge, zone_id=https.dns_zone_id, stack=stack)
        certificate_arn = pulumi.Output.all(
            *edge_docs.certificate_arns(certificate_arn, global_certificate.certificate_arn)
        ).apply(",".join)

    web_acl = None
    waf_arn: pulumi.Input[str] | None = None
    if https.waf is WafMode.create:
        web_acl = InferenceWebAcl(
            "serving-waf",
            InferenceWebAclArgs(
                name=naming.web_acl_name(ctx.names.stack_prefix, "inference"),
                metric_prefix=f"{ctx.names.stack_prefix}-inference",
                rate_limit=https.waf_rate_limit,
                count_rules=list(https.waf_count_rules),
                log_group_name=naming.waf_log_group(ctx.names.stack_prefix, "inference"),
                log_retention_days=https.waf_log_retention_days,
                log_key_arn=logs_key_arn,
            ),
            opts=ctx.in_region,
        )
        waf_arn = web_acl.arn
    elif https.waf is WafMode.arn:
        waf_arn = https.waf_acl_arn

    keda_opts = pulumi.ResourceOptions(provider=eks.k8s_provider, depends_on=after_services)
    keda_release = wire_keda(ctx, serving, keda_opts)

    lbc = [services.load_balancer_controller] if services.load_balancer_controller else []
    specs = server_specs(ctx, serving)
    backends = catalog.backends(specs)
    namespace = cfg.storage.inference.namespace
    image = image_ref(serving.engine.image, storage, field="inference.engine.image")
    fetch_image = image_ref(serving.image, storage, field="inference.image")
    # a global endpoint's stacks serve with the train stack's one key set (infra/edge), others their own
    global_keys = api_keys_for(ctx, storage)
    if global_keys is not None:
        api_keys: pulumi.Input[Sequence[str]] = global_keys
        api_keys_source = f"{cfg.storage.source_stack}'s aiplat:{API_KEYS_SECRET}"
    else:
        api_keys, api_keys_source = own_api_keys(), f"aiplat:{API_KEYS_SECRET}"
    server = InferenceServer(
        "inference",
        InferenceServerArgs(
            namespace=namespace,
            models=[
                ModelServerArgs(server=spec, autoscaling=_autoscaling(ctx, serving.models[name], name))
                for name, spec in zip(serving.models, specs, strict=True)
            ],
            api_key_slots=serving.auth.api_key_slots,
            image=image,
            fetch_image=fetch_image,
            release_root=storage.replica.apply(lambda r: f"s3://{r['bucket']}"),
            release_public_key=storage.source.require_output("releaseSigningPublicKey"),
            api_keys=api_keys,
            api_keys_source=api_keys_source,
            host=https.domain,
            paths=inf.api_paths(chat=serves_chat(serving)),
            ingress=alb.IngressSpec(
                internet_facing=https.exposure is Exposure.internet_facing,
                tls_policy=https.tls_policy,
                health_path=inf.HEALTH_PATH,
                request_timeout_s=serving.server.request_timeout_s,
                deregistration_delay_s=serving.server.prestop_s + serving.server.shutdown_timeout_s,
                inbound_cidrs=list(https.inbound_cidrs),
                tags=cfg.tags.as_dict(),
            ),
            certificate_arn=certificate_arn,
            waf_acl_arn=waf_arn,
            ingress_service=rd.NAME,
            scaled_object_after=[keda_release.release],
            extra_hosts=[ge.name] if ge is not None else [],
            # the Region's access-log bucket (the train stack's replica set), one prefix per stack
            access_log_bucket=storage.replica.apply(lambda r: r["accessLogBucket"]),
            access_log_prefix=f"{ALB_LOG_PREFIX}/{ctx.names.stack_prefix}",
        ),
        opts=pulumi.ResourceOptions(
            provider=eks.k8s_provider, depends_on=[*after_services, *lbc, *k8s_depends_on]
        ),
    )

    # the model-name router between the ALB and the servers: every served name (bases and adapters), its
    # base's Service
    router_image = image_ref(serving.router.image, storage, field="inference.router.image")
    router = InferenceRouter(
        "inference-router",
        InferenceRouterArgs(
            namespace=namespace,
            spec=rd.router_spec(
                serving.router,
                backends=backends,
                request_timeout_s=serving.server.request_timeout_s,
                prestop_s=serving.server.prestop_s,
                pools=system_pools(ctx),
            ),
            image=router_image,
            backend_selector=inf.SELECTOR,
            backend_port=inf.PORT_NAME,
            load_balancer_cidrs=load_balancer_cidrs(ctx, https.exposure),
            monitoring_namespace=cfg.cluster_services.monitoring_namespace if monitoring_crds else None,
            deployment_after=[server.ingress],
            pod_monitor_after=[monitoring_crds] if monitoring_crds else [],
        ),
        opts=pulumi.ResourceOptions(
            provider=eks.k8s_provider, depends_on=[*after_services, *lbc, *k8s_depends_on]
        ),
    )

    dns = None
    if https.dns_zone_id is not None:
        dns = ServingDnsRecord(
            "serving-dns",
            ServingDnsRecordArgs(
                domain=https.domain, zone_id=https.dns_zone_id, target=server.load_balancer_hostname
            ),
            opts=ctx.in_region,
        )

    global_record = None
    if ge is not None and global_certificate is not None:
        assert https.dns_zone_id is not None
        global_record = wire_global_record(
            ctx,
            ge,
            zone_id=https.dns_zone_id,
            load_balancer_hostname=server.load_balancer_hostname,
            certificate=global_certificate,
        )

    ctx.export("inferenceUrl", f"https://{https.domain}")
    # The key aiplat rollout's health gate presents to /v1/models: the stack's own gate key, never a
    # client's, as a secret output.
    ctx.export("inferenceGateKey", server.gate_key)
    ctx.export(
        "inference",
        {
            "models": {
                name: {
                    "release": {"name": m.release.name, "version": m.release.version},
                    "adapters": {
                        a: {"name": ad.release.name, "version": ad.release.version}
                        for a, ad in m.adapters.items()
                    },
                    "service": catalog.model_object_name(name),
                    "autoscaling": {
                        "hpa": f"{namespace}/{catalog.model_object_name(name)}",
                        "targetPerReplica": m.autoscaling.target_requests_per_replica,
                        "min": m.replicas.min,
                        "max": m.replicas.max,
                    },
                }
                for name, m in serving.models.items()
            },
            "autoscalingMetric": f"{inf.RUNNING_METRIC} + {inf.WAITING_METRIC}",
            "vllmVersion": serving.engine.vllm_version,
            "image": image,
            "fetchImage": fetch_image,
            "router": {
                "image": router_image,
                "version": serving.router.version,
                "models": [b.served_name for b in backends],
            },
            "paths": inf.api_paths(chat=serves_chat(serving)),
            "loadBalancer": server.load_balancer_hostname,
            "exposure": https.exposure.value,
            "certificateArn": certificate_arn,
            "tlsPolicy": https.tls_policy,
            "webAcl": waf_arn,
        },
    )
    return InferenceWiring(
        server=server,
        router=router,
        keda=keda_release,
        backends=backends,
        namespace=namespace,
        certificate=certificate,
        web_acl=web_acl,
        dns=dns,
        global_certificate=global_certificate,
        global_record=global_record,
    )
