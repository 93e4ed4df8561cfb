"""Wiring of the global endpoint (infer stacks with ``inference.global_endpoint``): the certificate before
the Ingress (its ARN joins the listener's), the latency record after it (it aliases the ALB the Ingress
made), and the API keys' one source.

Stack outputs: ``globalEndpoint`` (name, set identifier, drain switch: what ``aiplat rollout`` drains);
train stacks with the secret config ``aiplat:inference-api-keys`` export it as the secret
``inferenceApiKeys``, which every infer stack of the environment reads through its StackReference.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws

from infra.context import StackContext
from infra.core.config import Role
from infra.core.project import CONFIG_NAMESPACE
from infra.edge import documents as edge
from infra.edge.component import GlobalCertificate, GlobalCertificateArgs, GlobalRecord, GlobalRecordArgs
from infra.edge.config import API_KEYS_CONFIG, GlobalEndpointConfig
from infra.storage.wire import StorageWiring

API_KEYS_OUTPUT = "inferenceApiKeys"


def wire_global_certificate(
    ctx: StackContext, ge: GlobalEndpointConfig, *, zone_id: str, stack: str
) -> GlobalCertificate:
    """The global name's certificate in this region; ``stack``: this stack's name (is it the owner of the
    validation record?)."""
    return GlobalCertificate(
        "global-certificate",
        GlobalCertificateArgs(
            name=ge.name, zone_id=zone_id, declare_validation_record=ge.validation_record_owner == stack
        ),
        opts=ctx.in_region,
    )


def wire_global_record(
    ctx: StackContext,
    ge: GlobalEndpointConfig,
    *,
    zone_id: str,
    load_balancer_hostname: pulumi.Input[str],
    certificate: GlobalCertificate,
) -> GlobalRecord:
    """This region's latency record of the global name, aliasing its ALB; exports ``globalEndpoint``."""
    region = ctx.cfg.region
    # The ALB's canonical hosted zone in this region (the provider's table of ELB service endpoints).
    lb_zone = aws.lb.get_hosted_zone_id_output(
        region=region,
        load_balancer_type="application",
        opts=pulumi.InvokeOutputOptions(provider=ctx.provider),
    ).id
    record = GlobalRecord(
        "global-record",
        GlobalRecordArgs(
            name=ge.name,
            zone_id=zone_id,
            region=region,
            load_balancer_hostname=load_balancer_hostname,
            load_balancer_zone_id=lb_zone,
            tags=ctx.cfg.tags.as_dict(),
        ),
        opts=ctx.in_region,
    )
    ctx.export(
        edge.OUTPUT,
        {
            "name": ge.name,
            "url": f"https://{ge.name}",
            "setIdentifier": edge.set_identifier(region),
            "drainSwitch": record.drain_switch_id,
            "certificateArn": certificate.certificate_arn,
            "validationRecordOwner": ge.validation_record_owner,
        },
    )
    return record


def api_keys_for(ctx: StackContext, storage: StorageWiring) -> pulumi.Output[Any] | None:
    """The inference API keys of an infer stack of a global endpoint (C2: what its inference Secret is made
    of): the environment's one key set, the train stack's ``inferenceApiKeys`` output read through the
    StackReference, so both regions of the name accept the same keys (rule global-endpoint-agreement holds
    their ``storage.source_stack`` equal). None without a global endpoint (the stack's own secret
    ``aiplat:inference-api-keys`` then) or without a source stack. Always a secret."""
    serving = ctx.cfg.inference
    if serving is None or serving.global_endpoint is None or storage.source is None:
        return None
    return pulumi.Output.secret(storage.source.require_output(API_KEYS_OUTPUT))


def export_api_keys(ctx: StackContext) -> None:
    """Train stacks: hand the secret ``aiplat:inference-api-keys`` (if set) to the infer stacks."""
    if ctx.cfg.role is not Role.train:
        return
    keys = pulumi.Config(CONFIG_NAMESPACE).get_secret_object(API_KEYS_CONFIG)
    if keys is not None:
        ctx.export(API_KEYS_OUTPUT, keys)
