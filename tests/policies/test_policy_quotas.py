"""policy-documents-within-quotas: the pack refuses what AWS would refuse for its size, from the numbers
the plan uses (infra/core/policy_quotas.py)."""

from __future__ import annotations

import json

from infra.core import policy_quotas as q
from infra.services.documents import lbc_iam
from tests.infra.core.test_policy_quotas import ACCOUNT, _lbc_single_document, _statements, _trust
from tests.policies.conftest import R

RULE = "policy-documents-within-quotas"


def test_the_pack_rule_refuses_the_same_documents(check) -> None:
    single = json.dumps(_lbc_single_document())
    check(RULE, [R(q.MANAGED_POLICY, "lbc-iam-policy", {"policy": single})], "AWS allows at most 6,144")
    check(RULE, [R(q.ROLE, "ops", {"assumeRolePolicy": json.dumps(_trust(60))})], "the trust policy")
    check(
        RULE, [R("aws:kms/key:Key", "kms-data", {"policy": json.dumps(_statements(120))})], "the key policy"
    )
    parts = lbc_iam.scoped_policies(cluster_name="c", region="us-east-1", account_id=ACCOUNT)
    check(RULE, [R(q.MANAGED_POLICY, f"lbc-{p}", {"policy": json.dumps(d)}) for p, d in parts.items()], None)
