"""BreakGlassGrants: the allows behind break-glass's exemptions in the guarded buckets' policies, as an
inline policy on the break-glass role (infra/keys declares the role; the buckets are declared here)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws


@dataclass(frozen=True, kw_only=True)
class BreakGlassGrantsArgs:
    """``role_name``: the break-glass role's name as an output of the role (the grant waits for it);
    ``policy``: the document (infra/storage/documents.py ``break_glass_storage_policy``) as JSON."""

    role_name: pulumi.Input[str]
    policy: pulumi.Input[str]


class BreakGlassGrants(pulumi.ComponentResource):
    """One inline policy on the break-glass role."""

    def __init__(self, name: str, args: BreakGlassGrantsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:storage:BreakGlassGrants", name, None, opts)
        self.policy = aws.iam.RolePolicy(
            f"{name}-policy",
            role=args.role_name,
            policy=args.policy,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({})
