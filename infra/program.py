"""The Pulumi program: load the config, check it (rules), fetch AWS facts, check again, wire the components.

``__main__.py`` calls ``program()`` under ``pulumi up``; ``aiplat plan`` calls it under mocks with the stack
index of the folder it planned from. Nothing here runs at import time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

import pulumi
import pulumi_aws as aws

from infra.admission.wire import wire_admission
from infra.audit.wire import audit_alerts, wire_audit, wire_region_settings
from infra.cluster.wire import wire_cluster
from infra.context import StackContext
from infra.core.errors import ConfigErrors
from infra.core.project import CONFIG_NAMESPACE
from infra.core.stacks import StackIndex
from infra.cost.runs import pool_price
from infra.edge.wire import export_api_keys
from infra.fsx.wire import wire_fsx
from infra.inference.wire import inference_log_groups, lbc_web_acls, wire_inference
from infra.io.build_context import image_tags
from infra.io.inference import inference_api_keys
from infra.io.monitoring import load_monitoring_assets
from infra.io.policypack import stack_allowlists
from infra.io.prices import load_price_table
from infra.io.provider_facts import LIVE_SOURCE, account_facts, gather_facts
from infra.io.regions import known_regions
from infra.io.stackfiles import read_stack_index
from infra.io.trainer_configs import training_settings
from infra.keys.rules import account_findings
from infra.keys.wire import wire_keys
from infra.logs.wire import (
    container_log_groups,
    covered_namespaces,
    run_namespaces,
    wire_log_collector,
    wire_log_store,
)
from infra.mirror.wire import wire_image_cache
from infra.monitoring.wire import wire_monitoring
from infra.network.wire import wire_network
from infra.opencost.wire import DASHBOARD as COST_DASHBOARD
from infra.opencost.wire import wire_opencost
from infra.pod_storage.wire import wire_cluster_storage
from infra.queueing.wire import wire_queueing
from infra.rules import Finding, Level, Need, Phase, RuleContext, run_rules
from infra.schema.parse import parse_platform_config
from infra.schema.platform import PlatformConfig
from infra.services.wire import EndpointProbe, system_pools, wire_cluster_services, wire_workload_identities
from infra.stack.allowlists import PackAllowlists
from infra.storage.wire import wire_storage, wire_storage_source
from infra.training.wire import wire_images, wire_training

FindingSink = Callable[[Finding], None]


class ConfigRunError(ConfigErrors, pulumi.RunError):
    """ConfigErrors that ``pulumi up`` prints as plain lines (RunError), without a Python traceback."""


def read_config() -> PlatformConfig:
    raw = pulumi.Config(CONFIG_NAMESPACE).require_object("platform")
    try:
        return parse_platform_config(raw)
    except ConfigErrors as exc:
        raise ConfigRunError(exc.errors) from None


def _log_finding(finding: Finding) -> None:
    """Under ``pulumi up``: warnings and notes go to the engine's log, shown with the update."""
    (pulumi.log.warn if finding.level is Level.warning else pulumi.log.info)(finding.one_line())


def report(findings: Iterable[Finding], sink: FindingSink = _log_finding) -> None:
    """Hand warnings and notes to ``sink``; raise every error at once (nothing is declared after that)."""
    findings = list(findings)
    for f in findings:
        if f.level is not Level.error:
            sink(f)
    errors = [f.as_config_error() for f in findings if f.level is Level.error]
    if errors:
        raise ConfigRunError(errors)


def _default_probe() -> EndpointProbe | None:
    """Under ``pulumi up``: check that the Kubernetes API answers before applying Kubernetes objects.
    Under ``pulumi preview`` the cluster may not exist yet: no check."""
    if pulumi.runtime.is_dry_run():
        return None
    from infra.io.kube_access import probe_endpoint

    return probe_endpoint


_DEFAULT = object()


def program(
    *,
    stacks: StackIndex | None = None,
    on_finding: FindingSink = _log_finding,
    endpoint_probe: EndpointProbe | None | object = _DEFAULT,
    facts_source: str = LIVE_SOURCE,
    allowlists: PackAllowlists | None = None,
) -> None:
    """Declare one stack. ``stacks``: the project's stacks for the cross-stack rules (default: the stack
    files of the project's ``stackConfigDir``); ``on_finding`` receives the rules' warnings;
    ``endpoint_probe`` checks the Kubernetes API endpoint before any Kubernetes object (default: a TCP
    connection under ``pulumi up``, none under preview; the offline plan passes None); ``facts_source``
    names the data the provider's data sources answer from (the offline plan names its own), for the
    messages of refusals on AWS facts; ``allowlists``: what the policy pack will allow the stack (default:
    from its pack config file in the project's stacks folder)."""
    cfg = read_config()
    # The trainer config files the training section names, read with the trainer's own loader.
    trainer = training_settings(cfg)
    ctx = RuleContext(
        cfg,
        stack=pulumi.get_stack(),
        stacks=stacks or read_stack_index(),
        regions=known_regions(),
        trainer=trainer,
        allowlists=allowlists or stack_allowlists(pulumi.get_stack()),
    )
    report(run_rules(Phase.plan, ctx), on_finding)

    # One explicit provider per stack: region from the config, cost tags on every taggable resource.
    # Stack files disable the default providers so that nothing slips into another region.
    provider = aws.Provider(
        "aws", region=cfg.region, default_tags=aws.ProviderDefaultTagsArgs(tags=cfg.tags.as_dict())
    )
    facts = gather_facts(cfg, provider, source=facts_source)
    ctx = dataclasses.replace(ctx, facts=facts)
    report(run_rules(Phase.plan, ctx, requiring=Need.facts), on_finding)

    # The images' build-context tags; a missing Dockerfile or an unpinned base image is refused here, before
    # any resource.
    tags = {r: (t.tag, t.platform) for r, t in image_tags(cfg, facts.instances).items()}
    account = account_facts(provider)
    report(account_findings(cfg, account.account_id), on_finding)
    stack = StackContext(cfg=cfg, facts=facts, account=account, provider=provider)
    stack.export("region", cfg.region)
    stack.export("environment", cfg.environment.value)
    stack.export("role", cfg.role.value)
    # The namespaces whose container logs are kept (infra/logs); their groups are under the logs key.
    log_namespaces = covered_namespaces(stack)
    # ...and the web ACL's request logs (infra/inference).
    key_wiring = wire_keys(
        stack,
        log_groups=[*container_log_groups(stack, log_namespaces), *inference_log_groups(stack)],
        # the trail and bucket-policy alerts go to the key guard's topic
        alerts=audit_alerts(stack),
    )
    keys, guard = key_wiring.keys, key_wiring.guard
    # The replica via StackReference (infer), then the VPC (its S3 endpoint serves the stack's buckets by
    # name), then buckets, registry and cross-region replication (train stacks): the data buckets take
    # objects only through the VPC's S3 endpoint.
    storage = wire_storage_source(stack)
    network = wire_network(stack, keys, storage)
    storage = wire_storage(
        stack,
        data_key_arn=keys.data_key_arn,
        break_glass_role_name=guard.break_glass_role_name,
        s3_endpoint_id=network.s3_endpoint_id,
        source=storage,
    )
    # The trainer (and inference) images, built into the registry's repositories, by digest.
    images = wire_images(stack, storage, tags)
    wire_audit(stack, keys, storage)
    wire_region_settings(stack)
    cluster = wire_cluster(stack, keys, network, break_glass_role_arn=guard.break_glass_role_arn)
    # Namespaces, device plugins, storage classes, load balancers, metrics, certificates, Karpenter.
    probe = _default_probe() if endpoint_probe is _DEFAULT else endpoint_probe
    services = wire_cluster_services(
        stack,
        cluster,
        keys,
        network,
        endpoint_probe=probe,  # type: ignore[arg-type]
        # the web ACLs the stack's Ingress names: the only ones its load balancer controller may associate
        lbc_web_acls=lbc_web_acls(stack),
    )
    node_roles = [cluster.cluster.node_role_name]
    if services is not None and services.karpenter_node_role_name is not None:
        node_roles.append(services.karpenter_node_role_name)
    wire_image_cache(stack, data_key_arn=keys.data_key_arn, node_role_names=node_roles)
    # Kubernetes' own admission policies on the workload namespaces (images by digest, identities).
    if services is not None:
        wire_admission(stack, k8s_provider=cluster.cluster.k8s_provider, k8s_depends_on=[services.gate])
    # The optional FSx for Lustre file system, linked to the datasets bucket, and its claim for the trainer.
    fsx = wire_fsx(stack, cluster, keys, network, storage, services)
    # Container log groups (one per namespace collected) and the roles of the collector and of Grafana.
    logs = wire_log_store(stack, cluster, keys, services, namespaces=log_namespaces)
    # Prometheus, Alertmanager, Grafana, dcgm-exporter and the EFA exporter; aiplat's rules and dashboards.
    monitoring_assets = load_monitoring_assets(cfg)
    monitoring = wire_monitoring(
        stack,
        cluster,
        services,
        monitoring_assets,
        grafana_role_arn=logs.store.grafana_role_arn if logs else None,
    )
    # Train stacks: OpenCost reads Prometheus and prices each node from the price table; the cost dashboard.
    opencost = wire_opencost(
        stack,
        cluster,
        services,
        monitoring,
        prices=load_price_table(),
        dashboard=monitoring_assets.dashboards[COST_DASHBOARD],
    )
    if opencost is not None:
        report(opencost.findings, on_finding)
    # Fluent Bit on every node, scraped by Prometheus; Grafana's CloudWatch data source and run dashboard.
    wire_log_collector(stack, cluster, services, logs, monitoring, run_namespaces=run_namespaces(stack))
    # Pod roles (IRSA, S3 backend) or MinIO in the cluster (minio backend), once the cluster exists. MinIO
    # waits for the system pools and the services it uses (namespaces, default StorageClass, CA issuer).
    pod_access = wire_cluster_storage(
        stack,
        storage,
        oidc_provider_arn=cluster.cluster.oidc_provider_arn,
        oidc_issuer=cluster.cluster.oidc_issuer,
        k8s_provider=cluster.cluster.k8s_provider,
        data_key_arn=keys.data_key_arn,
        k8s_depends_on=[cluster.pools[p] for p in system_pools(stack)] + (services.ready if services else []),
    )
    # The workloads' service accounts, bound to the pod roles.
    identities = wire_workload_identities(stack, services, pod_access, cluster.cluster.k8s_provider)
    # Kubeflow Trainer, our ClusterTrainingRuntime and PodMonitor, the declared TrainJobs: after the system
    # pools and the cluster services (namespace, service account), never waiting for a GPU pool.
    # Kueue, the flavors of the GPU pools and the teams (namespace, IAM role, service account, queues):
    # before the TrainJobs, which are queued in a team's namespace.
    queueing = (
        wire_queueing(
            stack,
            cluster,
            storage,
            data_key_arn=keys.data_key_arn,
            k8s_depends_on=services.after_ready,
        )
        if services is not None
        else None
    )
    if trainer is not None and services is not None:
        system = system_pools(stack)
        runtime_pool = stack.cfg.training.runtime.pool if stack.cfg.training else None
        wire_training(
            stack,
            images,
            trainer,
            k8s_provider=cluster.cluster.k8s_provider,
            system_pools=system,
            k8s_depends_on=[
                *services.after_ready,
                *([identities] if identities is not None else []),
                *([fsx.volume] if fsx is not None and fsx.volume is not None else []),
                *(queueing.ready if queueing is not None else []),
            ],
            # what the runtime pool's nodes cost, from aiplat cost's table: the run records' cost
            price=pool_price(stack.cfg, load_price_table(), runtime_pool, stack.facts)
            if runtime_pool
            else None,
        )
    # Infer stacks: the model server (its pods run as the inference service account), KEDA, HTTPS; exports
    # inferenceUrl.
    wire_inference(
        stack,
        cluster,
        services,
        storage,
        # read only where the stack serves with its own keys (wire_inference decides)
        own_api_keys=inference_api_keys,
        k8s_depends_on=[identities] if identities else [],
        stack=pulumi.get_stack(),
        logs_key_arn=keys.logs_key_arn,
        # the router's PodMonitor needs the operator's CRDs (None: no monitoring, no PodMonitor)
        monitoring_crds=monitoring.stack.crds if monitoring else None,
    )
    # Train stacks: the inference API keys every infer stack of the environment reads (one source).
    export_api_keys(stack)
    for key, value in stack.exports.items():
        pulumi.export(key, value)
