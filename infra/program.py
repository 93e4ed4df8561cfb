"""The Pulumi program: read the stack config, check it against AWS facts, wire the components.

``__main__.py`` calls ``program()`` under ``pulumi up``; ``aiplat plan`` calls it under mocks. Nothing here
runs at import time.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from infra.components.kms import KmsKeys, KmsKeysArgs
from infra.components.network import GpuVpc, GpuVpcArgs
from infra.config.loader import NAMESPACE, parse_platform_config
from infra.config.schema import PlatformConfig
from infra.errors import ConfigErrors
from infra.facts import account_facts, gather_facts
from infra.validation import check_against_facts


class ConfigRunError(ConfigErrors, pulumi.RunError):
    """ConfigErrors that ``pulumi up`` prints as plain lines (RunError), without a Python traceback."""


def read_config() -> PlatformConfig:
    raw = pulumi.Config(NAMESPACE).require_object("platform")
    try:
        return parse_platform_config(raw)
    except ConfigErrors as exc:
        raise ConfigRunError(exc.errors) from None


def program() -> None:
    cfg = read_config()
    # One explicit provider per stack: region from the config, cost tags on every taggable resource.
    # Stack files disable the default providers so that nothing slips into another region.
    provider = aws.Provider(
        "aws",
        region=cfg.region,
        default_tags=aws.ProviderDefaultTagsArgs(tags=cfg.tags.as_dict()),
    )
    facts = gather_facts(cfg, provider)
    errors = check_against_facts(cfg, facts)
    if errors:
        raise ConfigRunError(errors)

    account = account_facts(provider)
    name_prefix = f"{cfg.name_prefix}-{cfg.environment.value}-{cfg.role.value}"
    in_region = pulumi.ResourceOptions(provider=provider)

    keys = KmsKeys(
        "kms",
        KmsKeysArgs(
            name_prefix=name_prefix,
            partition=account.partition,
            account_id=account.account_id,
            region=cfg.region,
        ),
        opts=in_region,
    )

    azs = facts.zone_names[: cfg.network.az_count]
    network = GpuVpc(
        "network",
        GpuVpcArgs(
            name_prefix=name_prefix,
            cidr=cfg.network.vpc_cidr,
            availability_zones=azs,
        ),
        opts=in_region,
    )

    pulumi.export("region", cfg.region)
    pulumi.export("environment", cfg.environment.value)
    pulumi.export("role", cfg.role.value)
    pulumi.export("availabilityZones", list(azs))
    pulumi.export("vpcId", network.vpc_id)
    pulumi.export(
        "kmsKeyArns",
        {
            "data": keys.data_key_arn,
            "eks": keys.eks_key_arn,
            "ebs": keys.ebs_key_arn,
            "logs": keys.logs_key_arn,
        },
    )
