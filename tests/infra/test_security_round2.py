"""Issue 33 (security, round two) on the plans: every finding of the review has a test here that fails on
the code before the fix, asserted on what the real program registered (or on the pure builders the
program uses, where the plan cannot show it).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.inference.documents import inference as inf
from infra.inference.router import documents as rd
from infra.plan.mocks import ACCOUNT_ID
from infra.plan.runner import Plan, RecordedResource
from tests.conftest import EXAMPLES, STACKS

ALL = [f"stacks/{s}" for s in STACKS] + [f"examples/{s}" for s in EXAMPLES]
INFER = ["prod-hk-infer", "prod-sg-infer"]
RELEASE = "kubernetes:helm.sh/v3:Release"


@pytest.fixture(scope="module")
def plans(plan_stack, plan_example) -> dict[str, Plan]:
    out = {f"stacks/{s}": plan_stack(s) for s in STACKS}
    out.update({f"examples/{s}": plan_example(s) for s in EXAMPLES})
    return out


def _release(plan: Plan, name: str) -> RecordedResource:
    (r,) = [r for r in plan.by_type(RELEASE) if r.inputs["name"] == name]
    return r


def _statements(r: RecordedResource, key: str = "policy") -> list[dict[str, Any]]:
    return json.loads(r.inputs[key])["Statement"]


def _list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, list) else [v]


# -- KEDA reads no Secret outside its namespace -----------------------------------------------------------


@pytest.mark.parametrize("stack", INFER)
def test_keda_operator_and_metrics_server_read_no_secret_outside_their_namespace(plan_stack, stack) -> None:
    # keda/values.yaml v2.20.2: with restrict.secret false the operator's ClusterRole lists and watches
    # every Secret of the cluster (templates/manager/clusterrole.yaml)
    values = _release(plan_stack(stack), "keda").inputs["values"]
    assert values["permissions"]["operator"]["restrict"]["secret"] is True
    assert values["permissions"]["metricServer"]["restrict"]["secret"] is True


# -- the platform trainer reads its own dataset prefix only ----------------------------------------------


def _trainer_policy(plan: Plan) -> list[dict[str, Any]]:
    return _statements(plan.one("aws:iam/rolePolicy:RolePolicy", "pod-roles-trainer-policy"))


@pytest.mark.parametrize("stack", ["stacks/prod-us-train", "stacks/dev-us-train", "examples/fsx"])
def test_platform_trainer_reads_only_its_own_dataset_prefix(plans, stack: str) -> None:
    plan = plans[stack]
    datasets = f"arn:aws:s3:::{plan.one('aws:s3/bucket:Bucket', 'storage-datasets').inputs['bucket']}"
    prefix = plan.config["storage"]["trainer"]["prefix"]
    reaching = [
        st
        for st in _trainer_policy(plan)
        if st["Effect"] == "Allow" and any(r.startswith(datasets) for r in _list(st["Resource"]))
    ]
    assert reaching
    for st in reaching:
        objects = [r for r in _list(st["Resource"]) if r.startswith(datasets + "/")]
        assert objects == [] or objects == [f"{datasets}/{prefix}/*"], st
        if "s3:ListBucket" in _list(st["Action"]):
            assert st["Condition"]["StringLike"]["s3:prefix"] == [f"{prefix}/*", prefix], st


@pytest.mark.parametrize("stack", ["dev-us-train", "fsx"])
def test_platform_runs_read_their_dataset_under_the_trainer_prefix(stack_config, stack: str) -> None:
    from infra.schema.parse import parse_platform_config
    from infra.storage.config.storage import BucketPurpose
    from infra.training.documents.stack import data_uri
    from tests.conftest import EXAMPLES_DIR
    from tests.support.config_cases import without_teams

    raw = stack_config(stack) if stack in STACKS else _example(EXAMPLES_DIR, stack)
    without_teams(raw)
    cfg = parse_platform_config(raw)
    assert cfg.training is not None
    for run in cfg.training.runs.values():
        uri = data_uri(cfg, run.dataset)
        if cfg.cluster_services.fsx.enabled:  # the FSx example links the trainer's prefix
            assert uri.startswith(cfg.cluster_services.fsx.mount_path), uri
        else:
            bucket = cfg.bucket_name(BucketPurpose.datasets)
            assert uri == f"s3://{bucket}/{cfg.storage.trainer.prefix}/{run.dataset}"


def _example(folder, name: str) -> dict:
    import yaml

    from infra.core.project import CONFIG_KEY

    return yaml.safe_load((folder / f"Pulumi.{name}.yaml").read_text())["config"][CONFIG_KEY]


# -- reserved team names ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["trainer", "release"])
def test_a_team_may_not_take_a_platform_prefix(stack_config, name: str) -> None:
    from tests.conftest import assert_rejected

    raw = stack_config("prod-us-train")
    team = next(iter(raw["teams"].values()))
    assert_rejected(raw, f"teams.{name}", team, [f"teams.{name}: {name!r} is reserved", "rename the team"])


def test_a_team_may_not_take_the_first_segment_of_a_configured_prefix(stack_config) -> None:
    from tests.conftest import assert_rejected, with_value

    trainer = {"namespace": "training", "service_account": "trainer", "prefix": "platform/trainer"}
    raw = with_value(stack_config("prod-us-train"), "storage.trainer", trainer)
    team = next(iter(raw["teams"].values()))
    assert_rejected(raw, "teams.platform", team, ["teams.platform: 'platform' is reserved"])


# -- Karpenter's interruption queue takes only our rules' events -------------------------------------------


@pytest.mark.parametrize("stack", ALL)
def test_interruption_queue_accepts_only_our_rules(plans, stack: str) -> None:
    plan = plans[stack]
    queues = plan.by_type("aws:sqs/queuePolicy:QueuePolicy")
    if not queues:
        pytest.skip("no Karpenter here")
    (policy,) = queues
    senders = [st for st in _statements(policy) if st["Effect"] == "Allow"]
    assert senders
    (queue,) = plan.by_type("aws:sqs/queue:Queue")
    feeding = [r for r in plan.by_type("aws:cloudwatch/eventRule:EventRule") if r.parent == queue.parent]
    for st in senders:
        assert st["Principal"] == {"Service": "events.amazonaws.com"}, st
        assert st["Condition"]["StringEquals"]["aws:SourceAccount"] == "123456789012"
        sources = st["Condition"]["ArnEquals"]["aws:SourceArn"]
        assert len(sources) == len(feeding) >= 4
        assert policy.urn and set(r.urn for r in feeding) <= set(policy.dependencies)
        assert all(":events:" in a and ":rule/" in a for a in sources)


# -- no bypass of the queue; priorities per team ------------------------------------------------------------

TRAIN_TEAMS = ["prod-us-train", "dev-us-train"]


@pytest.mark.parametrize("stack", TRAIN_TEAMS)
def test_kueue_queues_bare_jobs_and_pods_of_team_namespaces(plan_stack, stack: str) -> None:
    import yaml

    plan = plan_stack(stack)
    config = yaml.safe_load(
        _release(plan, "kueue").inputs["values"]["managerConfig"]["controllerManagerConfigYaml"]
    )
    frameworks = config["integrations"]["frameworks"]
    assert {"batch/job", "pod", "trainer.kubeflow.org/trainjob", "jobset.x-k8s.io/jobset"} <= set(frameworks)
    assert config["manageJobsWithoutQueueName"] is True
    # only the team namespaces: the selector is the one label every team namespace, and only those, carry
    (expr,) = config["managedJobsNamespaceSelector"]["matchExpressions"]
    labelled = {
        n.inputs["metadata"]["name"]
        for n in plan.by_type("kubernetes:core/v1:Namespace")
        if expr["key"] in (n.inputs["metadata"].get("labels") or {})
    }
    assert expr["operator"] == "Exists"
    team_ns = {f"team-{t}" for t in plan.config["teams"]}
    assert labelled == team_ns


def _priority_refusals(plan: Plan, namespace: str, priority: str, kind: str = "TrainJob") -> list[str]:
    import celpy

    (vap,) = [
        r
        for r in plan.by_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy")
        if r.inputs["metadata"]["name"] == "aiplat-team-priorities"
    ]
    (ns,) = [
        n for n in plan.by_type("kubernetes:core/v1:Namespace") if n.inputs["metadata"]["name"] == namespace
    ]
    kinds = {tuple(r["resources"]) for r in vap.inputs["spec"]["matchConstraints"]["resourceRules"]}
    assert {("pods",), ("jobs",), ("jobsets",), ("trainjobs",)} <= kinds
    env = celpy.Environment()
    obj = {"kind": kind, "metadata": {"name": "x", "labels": {"kueue.x-k8s.io/priority-class": priority}}}
    activation = {
        "object": celpy.json_to_cel(obj),
        "namespaceObject": celpy.json_to_cel({"metadata": ns.inputs["metadata"]}),
    }
    out = []
    for v in vap.inputs["spec"]["validations"]:
        if not env.program(env.compile(v["expression"])).evaluate(activation):
            out.append(v["message"])
    return out


def test_a_team_may_use_only_its_own_priority_classes(plan_stack) -> None:
    plan = plan_stack("prod-us-train")
    # research may not preempt with production; the production team may
    assert _priority_refusals(plan, "team-research", "production")
    assert _priority_refusals(plan, "team-research", "production", kind="Pod")
    assert _priority_refusals(plan, "team-research", "research") == []
    assert _priority_refusals(plan, "team-production", "production") == []
    # the binding holds in team namespaces only
    (binding,) = [
        r
        for r in plan.by_type("kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding")
        if r.inputs["spec"]["policyName"] == "aiplat-team-priorities"
    ]
    exprs = binding.inputs["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert exprs == [{"key": "aiplat.io/team", "operator": "Exists"}]
    assert binding.inputs["spec"]["validationActions"] == ["Deny"]


def test_a_team_without_priority_classes_gets_only_its_default(plan_stack) -> None:
    plan = plan_stack("dev-us-train")
    assert _priority_refusals(plan, "team-ml", "dev") == []
    assert _priority_refusals(plan, "team-ml", "production")


def test_a_run_or_submission_with_another_teams_priority_is_refused(stack_config) -> None:
    from infra.core.errors import ConfigErrors
    from infra.jobs.rules import job_priority
    from infra.schema.parse import parse_platform_config
    from tests.conftest import assert_rejected

    raw = stack_config("prod-us-train")
    run = next(n for n, r in raw["training"]["runs"].items() if r.get("team") == "research" or True)
    raw["training"]["runs"][run]["team"] = "research"
    assert_rejected(raw, f"training.runs.{run}.priority", "production", ["which team 'research' may not use"])
    cfg = parse_platform_config(stack_config("prod-us-train"))
    with pytest.raises(ConfigErrors, match="team 'research' may not use priority class 'production'"):
        job_priority(cfg, "research", "production")
    assert job_priority(cfg, "production", "production") == "production"


# -- prod names its account ---------------------------------------------------------------------------------


def _rule_findings(raw: dict, rule: str) -> list[str]:
    from infra.io.snapshot import region_facts
    from infra.rules import Phase, RuleContext, run_rules
    from infra.schema.parse import parse_platform_config
    from infra.stack.allowlists import PackAllowlists

    cfg = parse_platform_config(raw)
    ctx = RuleContext(cfg, stack="t", facts=region_facts(cfg), allowlists=PackAllowlists(max_gpus=999))
    return [f.one_line() for f in run_rules(Phase.plan, ctx) if f.rule == rule]


@pytest.mark.parametrize("stack", ["prod-us-train", "prod-hk-infer", "prod-sg-infer"])
def test_a_prod_stack_without_its_account_id_is_refused(stack_config, stack: str) -> None:
    from tests.conftest import DELETE, with_value

    raw = stack_config(stack)
    assert raw["security"]["account"]["id"]  # the shipped prod stacks name theirs
    assert _rule_findings(raw, "prod-names-its-account") == []
    (finding,) = _rule_findings(with_value(raw, "security.account.id", DELETE), "prod-names-its-account")
    assert finding.startswith("aiplat:platform.security.account.id: is not set on a prod stack")
    assert "set it to the 12-digit ID of the prod account" in finding


def test_a_dev_stack_may_leave_its_account_unnamed(stack_config) -> None:
    assert _rule_findings(stack_config("dev-us-train"), "prod-names-its-account") == []


# -- HTTPS only on the ALB ---------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", INFER)
def test_the_alb_listens_on_https_only(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    (ingress,) = plan.by_type("kubernetes:networking.k8s.io/v1:Ingress")
    ann = ingress.inputs["metadata"]["annotations"]
    assert json.loads(ann["alb.ingress.kubernetes.io/listen-ports"]) == [{"HTTPS": 443}]
    assert "alb.ingress.kubernetes.io/ssl-redirect" not in ann


def test_the_ingress_builder_opens_no_http_listener() -> None:
    from infra.inference.documents import alb

    assert "HTTP" not in json.dumps(
        json.loads(
            alb.ingress_annotations(
                alb.IngressSpec(
                    internet_facing=True,
                    tls_policy="ELBSecurityPolicy-TLS13-1-3-PQ-2025-09",
                    health_path="/health",
                    request_timeout_s=60,
                    deregistration_delay_s=30,
                    inbound_cidrs=["0.0.0.0/0"],
                ),
                certificate_arn="arn:c",
                waf_acl_arn=None,
            )[alb.PREFIX + "listen-ports"]
        )
    ).replace("HTTPS", "")


# -- API keys from a file, the port reached by the ALB and Prometheus only, a gate key of its own ----------


def _server(plan: Plan) -> tuple[dict, dict]:
    (d,) = [
        d
        for d in plan.by_type("kubernetes:apps/v1:Deployment")
        if d.inputs["spec"]["template"]["metadata"]["labels"].items() >= inf.SELECTOR.items()
    ]
    pod = d.inputs["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container


@pytest.mark.parametrize("stack", INFER)
def test_no_api_key_in_the_rendered_pod_spec(plan_stack, stack: str) -> None:
    from infra.plan.runner import plan_api_keys

    plan = plan_stack(stack)
    pod, container = _server(plan)
    keys = plan_api_keys(plan.config["inference"]["auth"]["api_key_slots"])  # what the plan's Secret holds
    (secret,) = [s for s in plan.by_type("kubernetes:core/v1:Secret") if s.name == "inference-api-keys"]
    for c in [*pod["containers"], *pod.get("initContainers", [])]:
        words = [*c.get("command", []), *c.get("args", [])]
        assert "--api-key" not in words
        assert not any("$(" in str(w) for w in words)  # nothing the kubelet expands onto argv
        for e in c.get("env", []):
            assert "valueFrom" not in e or "secretKeyRef" not in e["valueFrom"], e
    assert not any(k in json.dumps(pod) for k in keys)
    # vLLM reads them from its --config file, the Secret's file mounted read-only 0400
    config = container["args"][container["args"].index("--config") + 1]
    (mount,) = [m for m in container["volumeMounts"] if config.startswith(m["mountPath"] + "/")]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert mount["readOnly"] is True and volume["secret"]["secretName"] == secret.inputs["metadata"]["name"]
    assert volume["secret"]["defaultMode"] == 0o400
    assert [i["path"] for i in volume["secret"]["items"]] == [config.rsplit("/", 1)[1]]
    assert all(i["mode"] == 0o400 for i in volume["secret"]["items"])
    assert pod["securityContext"]["fsGroup"] == pod["securityContext"]["runAsUser"]  # its uid reads it
    assert "aiplat_vllm.gate.GateMiddleware" in container["args"]


@pytest.mark.parametrize("stack", INFER)
def test_only_the_alb_subnets_and_prometheus_reach_the_server_port(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    ns = plan.config["storage"]["inference"]["namespace"]
    monitoring = plan.config["cluster_services"]["monitoring_namespace"]
    policies = [
        p.inputs["spec"]
        for p in plan.by_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
        if p.inputs["metadata"]["namespace"] == ns
    ]
    public = {
        s.inputs["cidrBlock"]
        for s in plan.by_type("aws:ec2/subnet:Subnet")
        if s.inputs["tags"].get("kubernetes.io/role/elb") == "1"
    }
    peers = [peer for p in policies for rule in p.get("ingress", []) for peer in rule.get("from", [])]
    assert peers
    router = {"podSelector": {"matchLabels": rd.SELECTOR}}
    for peer in peers:
        if "ipBlock" in peer:
            assert peer["ipBlock"]["cidr"] in public, peer
        elif "namespaceSelector" not in peer:  # pods of this namespace: the router's only
            assert peer == router, peer
        else:  # pods: Prometheus's in the monitoring namespace, nothing else of it
            assert peer["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": monitoring}}
            assert peer["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}, peer


def test_the_rollout_gets_a_gate_key_of_its_own(monkeypatch) -> None:
    """The plan records secrets as '[secret]': the values are caught where the program makes them."""
    from infra.context import StackContext
    from infra.inference.documents import inference as inf
    from infra.plan.runner import plan_api_keys, run_plan

    files: list[dict] = []
    exported: list[str] = []
    real_data, real_export = inf.api_keys_secret_data, StackContext.export

    def data(*a, **kw):
        out = real_data(*a, **kw)
        files.append(json.loads(out[inf.KEYS_FILE_NAME]))
        return out

    def export(self, key, value):
        if key == "inferenceGateKey":
            value.apply(exported.append)
        return real_export(self, key, value)

    monkeypatch.setattr(inf, "api_keys_secret_data", data)
    monkeypatch.setattr(StackContext, "export", export)
    plan = run_plan("prod-sg-infer")
    (gate,) = [r for r in plan.by_type("random:index/randomPassword:RandomPassword") if "gate-key" in r.name]
    assert gate.inputs["length"] >= 32
    (secret,) = [s for s in plan.by_type("kubernetes:core/v1:Secret") if s.name == "inference-api-keys"]
    assert gate.urn in secret.dependencies
    (file,) = files
    clients = plan_api_keys(plan.config["inference"]["auth"]["api_key_slots"])
    assert file["api-key"][:-1] == clients
    assert exported == [file["api-key"][-1]]  # the tooling's key is vLLM's too
    assert exported[0] not in clients  # but never a client's


# -- alerts on the trail and on our buckets' policies -------------------------------------------------------

RULE, TARGET = "aws:cloudwatch/eventRule:EventRule", "aws:cloudwatch/eventTarget:EventTarget"


def _alert_rules(plan: Plan, source: str, event: str) -> list[RecordedResource]:
    out = []
    for r in plan.by_type(RULE):
        pattern = json.loads(r.inputs.get("eventPattern") or "{}")
        if (
            pattern.get("source") == [source]
            and pattern.get("detail-type") == ["AWS API Call via CloudTrail"]
            and event in pattern.get("detail", {}).get("eventName", [])
        ):
            out.append(r)
    return out


def _published_to_the_alerts_topic(plan: Plan, rule: RecordedResource) -> bool:
    """The rule's target is the key guard's topic, whose policy lets EventBridge publish for this rule."""
    topic = plan.one("aws:sns/topic:Topic", "keyguard-alerts")
    (policy,) = [p for p in plan.by_type("aws:sns/topicPolicy:TopicPolicy") if topic.urn in p.dependencies]
    (grant,) = json.loads(policy.inputs["policy"])["Statement"]
    rule_arn = f"arn:aws:events:{plan.region}:{ACCOUNT_ID}:rule/{rule.inputs['name']}"
    targets = [t for t in plan.by_type(TARGET) if rule.urn in t.dependencies]
    return (
        any(topic.urn in t.property_dependencies.get("arn", []) for t in targets)
        and rule_arn in grant["Condition"]["ArnEquals"]["aws:SourceArn"]
    )


@pytest.mark.parametrize("stack", ALL)
@pytest.mark.parametrize("event", ["StopLogging", "DeleteTrail", "PutEventSelectors", "UpdateTrail"])
def test_stopping_or_narrowing_the_trail_alerts(plans, stack: str, event: str) -> None:
    plan = plans[stack]
    rules = [r for r in _alert_rules(plan, "aws.cloudtrail", event) if not r.inputs.get("region")]
    assert len(rules) == 1, [r.name for r in rules]
    (rule,) = rules
    assert json.loads(rule.inputs["eventPattern"])["detail"]["eventSource"] == ["cloudtrail.amazonaws.com"]
    assert _published_to_the_alerts_topic(plan, rule)


@pytest.mark.parametrize("stack", ALL)
@pytest.mark.parametrize("event", ["PutBucketPolicy", "DeleteBucketPolicy"])
def test_a_changed_policy_on_any_of_our_buckets_alerts(plans, stack: str, event: str) -> None:
    plan = plans[stack]
    buckets = {
        b.inputs["bucket"]: b.inputs.get("region") or plan.region
        for b in plan.by_type("aws:s3/bucket:Bucket")
    }
    rules = _alert_rules(plan, "aws.s3", event)
    if not buckets:  # MinIO, an infer stack with an organization trail: no bucket of its own
        assert rules == []
        return
    home = [r for r in rules if not r.inputs.get("region")]
    assert len(home) == 1
    watched = json.loads(home[0].inputs["eventPattern"])["detail"]["requestParameters"]["bucketName"]
    assert set(watched) == set(buckets)
    assert _published_to_the_alerts_topic(plan, home[0])
    # a bucket in another region (an artifacts replica): its events are forwarded from there
    for region in set(buckets.values()) - {plan.region}:
        (there,) = [r for r in rules if r.inputs.get("region") == region]
        (target,) = [t for t in plan.by_type(TARGET) if there.urn in t.dependencies]
        assert target.inputs["arn"] == f"arn:aws:events:{plan.region}:{ACCOUNT_ID}:event-bus/default"


# -- the administration guard on every data bucket; the platform's repositories ---------------------------


@pytest.mark.parametrize("stack", ["stacks/prod-us-train", "examples/odcr"])
@pytest.mark.parametrize("purpose", ["datasets", "checkpoints", "artifacts"])
def test_only_break_glass_and_the_deployer_administer_each_data_bucket(
    plans, stack: str, purpose: str
) -> None:
    plan = plans[stack]
    policy = plan.one("aws:s3/bucketPolicy:BucketPolicy", f"storage-{purpose}-policy")
    (guard,) = [s for s in _statements(policy) if s.get("Sid") == "OnlyBreakGlassAndDeployerAdministerBucket"]
    deployer = plan.config["security"]["account"]["deployer_role"]
    admins = guard["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]
    assert len(admins) == 2
    assert any(a.endswith(f":role/{deployer}") for a in admins)
    assert any(a.endswith("-break-glass") for a in admins)
    assert guard["Principal"] == "*" and guard["Effect"] == "Deny"
    assert {"s3:PutBucketPolicy", "s3:DeleteObjectVersion", "s3:PutLifecycleConfiguration"} <= set(
        guard["Action"]
    )


@pytest.mark.parametrize("stack", ["stacks/prod-us-train", "examples/odcr"])
def test_every_platform_repository_has_a_policy(plans, stack: str) -> None:
    plan = plans[stack]
    repositories = {
        r.urn: r.inputs["name"]
        for r in plan.by_type("aws:ecr/repository:Repository")
        if "/teams/" not in r.inputs["name"]
    }
    assert repositories
    covered = {
        urn
        for p in plan.by_type("aws:ecr/repositoryPolicy:RepositoryPolicy")
        for urn in p.property_dependencies.get("repository", [])
    }
    assert set(repositories) <= covered, sorted(set(repositories.values()))


# -- team members: a Role of their own, no NetworkPolicy rights ------------------------------------------

RBAC = "kubernetes:rbac.authorization.k8s.io/v1"
FENCES = [
    ("networking.k8s.io", "networkpolicies"),
    ("", "resourcequotas"),
    ("", "limitranges"),
    ("rbac.authorization.k8s.io", "roles"),
    ("rbac.authorization.k8s.io", "rolebindings"),
]


def _grants(rules: list[dict], group: str, resource: str, verb: str) -> bool:
    """Whether RBAC ``rules`` allow ``verb`` on ``group``/``resource`` (wildcards included)."""
    return any(
        (group in r.get("apiGroups", []) or "*" in r.get("apiGroups", []))
        and (resource in r.get("resources", []) or "*" in r.get("resources", []))
        and (verb in r.get("verbs", []) or "*" in r.get("verbs", []))
        for r in rules
    )


def _members_rbac(plan: Plan, namespace: str) -> tuple[RecordedResource, RecordedResource]:
    (role,) = [r for r in plan.by_type(f"{RBAC}:Role") if r.inputs["metadata"]["namespace"] == namespace]
    (binding,) = [
        r for r in plan.by_type(f"{RBAC}:RoleBinding") if r.inputs["metadata"]["namespace"] == namespace
    ]
    return role, binding


def test_team_members_get_an_access_entry_in_the_teams_group_and_no_access_policy(plans) -> None:
    plan = plans["stacks/prod-us-train"]
    members = plan.config["teams"]["research"]["members"]
    assert members
    entries = {r.inputs["principalArn"]: r for r in plan.by_type("aws:eks/accessEntry:AccessEntry")}
    associated = {
        r.inputs["principalArn"]
        for r in plan.by_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    }
    _, binding = _members_rbac(plan, "team-research")
    (subject,) = binding.inputs["subjects"]
    assert subject["kind"] == "Group" and not subject["name"].startswith("system:")
    for arn in members.values():
        assert entries[arn].inputs["kubernetesGroups"] == [subject["name"]]
        assert entries[arn].inputs["type"] == "STANDARD"
        # an access policy would authorize on top of RBAC (edit: NetworkPolicies too)
        assert arn not in associated


@pytest.mark.parametrize("stack", ["stacks/prod-us-train", "stacks/dev-us-train"])
def test_the_members_role_runs_jobs_and_writes_no_fence(plans, stack: str) -> None:
    from tests.k8s.validate import validate_plan

    plan = plans[stack]
    for team in plan.config["teams"]:
        role, binding = _members_rbac(plan, f"team-{team}")
        rules = role.inputs["rules"]
        assert binding.inputs["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": role.inputs["metadata"]["name"],
        }
        for group, resource in FENCES:
            for verb in ("create", "update", "patch", "delete", "deletecollection"):
                assert not _grants(rules, group, resource, verb), (team, resource, verb)
        assert not _grants(rules, "", "secrets", "get")
        assert not _grants(rules, "", "pods/exec", "create")
        # what aiplat train and the how-to guides do
        for group, resource, verb in [
            ("trainer.kubeflow.org", "trainjobs", "create"),
            ("trainer.kubeflow.org", "trainjobs", "delete"),
            ("kueue.x-k8s.io", "workloads", "list"),
            ("", "pods", "list"),
            ("", "pods/log", "get"),
            ("visibility.kueue.x-k8s.io", "localqueues/pendingworkloads", "get"),
        ]:
            assert _grants(rules, group, resource, verb), (team, resource, verb)
        (runtimes,) = [
            r
            for r in plan.by_type(f"{RBAC}:ClusterRole")
            if r.inputs["metadata"]["name"] == f"aiplat-team-{team}-runtimes"
        ]
        read = runtimes.inputs["rules"]
        assert _grants(read, "trainer.kubeflow.org", "clustertrainingruntimes", "get")
        assert not _grants(read, "trainer.kubeflow.org", "clustertrainingruntimes", "update")
        # its own ClusterQueue, read only (aiplat train why says when it is held for budget)
        (queues,) = [r for r in read if "clusterqueues" in r["resources"]]
        assert queues["resourceNames"] == [f"team-{team}"] and queues["verbs"] == ["get"]
    assert validate_plan(plan, only=lambda o: o.manifest["apiVersion"].startswith("rbac.")) == []


def test_an_edit_access_entry_in_a_team_namespace_is_refused(stack_config) -> None:
    from tests.conftest import with_value

    raw = with_value(
        stack_config("prod-us-train"),
        "cluster.access_entries.research-devs",
        {
            "principal_arn": "arn:aws:iam::123456789012:role/research-devs",
            "policy": "AmazonEKSEditPolicy",
            "namespaces": ["team-research"],
        },
    )
    (finding,) = _rule_findings(raw, "team-access-through-members")
    assert finding.startswith("aiplat:platform.cluster.access_entries.research-devs: AmazonEKSEditPolicy")
    assert "teams.research.members" in finding
    assert _rule_findings(stack_config("prod-us-train"), "team-access-through-members") == []


def test_a_member_with_an_access_entry_of_its_own_is_refused(stack_config) -> None:
    from tests.conftest import with_value

    raw = stack_config("prod-us-train")
    arn = raw["teams"]["research"]["members"]["engineers"]
    raw = with_value(raw, "cluster.access_entries.eng", {"principal_arn": arn})
    (finding,) = _rule_findings(raw, "team-members-one-entry")
    assert "teams.research.members.engineers" in finding and "cluster.access_entries.eng" in finding
    raw = with_value(stack_config("prod-us-train"), "teams.production.members", {"eng": arn})
    (finding,) = _rule_findings(raw, "team-members-one-entry")
    assert "member of team" in finding


# -- workload pods: HTTPS to the VPC, S3's prefix list and the allow-list only ----------------------------

NETPOL = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def _moto_s3_cidrs(region: str) -> set[str]:
    """moto's AWS-managed S3 prefix list of ``region`` (what the offline getPrefixList answers from)."""
    from moto.ec2.models.managed_prefixes import ManagedPrefixListBackend

    class Lists:
        region_name = region
        got: dict = {}

        def _create_aws_managed_prefix_list(self, name, address_family, entries):
            self.got[name] = {e["Cidr"] for e in entries}

    lists = Lists()
    ManagedPrefixListBackend.create_default_pls(lists)
    return lists.got[f"com.amazonaws.{region}.s3"]


def _https_egress(plan: Plan, namespace: str) -> list[dict]:
    (policy,) = [
        r
        for r in plan.by_type(NETPOL)
        if r.inputs["metadata"]["namespace"] == namespace
        and r.inputs["metadata"]["name"] == "allow-https-egress"
    ]
    (rule,) = policy.inputs["spec"]["egress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 443}]
    return [peer["ipBlock"] for peer in rule["to"]]


def _workload_namespaces(plan: Plan) -> list[str]:
    st = plan.config["storage"]
    out = [st["inference"]["namespace"]]
    if "training" in plan.config or plan.config.get("role") == "train":
        out += [st["trainer"]["namespace"], st["publisher"]["namespace"]]
    out += [f"team-{t}" for t in plan.config.get("teams", {})]
    return sorted(
        {ns for ns in out if any(r.inputs["metadata"]["namespace"] == ns for r in plan.by_type(NETPOL))}
    )


@pytest.mark.parametrize("stack", ["stacks/prod-us-train", "stacks/dev-us-train", "stacks/prod-hk-infer"])
def test_workload_pods_send_https_only_to_the_vpc_and_s3(plans, stack: str) -> None:
    plan = plans[stack]
    # the VPC's part that holds the interface endpoints (issue 43: not the whole VPC any more)
    subnets = {r.urn: r.inputs["cidrBlock"] for r in plan.by_type("aws:ec2/subnet:Subnet")}
    endpoint_subnets = {
        subnets[u]
        for e in plan.by_type("aws:ec2/vpcEndpoint:VpcEndpoint")
        if e.inputs["vpcEndpointType"] == "Interface"
        for u in e.property_dependencies["subnetIds"]
    }
    expected = {*endpoint_subnets, *_moto_s3_cidrs(plan.region)}
    assert (
        "aws:ec2/getPrefixList:getPrefixList",
        {"name": f"com.amazonaws.{plan.region}.s3", "region": plan.region},
    ) in plan.calls
    namespaces = _workload_namespaces(plan)
    assert len(namespaces) >= (4 if plan.config.get("teams") else 1), namespaces
    for ns in namespaces:
        blocks = _https_egress(plan, ns)
        assert {b["cidr"] for b in blocks} == expected, ns
        assert all(b.get("except") is None for b in blocks), ns  # none of them holds IMDS


def test_the_allow_list_opens_https_to_its_cidrs_only(stack_config) -> None:
    from infra.plan.runner import run_plan
    from infra.schema.parse import parse_platform_config
    from tests.conftest import assert_rejected, with_value

    raw = stack_config("dev-us-train")
    cfg = parse_platform_config(with_value(raw, "network.workload_egress_cidrs", ["198.51.100.0/24"]))
    plan = run_plan("dev-us-train", cfg)
    for ns in _workload_namespaces(plan):
        assert "198.51.100.0/24" in {b["cidr"] for b in _https_egress(plan, ns)}, ns
    assert_rejected(
        raw,
        "network.workload_egress_cidrs",
        ["0.0.0.0/0"],
        ["network.workload_egress_cidrs", "whole internet"],
    )


def test_a_train_stack_without_a_kms_endpoint_is_refused(stack_config) -> None:
    # the publisher signs with KMS and its pods reach no public AWS address any more
    from tests.conftest import with_value

    raw = stack_config("dev-us-train")
    assert _rule_findings(raw, "publisher-reaches-kms") == []
    endpoints = [e for e in raw["network"]["interface_endpoints"] if e != "kms"]
    (finding,) = _rule_findings(
        with_value(raw, "network.interface_endpoints", endpoints), "publisher-reaches-kms"
    )
    assert finding.startswith("aiplat:platform.network.interface_endpoints: has no 'kms'")
    assert "add 'kms' to network.interface_endpoints" in finding
