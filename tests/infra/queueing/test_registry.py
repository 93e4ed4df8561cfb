"""A team's container repositories on prod-us-train (``teams.research.registry``): immutable, scanned,
encrypted and expired like the platform's, covered by the registry's replication, pushed to only by the
team's CI role (never by its pods or anyone else), changed only by the deployer and break-glass, and their
replicas in the inference regions pushed to by nobody. The repository policies are evaluated on requests
(who, which action), not restated."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.plan.runner import Plan
from infra.queueing import documents as q
from infra.storage import documents as storage_documents

ACCOUNT = "123456789012"
REPO_TYPE = "aws:ecr/repository:Repository"
POLICY_TYPE = "aws:ecr/repositoryPolicy:RepositoryPolicy"
TEMPLATE_TYPE = "aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate"


@pytest.fixture(scope="module")
def prod(plan_stack) -> Plan:
    return plan_stack("prod-us-train")


def role(name: str) -> str:
    return f"arn:aws:iam::{ACCOUNT}:role/{name}"


def _listed(value: Any) -> list[str]:
    return value if isinstance(value, list) else [value]


def decide(policy: dict[str, Any], principal: str, action: str) -> str:
    """'deny', 'allow' or 'implicit' for ``principal`` (its aws:PrincipalArn) calling ``action`` on the
    repository, by the repository policy alone (IAM: an explicit Deny wins, then an Allow)."""
    effects = set()
    for st in policy["Statement"]:
        if action not in _listed(st["Action"]):
            continue
        who = st["Principal"]
        if who != "*" and principal not in _listed(who["AWS"]):
            continue
        ok = True
        for op, keys in st.get("Condition", {}).items():
            values = _listed(keys["aws:PrincipalArn"])
            if op == "ArnEquals":
                ok &= principal in values
            elif op == "ArnNotEquals":
                ok &= principal not in values
            else:
                raise AssertionError(f"condition {op} not modelled")
        if ok:
            effects.add(st["Effect"])
    return "deny" if "Deny" in effects else "allow" if "Allow" in effects else "implicit"


def test_the_teams_repositories_are_like_the_platforms(prod: Plan) -> None:
    repos = {r.inputs["name"]: r.inputs for r in prod.by_type(REPO_TYPE)}
    team = {n: i for n, i in repos.items() if n.startswith("aiplat-prod/teams/")}
    declared = prod.config["teams"]["research"]["registry"]["repositories"]
    assert sorted(team) == [f"aiplat-prod/teams/research/{r}" for r in declared]
    platform = repos["aiplat-prod/trainer"]
    for inputs in team.values():
        assert inputs["imageTagMutability"] == "IMMUTABLE"
        assert inputs["imageScanningConfiguration"] == {"scanOnPush": True}
        assert inputs["encryptionConfigurations"] == platform["encryptionConfigurations"]
    lifecycles = {
        r.inputs["repository"]: json.loads(r.inputs["policy"])
        for r in prod.by_type("aws:ecr/lifecyclePolicy:LifecyclePolicy")
    }
    reg = prod.config["registry"]
    expected = storage_documents.ecr_lifecycle_policy(
        untagged_days=reg["untagged_expire_days"], keep_tagged=reg["keep_images"]
    )
    assert all(lifecycles[name] == expected for name in team)
    # the registry's one replication rule covers them: its filter is the ECR namespace's prefix
    (rule,) = prod.one("aws:ecr/replicationConfiguration:ReplicationConfiguration").inputs[
        "replicationConfiguration"
    ]["rules"]
    (flt,) = rule["repositoryFilters"]
    assert flt["filterType"] == "PREFIX_MATCH" and all(n.startswith(flt["filter"]) for n in team)
    assert sorted(d["region"] for d in rule["destinations"]) == sorted(prod.config["storage"]["replicate_to"])
    # a team without a registry section has no repository
    assert not any(n.startswith("aiplat-prod/teams/production/") for n in repos)
    assert prod.outputs["queueing"]["teams"]["research"]["repositories"].keys() == set(declared)


def test_only_the_teams_ci_role_pushes(prod: Plan) -> None:
    # the team's repository (the platform's own repositories have a policy of their own, issue 33)
    [policy] = [
        json.loads(p.inputs["policy"]) for p in prod.by_type(POLICY_TYPE) if p.name.startswith("team-")
    ]
    ci = prod.one("aws:iam/role:Role", "team-research-registry-ci-role").inputs["name"]
    pod = prod.one("aws:iam/role:Role", "team-research-role").inputs["name"]
    other_pod = prod.one("aws:iam/role:Role", "team-production-role").inputs["name"]
    deployer = role(prod.config["security"]["account"]["deployer_role"])
    for action in q.ECR_PUSH_ACTIONS:
        assert decide(policy, role(ci), action) == "allow", action
        for who in (role(pod), role(other_pod), deployer, role("admin"), role("research-ci-runner")):
            assert decide(policy, who, action) == "deny", (who, action)
    # reading is not the policy's business (nodes pull through their role): nothing is denied there
    assert decide(policy, role(pod), "ecr:BatchGetImage") == "implicit"
    # only the deployer and break-glass change the repository: the CI role cannot lift its own limits
    glass = [
        r.inputs["name"]
        for r in prod.by_type("aws:iam/role:Role")
        if r.inputs.get("name", "").endswith("-break-glass")
    ]
    for action in q.ECR_ADMIN_ACTIONS:
        assert decide(policy, role(ci), action) == "deny"
        assert decide(policy, deployer, action) == "implicit"
        assert decide(policy, role(glass[0]), action) == "implicit"


def test_the_ci_role_is_assumed_by_the_teams_runners_and_reaches_only_its_repositories(prod: Plan) -> None:
    ci = prod.one("aws:iam/role:Role", "team-research-registry-ci-role").inputs
    trust = json.loads(ci["assumeRolePolicy"])
    [statement] = trust["Statement"]
    assert statement["Principal"]["AWS"] == prod.config["teams"]["research"]["registry"]["ci_assumed_by"]
    assert statement["Action"] == "sts:AssumeRole"
    grants = json.loads(
        prod.one("aws:iam/rolePolicy:RolePolicy", "team-research-registry-ci-role-policy").inputs["policy"]
    )
    resources = {r for st in grants["Statement"] for r in _listed(st["Resource"])}
    login = [st for st in grants["Statement"] if st["Resource"] == "*"]
    assert [st["Action"] for st in login] == [["ecr:GetAuthorizationToken"]]  # ECR takes no narrower resource
    assert resources - {"*"} == {
        f"arn:aws:ecr:us-east-1:{ACCOUNT}:repository/aiplat-prod/teams/research/byo-llama"
    }
    assert not any(a.startswith(("s3:", "kms:", "iam:")) for st in grants["Statement"] for a in st["Action"])


def test_replicas_get_the_teams_template_and_nobody_pushes_there(prod: Plan) -> None:
    templates = {
        t.inputs["region"]: t.inputs
        for t in prod.by_type(TEMPLATE_TYPE)
        if t.inputs["prefix"] == "aiplat-prod/teams/research"
    }
    assert sorted(templates) == sorted(prod.config["storage"]["replicate_to"])
    replica_keys = {r: v["keyArn"] for r, v in prod.outputs["artifactReplicas"].items()}
    ci = role(prod.one("aws:iam/role:Role", "team-research-registry-ci-role").inputs["name"])
    for region, t in templates.items():
        assert t["appliedFors"] == ["REPLICATION"] and t["imageTagMutability"] == "IMMUTABLE"
        assert t["encryptionConfigurations"] == [{"encryptionType": "KMS", "kmsKey": replica_keys[region]}]
        assert t["customRoleArn"] == role("registry-template-role")
        replica = json.loads(t["repositoryPolicy"])
        for action in q.ECR_PUSH_ACTIONS:
            assert decide(replica, ci, action) == "deny"
        # replication writes with ecr:ReplicateImage, which the replica policy leaves alone
        assert decide(replica, ci, "ecr:ReplicateImage") == "implicit"


def test_the_pod_role_cannot_be_a_pusher() -> None:
    with pytest.raises(ValueError, match="cannot be a pusher"):
        q.team_repository_policy(pushers=[role("team")], team_role_arn=role("team"))
    # without any pusher nobody pushes
    policy = q.team_repository_policy(pushers=[], team_role_arn=role("team"))
    assert decide(policy, role("anyone"), "ecr:PutImage") == "deny"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (
            lambda c: c["registry"]["repositories"].append("teams"),
            "aiplat:platform.registry.repositories: 'teams' is where the teams' repositories live",
        ),
        (
            lambda c: c["teams"]["research"]["registry"].update(pushers=["alice"]),
            "aiplat:platform.teams.research.registry.pushers: 'alice' is not an IAM role ARN; fix: use "
            "arn:aws:iam::<account id>:role/<name>",
        ),
        (
            lambda c: c["teams"]["research"]["registry"].update(repositories=["x", "x"]),
            "names a repository twice",
        ),
        (
            lambda c: c["teams"]["research"]["registry"].update(repositoris=["x"]),
            "aiplat:platform.teams.research.registry.repositoris: unknown key; fix: did you mean "
            "'repositories'?",
        ),
    ],
)
def test_a_bad_team_registry_is_refused_naming_the_field(change, says: str) -> None:
    from infra.core.errors import ConfigErrors
    from infra.io.stackfiles import load_stack_config
    from infra.schema.parse import parse_platform_config

    raw = load_stack_config("prod-us-train").model_dump(mode="json", exclude_none=True)
    change(raw)
    with pytest.raises(ConfigErrors) as exc:
        parse_platform_config(raw)
    assert says in str(exc.value)


def test_break_glass_administers_every_teams_repositories_through_one_name_prefix(prod: Plan) -> None:
    """The allow behind break-glass's exemption covers the team's repository and its replicas through the
    teams' name prefix, in the registry's one break-glass policy: none per team."""
    from fnmatch import fnmatchcase

    grants = [
        json.loads(p.inputs["policy"])
        for p in prod.by_type("aws:iam/rolePolicy:RolePolicy")
        if "break-glass" in p.name and "Repositories" in p.inputs["policy"]
    ]
    assert len(grants) == 1
    resources = [r for st in grants[0]["Statement"] for r in _listed(st["Resource"])]
    repo = prod.one(REPO_TYPE, "team-research-registry-byo-llama").inputs["name"]
    for region in ("us-east-1", *prod.config["storage"]["replicate_to"]):
        arn = f"arn:aws:ecr:{region}:{ACCOUNT}:repository/{repo}"
        assert any(fnmatchcase(arn, r) for r in resources), arn
    assert not any("research" in r for r in resources)
