"""Rules on who guards the stack's keys: a protected stack names the deployer role and the principals that
may assume the key administrator and break-glass roles (never the account root as a whole). Pure."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from infra.core.config import Environment
from infra.stack.registry import Finding, RuleContext, at, error, rule

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig

MFA_DOC = "https://docs.aws.amazon.com/IAM/latest/UserGuide/id_credentials_mfa_configure-api-require.html"
ACCOUNT_DOC = "https://docs.aws.amazon.com/accounts/latest/reference/manage-acct-identifiers.html"
LOCKOUT_DOC = (
    "https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html#prevent-unmanageable-key"
)


@rule("protected-keys-name-their-guards")
def protected_keys_name_their_guards(ctx: RuleContext) -> Iterator[Finding]:
    """A protected stack names its deployer role and who may assume key-admin and break-glass."""
    cfg = ctx.cfg
    if not cfg.protected:
        return
    sec = cfg.security
    if not sec.account.deployer_role:
        yield error(
            at("security", "account", "deployer_role"),
            "is not set, but the key policies of a protected stack let only break-glass and the deployer "
            "change them (kms:PutKeyPolicy), so pulumi up could not update its own keys",
            "name the IAM role of this account that runs pulumi up (e.g. aiplat-deploy)",
            LOCKOUT_DOC,
        )
    for field, role in (
        ("key_admin_principals", "key administrator"),
        ("break_glass_principals", "break-glass"),
    ):
        if not getattr(sec, field):
            yield error(
                at("security", field),
                f"is empty on a protected stack: the {role} role would trust the whole account root",
                "list the IAM role ARNs of the people who may assume it (they must use MFA)",
                MFA_DOC,
            )


@rule("prod-names-its-account")
def prod_names_its_account(ctx: RuleContext) -> Iterator[Finding]:
    """A prod stack names its AWS account, so pulumi up refuses credentials of any other account."""
    cfg = ctx.cfg
    if cfg.environment is Environment.prod and cfg.security.account.id is None:
        yield error(
            at("security", "account", "id"),
            "is not set on a prod stack: pulumi up would deploy into whatever account the credentials "
            "belong to (a dev credential included), and the plan could not refuse a prod and a dev stack in "
            "one account",
            'set it to the 12-digit ID of the prod account, quoted ("012345678901"); `aws sts '
            "get-caller-identity` with the deployer role prints it",
            ACCOUNT_DOC,
        )


def account_findings(cfg: PlatformConfig, caller_account: str) -> list[Finding]:
    """Under ``pulumi up`` (and the offline plan): the credentials belong to the configured account."""
    want = cfg.security.account.id
    if want is None or want == caller_account:
        return []
    return [
        error(
            at("security", "account", "id"),
            f"is {want} but the credentials are of account {caller_account}",
            f"deploy with credentials of account {want} (its deployer role), or correct the account id",
        )
    ]
