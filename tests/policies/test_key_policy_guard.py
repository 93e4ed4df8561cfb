"""kms-key-policy-change-guarded: in a protected stack only break-glass and the deployer change a key policy
(a compliant and a violating case each)."""

from __future__ import annotations

import json

from infra.core.naming import StackNames
from infra.keys.documents.kms_policy import KeyAccess, KeyPurpose, key_policy
from tests.policies.conftest import R

RULE = "kms-key-policy-change-guarded"
GLASS = StackNames("aiplat", "prod", "train", "us-east-1").role_name("break-glass")
PLATFORM = {"security": {"account": {"deployer_role": "aiplat-deploy"}}}


def _arn(name: str) -> str:
    return f"arn:aws:iam::123456789012:role/{name}"


def _key(deployer: str | None = "aiplat-deploy", protect: bool = True) -> R:
    """A key whose policy is the program's own document."""
    access = KeyAccess(
        partition="aws",
        account_id="123456789012",
        region="us-east-1",
        key_admin_role_arn=_arn("admin"),
        break_glass_role_arn=_arn(GLASS),
        deployer_role_arn=_arn(deployer) if deployer else None,
        protect=protect,
    )
    return R("aws:kms/key:Key", "data-key", {"policy": json.dumps(key_policy(KeyPurpose.data, access))})


def _edited(key: R, edit) -> R:
    doc = json.loads(key.inputs["policy"])
    doc["Statement"] = [edit(s) for s in doc["Statement"]]
    doc["Statement"] = [s for s in doc["Statement"] if s is not None]
    return R(key.type, key.name, {"policy": json.dumps(doc)})


def test_the_programs_key_policy_passes(check) -> None:
    check(RULE, [_key()], None, platform=PLATFORM)


def test_a_key_policy_without_the_deny_is_a_violation(check) -> None:
    key = _key(protect=False)  # the program's unprotected policy: no deny at all
    check(RULE, [key], "policy lets any principal with kms:PutKeyPolicy", platform=PLATFORM)
    # a dev stack is not judged
    check(RULE, [key], None, environment="dev", stack="dev-us-train", platform=PLATFORM)


def test_a_deny_that_exempts_another_principal_is_a_violation(check) -> None:
    key = _key(deployer="someone-else")
    check(RULE, [key], "policy lets ['someone-else'] change it besides break-glass", platform=PLATFORM)


def test_a_deny_narrowed_by_another_condition_does_not_count(check) -> None:
    def narrow(s: dict) -> dict:
        if s.get("Sid") == "OnlyBreakGlassAndDeployerChangePolicy":
            s["Condition"]["Bool"] = {"aws:MultiFactorAuthPresent": "false"}
        return s

    check(
        RULE, [_edited(_key(), narrow)], "policy lets any principal with kms:PutKeyPolicy", platform=PLATFORM
    )
