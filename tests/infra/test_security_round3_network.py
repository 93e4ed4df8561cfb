"""Issue 43 (security, round three), the node and network findings, on the plans of every shipped and
example stack: GPUs only through the device plugin (toolkit setting on every GPU node, plugin strategy not
``envvar``), interface endpoints limited to our account, data buckets only through our gateway endpoint,
and a DNS firewall on the VPC. Each test fails on the code before the fix.

What only a cluster proves: that a pod without ``nvidia.com/gpu`` on a GPU node lists no GPU
(``nvidia-smi -L`` empty, no /dev/nvidia[0-9]*). Here the chain is checked link by link: the user data the
plan sends, executed as cloud-init would against a toolkit config.toml, leaves the two settings in effect
(TOML parsed back); the device plugin's values hand GPUs as volume mounts; and the only containers still
honoured by the environment variable are privileged ones, which no workload namespace admits.
"""

from __future__ import annotations

import base64
import email
import fnmatch
import ipaddress
import json
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from infra.core.namespaces import PodSecurity
from infra.network.documents.iam import eks_image_account
from infra.plan.mocks import ACCOUNT_ID
from infra.plan.runner import Plan, RecordedResource
from infra.pools.documents import nodes
from tests.conftest import EXAMPLES, STACKS, with_value

ALL = [f"stacks/{s}" for s in STACKS] + [f"examples/{s}" for s in EXAMPLES]
RELEASE = "kubernetes:helm.sh/v3:Release"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"

# The shape of the toolkit's shipped config.toml (NVIDIA/nvidia-container-toolkit, the defaults commented
# out at the top, then the tables): what the AL2023 NVIDIA AMI starts from.
TOOLKIT_DEFAULT = """\
#accept-nvidia-visible-devices-as-volume-mounts = false
#accept-nvidia-visible-devices-envvar-when-unprivileged = true
disable-require = false
supported-driver-capabilities = "compat32,compute,display,graphics,ngx,utility,video"

[nvidia-container-cli]
environment = []
ldconfig = "@/sbin/ldconfig"
load-kmods = true

[nvidia-container-runtime]
log-level = "info"
mode = "auto"
runtimes = ["runc", "crun"]
"""
# The same file where someone set the insecure values explicitly
TOOLKIT_OPEN = """\
accept-nvidia-visible-devices-envvar-when-unprivileged = true
  accept-nvidia-visible-devices-as-volume-mounts=false
disable-require = false

[nvidia-container-runtime]
mode = "auto"
"""


@pytest.fixture(scope="module")
def plans(plan_stack, plan_example) -> dict[str, Plan]:
    out = {f"stacks/{s}": plan_stack(s) for s in STACKS}
    out.update({f"examples/{s}": plan_example(s) for s in EXAMPLES})
    return out


def _shell_parts(user_data: str) -> list[str]:
    """The ``text/x-shellscript`` parts cloud-init would run, parsed as MIME the way it does."""
    msg = email.message_from_string(user_data)
    return [p.get_payload() for p in msg.walk() if p.get_content_type() == "text/x-shellscript"]


def _gpu_launch_templates(plan: Plan) -> list[RecordedResource]:
    gpu_groups = [ng for ng in plan.by_type(NODE_GROUP) if "NVIDIA" in ng.inputs["amiType"]]
    templates = {lt.name: lt for lt in plan.by_type(LAUNCH_TEMPLATE)}
    out = []
    for ng in gpu_groups:
        # the launch template of a node group is its sibling "<pool>-lt" (its id under the mocks: name-hash)
        lt_name = ng.inputs["launchTemplate"]["id"].rsplit("-", 1)[0]
        out.append(templates[lt_name])
    return out


def _node_classes(plan: Plan) -> list[RecordedResource]:
    return [r for r in plan.resources if r.type.endswith(":EC2NodeClass")]


def _gpu_user_data(plan: Plan) -> dict[str, str]:
    out = {}
    for lt in _gpu_launch_templates(plan):
        raw = lt.inputs.get("userData")
        out[lt.name] = base64.b64decode(raw).decode() if raw else ""
    for nc in _node_classes(plan):
        out[nc.name] = nc.inputs["spec"].get("userData") or ""
    return out


def _apply(script: str, config: Path) -> dict:
    """Run the user data's script as root would, against ``config`` instead of the node's path."""
    assert nodes.TOOLKIT_CONFIG in script
    subprocess.run(
        ["bash", "-c", script.replace(nodes.TOOLKIT_CONFIG, str(config))], check=True, capture_output=True
    )
    return tomllib.loads(config.read_text())


# -- GPUs only through the device plugin ----------------------------------------------------------------


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("start", [TOOLKIT_DEFAULT, TOOLKIT_OPEN, None], ids=["default", "open", "missing"])
def test_gpu_isolation_script_makes_the_toolkit_ignore_the_envvar(tmp_path: Path, start: str | None) -> None:
    config = tmp_path / "nvidia-container-runtime" / "config.toml"
    if start is not None:
        config.parent.mkdir()
        config.write_text(start)
    (script,) = _shell_parts(nodes.gpu_user_data())
    once = _apply(script, config)
    assert once["accept-nvidia-visible-devices-envvar-when-unprivileged"] is False
    assert once["accept-nvidia-visible-devices-as-volume-mounts"] is True
    if start is not None:  # the AMI's own settings survive
        before = tomllib.loads(start)
        assert {k: v for k, v in once.items() if k not in nodes.TOOLKIT_GPU_ISOLATION} == {
            k: v for k, v in before.items() if k not in nodes.TOOLKIT_GPU_ISOLATION
        }
    assert _apply(script, config) == once  # a second boot changes nothing


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("stack", ALL)
def test_every_gpu_pool_sets_the_toolkit_to_ignore_the_envvar(plans, stack: str, tmp_path: Path) -> None:
    plan = plans[stack]
    user_data = _gpu_user_data(plan)
    has_gpu = any("NVIDIA" in ng.inputs["amiType"] for ng in plan.by_type(NODE_GROUP)) or _node_classes(plan)
    assert bool(user_data) == bool(has_gpu)
    for name, data in user_data.items():
        scripts = _shell_parts(data)
        assert scripts, f"{name}: no shell script in the GPU node's user data"
        config = tmp_path / name / "config.toml"
        config.parent.mkdir()
        config.write_text(TOOLKIT_DEFAULT)
        for script in scripts:
            result = _apply(script, config)
        assert result["accept-nvidia-visible-devices-envvar-when-unprivileged"] is False, name
        assert result["accept-nvidia-visible-devices-as-volume-mounts"] is True, name


@pytest.mark.parametrize("stack", ALL)
def test_device_plugin_hands_gpus_as_volume_mounts(plans, stack: str) -> None:
    plan = plans[stack]
    releases = [r for r in plan.by_type(RELEASE) if r.inputs["name"] == "nvidia-device-plugin"]
    for r in releases:
        values = r.inputs["values"]
        # NVIDIA/k8s-device-plugin README v0.20.0: envvar (the default when unset) is what the toolkit
        # would take from any container; volume-mounts is the form the nodes accept
        assert values["deviceListStrategy"] == "volume-mounts"
        # the plugin reads every GPU through the envvar, honoured now for privileged containers only
        assert values["securityContext"]["privileged"] is True
    gpu = any("NVIDIA" in ng.inputs["amiType"] for ng in plan.by_type(NODE_GROUP))
    if gpu and plan.by_type(RELEASE):  # a stack with the Kubernetes side off installs no chart at all
        assert releases


@pytest.mark.parametrize("stack", ["stacks/prod-us-train", "stacks/prod-hk-infer"])
def test_only_privileged_pods_see_gpus_unrequested_and_no_workload_namespace_admits_them(
    plans, stack: str
) -> None:
    """The toolkit still honours ``NVIDIA_VISIBLE_DEVICES`` for privileged containers: every namespace that
    can run a workload pod is Pod Security ``restricted`` (which refuses ``privileged``); the privileged
    ones are the node agents' (dcgm-exporter reads all GPUs that way, on purpose)."""
    plan = plans[stack]
    namespaces = [r for r in plan.by_type("kubernetes:core/v1:Namespace")]
    assert namespaces
    for ns in namespaces:
        labels = (ns.inputs.get("metadata") or {}).get("labels") or {}
        if labels.get("aiplat.io/workloads") == "true":
            assert labels["pod-security.kubernetes.io/enforce"] == PodSecurity.restricted.value, ns.name
    dcgm = [r for r in plan.by_type(RELEASE) if r.inputs["name"] == "dcgm-exporter"]
    for r in dcgm:
        assert r.inputs["values"]["securityContext"]["privileged"] is True


# -- interface endpoints: our account's principals and resources only ----------------------------------

ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"
OTHER = "999988887777"


def _allows(document: dict, context: dict[str, str], action: str, resource: str) -> bool:
    """IAM's evaluation of an Allow-only endpoint policy for one request: some statement matches the action
    and resource and all its conditions hold (a missing key fails StringEquals/Bool, Null tests presence)."""

    def holds(op: str, block: dict) -> bool:
        for key, want in block.items():
            wants = [str(w).lower() for w in (want if isinstance(want, list) else [want])]
            have = context.get(key)
            if op == "Null":
                if (have is None) != (wants == ["true"]):
                    return False
            elif have is None or have.lower() not in wants:  # StringEquals, Bool
                return False
        return True

    for st in document["Statement"]:
        actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
        resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
        if st["Effect"] != "Allow" or not any(fnmatch.fnmatchcase(action, a) for a in actions):
            continue
        if not any(fnmatch.fnmatchcase(resource, r) for r in resources):
            continue
        if all(holds(op, block) for op, block in (st.get("Condition") or {}).items()):
            return True
    return False


def _interface_endpoints(plan: Plan) -> dict[str, dict]:
    out = {}
    for r in plan.by_type(ENDPOINT):
        if r.inputs.get("vpcEndpointType") == "Interface":
            service = r.inputs["serviceName"].removeprefix(f"com.amazonaws.{plan.region}.")
            out[service] = json.loads(r.inputs["policy"]) if r.inputs.get("policy") else {"Statement": []}
    return out


@pytest.mark.parametrize("stack", ALL)
def test_interface_endpoints_refuse_other_accounts_keys_and_resources(plans, stack: str) -> None:
    plan = plans[stack]
    endpoints = _interface_endpoints(plan)
    assert set(endpoints) == set(plan.config["network"]["interface_endpoints"])
    ours = {"aws:PrincipalAccount": ACCOUNT_ID, "aws:ResourceAccount": ACCOUNT_ID}
    for service, document in endpoints.items():
        prefix = service.split(".")[0]
        action = f"{prefix}:AnyAction"
        # our principal on our resource passes; another account's keys, or our keys on another account's
        # resource, do not (the attacker's own ECR / log group / KMS key through our endpoint)
        assert _allows(document, ours, action, "arn:aws:x:::ours"), service
        assert not _allows(document, {**ours, "aws:PrincipalAccount": OTHER}, action, "*"), service
        assert not _allows(document, {**ours, "aws:ResourceAccount": OTHER}, action, "*"), service
    if "logs" in endpoints:
        stolen = {"aws:PrincipalAccount": OTHER, "aws:ResourceAccount": OTHER}
        assert not _allows(
            endpoints["logs"], stolen, "logs:PutLogEvents", f"arn:aws:logs:x:{OTHER}:log-group:x"
        )
    if "sts" in endpoints:  # IRSA: no principal account yet, our roles only
        web = "sts:AssumeRoleWithWebIdentity"
        assert _allows(endpoints["sts"], {"aws:ResourceAccount": ACCOUNT_ID}, web, "*")
        assert not _allows(endpoints["sts"], {"aws:ResourceAccount": OTHER}, web, "*")
    for service in ("ecr.api", "ecr.dkr"):  # the EKS add-on images: AWS's account in the region
        if service in endpoints:
            eks = {"aws:PrincipalAccount": ACCOUNT_ID, "aws:ResourceAccount": eks_image_account(plan.region)}
            assert _allows(endpoints[service], eks, "ecr:BatchGetImage", "*")
            assert not _allows(endpoints[service], eks, "ecr:PutImage", "*")


def test_endpoint_policies_fit_the_quota(plans) -> None:
    for plan in plans.values():
        for service, document in _interface_endpoints(plan).items():
            # VPC endpoint policies: 20,480 characters, white space included
            # https://docs.aws.amazon.com/vpc/latest/privatelink/vpc-endpoints-access.html
            assert len(json.dumps(document)) <= 20_480, service


# -- data buckets: objects only through the stack's S3 gateway endpoint -----------------------------------

DATA_PURPOSES = ("datasets", "checkpoints", "artifacts")


def _denied(document: dict, *, principal: str, vpce: str | None, action: str, resource: str) -> bool:
    """Whether a Deny of the bucket policy matches the request (StringNotEquals on an absent key matches,
    ArnNotLike compares the principal's ARN with wildcards), as IAM evaluates it."""
    for st in document["Statement"]:
        actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
        resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
        if st["Effect"] != "Deny" or not any(fnmatch.fnmatchcase(action, a) for a in actions):
            continue
        if not any(fnmatch.fnmatchcase(resource, r) for r in resources):
            continue
        cond = st.get("Condition") or {}
        if set(cond) - {"StringNotEquals", "ArnNotLike"}:
            continue  # another guard (TLS, keys, release path): not what these requests exercise
        vpces = cond.get("StringNotEquals", {}).get("aws:SourceVpce")
        if vpces is not None and vpce in (vpces if isinstance(vpces, list) else [vpces]):
            continue
        exempt = cond.get("ArnNotLike", {}).get("aws:PrincipalArn", [])
        if any(fnmatch.fnmatchcase(principal, p) for p in (exempt if isinstance(exempt, list) else [exempt])):
            continue
        return True
    return False


@pytest.mark.parametrize("stack", ALL)
def test_data_buckets_refuse_objects_outside_our_gateway_endpoint(plans, stack: str) -> None:
    plan = plans[stack]
    policies = {r.name: r for r in plan.by_type("aws:s3/bucketPolicy:BucketPolicy")}
    buckets = {r.name.removeprefix("storage-"): r for r in plan.by_type("aws:s3/bucket:Bucket")}
    if not set(DATA_PURPOSES) <= set(buckets):
        pytest.skip("no data buckets of its own (infer stack or MinIO)")
    (gateway,) = [r for r in plan.by_type(ENDPOINT) if r.inputs.get("vpcEndpointType") == "Gateway"]
    roles = {r.name: r.inputs.get("name") or r.name for r in plan.by_type("aws:iam/role:Role")}
    acct = f"arn:aws:iam::{ACCOUNT_ID}:role"
    glass = next(f"{acct}/{n}" for n in roles.values() if str(n).endswith("-break-glass"))
    # S3 replicates with this role from outside any VPC (train stacks that replicate)
    replication = f"{acct}/{roles['replication-role']}" if "replication-role" in roles else None
    deployer = plan.config["security"]["account"].get("deployer_role")
    pod = f"{acct}/{plan.stack}-trainer-pod"
    fsx = f"{acct}/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_fs-1"
    for purpose in DATA_PURPOSES:
        policy = policies[f"storage-{purpose}-policy"]
        # the endpoint id in the policy is the gateway endpoint's (the engine records where it came from)
        assert gateway.urn in policy.property_dependencies["policy"], purpose
        document = json.loads(policy.inputs["policy"])
        (guard,) = [st for st in document["Statement"] if "aws:SourceVpce" in json.dumps(st.get("Condition"))]
        vpce = guard["Condition"]["StringNotEquals"]["aws:SourceVpce"]
        arn = f"arn:aws:s3:::{buckets[purpose].inputs['bucket']}"
        for action, resource in (
            ("s3:GetObject", f"{arn}/x"),
            ("s3:PutObject", f"{arn}/x"),
            ("s3:ListBucket", arn),
        ):
            request = {"action": action, "resource": resource}
            assert not _denied(document, principal=pod, vpce=vpce, **request), (purpose, action)
            assert _denied(document, principal=pod, vpce=None, **request), (purpose, action)  # stolen token
            assert _denied(document, principal=pod, vpce="vpce-0attacker", **request), (purpose, action)
            # those that act from outside the VPC: S3 replication, break-glass, the deployer, FSx's role
            for outside in filter(None, (replication, glass, deployer and f"{acct}/{deployer}", fsx)):
                assert not _denied(document, principal=outside, vpce=None, **request), (purpose, outside)


# -- DNS: the VPC resolves only what the stack needs --------------------------------------------------------

FW = "aws:route53/"


def _matches(name: str, domains: list[str]) -> bool:
    """DNS Firewall's matching: '*' every name, '*.zone' the zone's subdomains, else the name itself."""
    name = name.rstrip(".").lower()
    for d in domains:
        d = d.rstrip(".").lower()
        if d == "*" or name == d or (d.startswith("*.") and name.endswith(d[1:])):
            return True
    return False


def _resolves(plan: Plan, name: str) -> bool:
    """What the VPC's firewall answers for ``name``: the rules of the associated group in priority order."""
    lists = {
        r.name: r.inputs["domains"]
        for r in plan.by_type(f"{FW}resolverFirewallDomainList:ResolverFirewallDomainList")
    }
    rules = sorted(
        plan.by_type(f"{FW}resolverFirewallRule:ResolverFirewallRule"), key=lambda r: r.inputs["priority"]
    )
    for rule in rules:
        (listed,) = [n for n in lists if n in rule.inputs["firewallDomainListId"]]
        if _matches(name, lists[listed]):
            return rule.inputs["action"] != "BLOCK"
    return True


@pytest.mark.parametrize("stack", ALL)
def test_the_vpc_resolves_only_what_nodes_and_pods_need(plans, stack: str) -> None:
    plan = plans[stack]
    (association,) = plan.by_type(
        f"{FW}resolverFirewallRuleGroupAssociation:ResolverFirewallRuleGroupAssociation"
    )
    (vpc,) = plan.by_type("aws:ec2/vpc:Vpc")
    assert vpc.urn in association.property_dependencies["vpcId"]
    assert 100 <= association.inputs["priority"] <= 9900  # AssociateFirewallRuleGroup's range
    (group,) = plan.by_type(f"{FW}resolverFirewallRuleGroup:ResolverFirewallRuleGroup")
    assert group.urn in association.property_dependencies["firewallRuleGroupId"]
    (config,) = plan.by_type(f"{FW}resolverFirewallConfig:ResolverFirewallConfig")
    assert config.inputs["firewallFailOpen"] == "DISABLED"
    region = plan.region
    vpc_domain = "ec2.internal" if region == "us-east-1" else f"{region}.compute.internal"
    # what nodes and pods resolve (EKS, its OIDC issuer, ECR and its layer bucket, S3, STS, SSM, logs, KMS,
    # the load balancers, the nodes' own names)
    needed = [
        f"{ACCOUNT_ID}.dkr.ecr.{region}.amazonaws.com",
        f"api.ecr.{region}.amazonaws.com",
        f"prod-{region}-starport-layer-bucket.s3.{region}.amazonaws.com",
        f"0123456789ABCDEF.gr7.{region}.eks.amazonaws.com",
        f"oidc.eks.{region}.amazonaws.com",
        f"eks-auth.{region}.api.aws",
        "sts.amazonaws.com",
        f"sts.{region}.amazonaws.com",
        f"ssm.{region}.amazonaws.com",
        f"logs.{region}.amazonaws.com",
        f"kms.{region}.amazonaws.com",
        f"internal-k8s-inference-0123.{region}.elb.amazonaws.com",
        f"ip-10-0-1-2.{vpc_domain}",
        *(f"{b.inputs['bucket']}.s3.{region}.amazonaws.com" for b in plan.by_type("aws:s3/bucket:Bucket")),
    ]
    pulls_public = plan.config["network"].get("nat") != "none" and plan.by_type(RELEASE)
    if pulls_public:
        needed += ["quay.io", "cdn01.quay.io", "registry.k8s.io", "nvcr.io", "public.ecr.aws", "ghcr.io"]
    for name in needed:
        assert _resolves(plan, name), name
    # a token in a query to a zone an attacker serves, or any other name, is not answered
    for name in (
        "eyJhbGciOi.attacker.example",
        "pastebin.com",
        "github.com",
        "evil.compute.internal.example",
    ):
        assert not _resolves(plan, name), name
    for extra in plan.config["network"].get("dns_firewall", {}).get("allowed_domains", []):
        assert _resolves(plan, extra.removeprefix("*."))


def _rule_findings(raw: dict, rule: str) -> list[str]:
    from infra.io.snapshot import region_facts
    from infra.rules import Phase, RuleContext, run_rules
    from infra.schema.parse import parse_platform_config
    from infra.stack.allowlists import PackAllowlists

    cfg = parse_platform_config(raw)
    ctx = RuleContext(cfg, stack="t", facts=region_facts(cfg), allowlists=PackAllowlists(max_gpus=999))
    return [f.one_line() for f in run_rules(Phase.plan, ctx) if f.rule == rule]


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("pypi_mirror.example.com", "is not a domain"),
        ("x.*.example.com", "is not a domain"),
        ("a" * 256, "is 256 characters; DNS Firewall takes 1-255"),
    ],
)
def test_the_plan_refuses_domains_dns_firewall_would_refuse(stack_config, name: str, why: str) -> None:
    raw = stack_config("dev-us-train")
    assert _rule_findings(raw, "dns-firewall-domains") == []
    ok = with_value(raw, "network.dns_firewall.allowed_domains", ["*.example.com", "pypi.example.org"])
    assert _rule_findings(ok, "dns-firewall-domains") == []
    bad = with_value(raw, "network.dns_firewall.allowed_domains", [name])
    (finding,) = _rule_findings(bad, "dns-firewall-domains")
    assert finding.startswith(f"aiplat:platform.network.dns_firewall.allowed_domains: {name!r} {why}")


def test_a_blocking_firewall_needs_the_webhook_receivers_hosts(stack_config) -> None:
    raw = stack_config("prod-us-train")
    assert _rule_findings(raw, "dns-firewall-webhook-host") == []
    (finding,) = _rule_findings(
        with_value(raw, "network.dns_firewall.allowed_domains", []), "dns-firewall-webhook-host"
    )
    assert "webhook receivers ['pager']" in finding
    alert = with_value(raw, "network.dns_firewall", {"mode": "alert"})
    assert _rule_findings(alert, "dns-firewall-webhook-host") == []


# -- workload HTTPS: the endpoints' subnets, not the whole VPC ---------------------------------------------


@pytest.mark.parametrize("stack", ["stacks/prod-us-train", "stacks/prod-hk-infer", "stacks/dev-us-train"])
def test_workload_https_reaches_the_endpoints_not_the_vpc(plans, stack: str) -> None:
    plan = plans[stack]
    vpc_cidr = plan.config["network"]["vpc_cidr"]
    subnets = {r.urn: r.inputs["cidrBlock"] for r in plan.by_type("aws:ec2/subnet:Subnet")}
    endpoint_ranges = set()
    for e in plan.by_type(ENDPOINT):
        if e.inputs.get("vpcEndpointType") == "Interface":
            endpoint_ranges |= {subnets[u] for u in e.property_dependencies["subnetIds"]}
    assert endpoint_ranges
    policies = [
        r
        for r in plan.by_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
        if r.inputs["metadata"]["name"] == "allow-https-egress"
    ]
    workloads = {
        r.inputs["metadata"]["name"]
        for r in plan.by_type("kubernetes:core/v1:Namespace")
        if (r.inputs["metadata"].get("labels") or {}).get("aiplat.io/workloads") == "true"
    }
    checked = 0
    for policy in policies:
        if policy.inputs["metadata"]["namespace"] not in workloads:
            continue
        (rule,) = policy.inputs["spec"]["egress"]
        cidrs = {peer["ipBlock"]["cidr"] for peer in rule["to"]}
        assert vpc_cidr not in cidrs, policy.inputs["metadata"]["namespace"]
        assert endpoint_ranges <= cidrs  # STS, ECR, KMS ... stay reachable
        assert not any(
            ipaddress.IPv4Network(c).overlaps(ipaddress.IPv4Network(s))
            for c in cidrs
            for s in set(subnets.values()) - endpoint_ranges
        ), "reaches nodes, pods or load balancers of the VPC"
        checked += 1
    assert checked >= 1
