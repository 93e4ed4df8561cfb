"""Resource options shared by the AWS components.

``fixed_name``: for every resource whose physical name we choose. Pulumi replaces a resource by creating
the new one first and deleting the old one afterwards; with a fixed name the create fails ("already
exists": EntityAlreadyExists, ResourceInUseException, InvalidPlacementGroup.Duplicate, ...) because the old
one still holds the name. ``delete_before_replace`` deletes first. A replacement is forced by changes such
as a node group's instance types, subnets, capacity type or AMI type, a placement group's strategy, a
cluster's role or secrets key, an ECR repository's encryption (the provider's ForceNew properties, see
terraform-provider-aws ForceNew schemas). Where the delete itself is refused (a protected prod
cluster, a non-empty bucket, a repository with images) the update stops before anything is lost.
https://www.pulumi.com/docs/iac/concepts/options/deletebeforereplace/
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_aws as aws


def fixed_name(opts: pulumi.ResourceOptions | None = None) -> pulumi.ResourceOptions:
    """``opts`` plus ``delete_before_replace=True`` (see the module docstring)."""
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(delete_before_replace=True))


def protected(opts: pulumi.ResourceOptions | None, protect: bool) -> pulumi.ResourceOptions:
    """``opts`` plus, when ``protect``, Pulumi's ``protect`` (the engine refuses to delete or replace the
    resource until ``pulumi state unprotect``) and ``retain_on_delete`` (even then, deleting it from the
    stack leaves the cloud resource in place). For what must survive a ``pulumi destroy``, a stack rename or
    a renamed resource: keys, data, images.
    https://www.pulumi.com/docs/iac/concepts/options/protect/
    https://www.pulumi.com/docs/iac/concepts/options/retainondelete/
    """
    if not protect:
        return opts or pulumi.ResourceOptions()
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(protect=True, retain_on_delete=True))


def dns_validation_field(
    certificate: aws.acm.Certificate, domain: str, field_name: str
) -> pulumi.Output[str]:
    """One field (``resource_record_name``, ``_type`` or ``_value``) of the DNS record ACM asks for to
    validate ``domain`` of ``certificate``.
    https://docs.aws.amazon.com/acm/latest/userguide/dns-validation.html"""

    def pick(options: Sequence[aws.acm.outputs.CertificateDomainValidationOption]) -> str:
        (match,) = [o for o in options if o.domain_name == domain]
        return getattr(match, field_name)

    return certificate.domain_validation_options.apply(pick)
