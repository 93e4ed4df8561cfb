"""The collector's documents where a wrong value loses logs silently: the chart values against the pinned
chart's values.yaml, the pipeline's keys against Fluent Bit's source at the chart's appVersion, which files
the tail input reads, the names the output writes to (contract C4, ``infra/core/lognames.py``), and what the
IAM policies admit (IAM's own wildcard matching, not our builder's)."""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.core.lognames import container_log_group, container_log_stream
from infra.logs import documents as docs
from infra.logs.config import LogsConfig

UPSTREAM = Path(__file__).parent / "upstream"
CLUSTER = "aiplat-prod-train"
NAMESPACES = ["kube-system", "monitoring", "training", "inference"]
ARN = "arn:aws:logs:us-east-1:123456789012:log-group:"


def settings(**kw: Any) -> docs.PipelineSettings:
    args: dict[str, Any] = dict(
        cluster_name=CLUSTER,
        region="us-east-1",
        namespaces=NAMESPACES,
        fallback_namespace="monitoring",
        flush_s=5,
    )
    args.update(kw)
    return docs.PipelineSettings(**args)


def values(**kw: Any) -> dict[str, Any]:
    return docs.fluent_bit_values(
        settings(),
        docs.CollectorValues(role_arn="arn:aws:iam::123456789012:role/r", memory_limit_mib=256, **kw),
    )


def chart_values() -> dict[str, Any]:
    pinned = LogsConfig().fluent_bit.version
    return yaml.safe_load((UPSTREAM / f"fluent-bit-{pinned}.values.yaml").read_text())


def unknown_keys(ours: Any, theirs: Any, path: str = "") -> list[str]:
    """Keys we set that the chart's values.yaml does not have. Below a key the chart leaves empty
    (``{}``, ``null``: free-form, e.g. annotations, resources) anything goes."""
    if not isinstance(ours, dict) or not isinstance(theirs, dict) or not theirs:
        return []
    out = []
    for key, value in ours.items():
        if key not in theirs:
            out.append(f"{path}{key}")
        else:
            out += unknown_keys(value, theirs[key], f"{path}{key}.")
    return out


def test_values_use_only_keys_of_the_pinned_chart() -> None:
    assert unknown_keys(values(), chart_values()) == []


def test_values_override_what_the_chart_defaults_wrongly_for_us() -> None:
    chart, v = chart_values(), values()
    # the chart's default pipeline ships to Elasticsearch and reads /var/lib/docker (not on containerd nodes)
    assert "Name es" in chart["config"]["outputs"] and "Name es" not in v["config"]["outputs"]
    assert {vol["name"] for vol in v["daemonSetVolumes"]} == {"varlog", "state"}
    # every mount of a daemonSetVolume names a declared volume; /var/log read-only
    mounts = {m["name"]: m for m in v["daemonSetVolumeMounts"]}
    assert set(mounts) == {vol["name"] for vol in v["daemonSetVolumes"]}
    assert mounts["varlog"]["readOnly"] is True
    assert v["serviceAccount"]["name"] == docs.SERVICE_ACCOUNT
    assert v["serviceAccount"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/r"
    }


def sections(text: str) -> list[tuple[str, dict[str, str]]]:
    """A classic-mode Fluent Bit config as (section, {key: value}) in order (keys lower-cased: Fluent Bit
    compares them case-insensitively)."""
    out: list[tuple[str, dict[str, str]]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        m = re.fullmatch(r"\[([A-Z]+)\]", line.strip())
        if m:
            out.append((m.group(1).lower(), {}))
            continue
        key, _, value = line.strip().partition(" ")
        out[-1][1][key.lower()] = value.strip()
    return out


def pipeline_sections() -> list[tuple[str, dict[str, str]]]:
    p = docs.pipeline(settings())
    return sections("\n".join(p[s] for s in ("service", "inputs", "filters", "outputs")))


def test_every_pipeline_key_is_one_fluent_bit_accepts() -> None:
    accepted = yaml.safe_load((UPSTREAM / "fluent-bit-5.1.1-options.yaml").read_text())
    unknown = []
    for section, keys in pipeline_sections():
        plugin = keys.get("name")
        allowed = set(accepted[section]["keys"]) | (set(accepted[plugin]["keys"]) if plugin else set())
        unknown += [f"[{section}] {plugin or ''} {k}" for k in keys if k not in allowed]
    assert unknown == []


def test_output_writes_to_the_c4_names() -> None:
    """What Fluent Bit's record accessor makes of the templates for a record of pod p, container c in
    namespace ns is the group and stream ``infra/core/lognames.py`` names (what `aiplat train logs` reads)."""
    (out,) = [keys for section, keys in pipeline_sections() if section == "output"]
    assert out["name"] == "cloudwatch_logs"
    record = {"namespace_name": "training", "pod_name": "run-node-0-1-abcde", "container_name": "node"}

    def accessor(template: str) -> str:
        return re.sub(r"\$kubernetes\['(\w+)'\]", lambda m: record[m.group(1)], template)

    assert accessor(out["log_group_template"]) == container_log_group(CLUSTER, "training")
    assert accessor(out["log_stream_template"]) == container_log_stream("run-node-0-1-abcde", "node")
    # the stack declares the groups (retention, KMS): the plugin must not create them
    assert out["auto_create_group"].lower() == "off"
    assert out["log_group_name"] == container_log_group(CLUSTER, "monitoring")


def test_filter_takes_metadata_from_the_file_name_only() -> None:
    (flt,) = [keys for section, keys in pipeline_sections() if section == "filter"]
    assert flt["name"] == "kubernetes" and flt["use_tag_for_meta"].lower() == "on"
    assert values()["rbac"]["create"] is False


@pytest.mark.parametrize(
    ("path", "read"),
    [
        ("/var/log/containers/run-node-0-0-abcde_training_node-0123abcd.log", True),
        ("/var/log/containers/coredns-5d78c9869d-x2x4z_kube-system_coredns-89ab.log", True),
        ("/var/log/containers/fluent-bit-x7k2p_monitoring_fluent-bit-4567.log", True),
        # a namespace not covered, and one whose name starts like a covered one
        ("/var/log/containers/app-6c9f_default_app-0123.log", False),
        ("/var/log/containers/job-abc_training-extra_node-0123.log", False),
        ("/var/log/pods/training_run-node-0-0-abcde_uid/node/0.log", False),
    ],
)
def test_tail_reads_only_the_covered_namespaces(path: str, read: bool) -> None:
    patterns = docs.tail_paths(NAMESPACES).split(",")
    assert any(fnmatch.fnmatchcase(path, p) for p in patterns) is read


def test_pipeline_refuses_a_fallback_outside_the_covered_namespaces() -> None:
    with pytest.raises(ValueError, match=r"fallback namespace 'other' is not one of \['inference'"):
        docs.pipeline(settings(fallback_namespace="other"))


def iam_match(pattern: str, value: str) -> bool:
    """IAM's ARN matching: ``*`` any run of characters, ``?`` one, case-sensitive
    (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_resource.html)."""
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value) is not None


def allowed(policy: dict, action: str, resource: str) -> bool:
    for st in policy["Statement"]:
        actions = st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
        resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
        if (
            st["Effect"] == "Allow"
            and any(iam_match(a, action) for a in actions)
            and any(iam_match(r, resource) for r in resources)
        ):
            return True
    return False


OWN = ["training", "monitoring", "team-research"]
OWN_ARNS = [f"{ARN}{container_log_group(CLUSTER, ns)}" for ns in OWN]
GROUPS = docs.groups_arn("aws", "us-east-1", "123456789012", CLUSTER)
OTHERS = [
    f"{ARN}{container_log_group(f'{CLUSTER}-2', 'training')}",
    f"{ARN}{container_log_group('aiplat-dev-train', 'training')}",
    f"{ARN}/aws/eks/{CLUSTER}/cluster",
    f"{ARN}/aiplat/{CLUSTER}/vpc-flow-logs",
]


def test_one_arn_covers_every_namespace_of_the_cluster() -> None:
    """The roles' grants name the cluster's container groups as one pattern: a team's group (and any other
    namespace's) is covered without being listed, so the documents do not grow with the teams."""
    (stmt,) = docs.writer_policy(GROUPS)["Statement"]
    assert stmt["Resource"] == [GROUPS]
    for ns in ("team-a", "team-" + "x" * 30):
        arn = f"{ARN}{container_log_group(CLUSTER, ns)}"
        assert allowed(docs.writer_policy(GROUPS), "logs:PutLogEvents", f"{arn}:log-stream:p.c")


def test_collector_writes_only_its_groups() -> None:
    policy = docs.writer_policy(GROUPS)
    for arn in OWN_ARNS:
        assert allowed(policy, "logs:CreateLogStream", f"{arn}:*")
        assert allowed(policy, "logs:PutLogEvents", f"{arn}:log-stream:run-node-0-0-abcde.node")
    for arn in OTHERS:
        assert not allowed(policy, "logs:CreateLogStream", f"{arn}:*"), arn
        assert not allowed(policy, "logs:PutLogEvents", f"{arn}:log-stream:x"), arn
    for action in (
        "logs:CreateLogGroup",
        "logs:DeleteLogGroup",
        "logs:PutRetentionPolicy",
        "logs:GetLogEvents",
    ):
        assert not allowed(policy, action, f"{OWN_ARNS[0]}:*"), action


def test_grafana_reads_only_the_groups() -> None:
    policy = docs.reader_policy(GROUPS)
    for action in ("logs:StartQuery", "logs:FilterLogEvents", "logs:GetLogEvents"):
        assert allowed(policy, action, f"{OWN_ARNS[0]}:*")
        for arn in OTHERS:
            assert not allowed(policy, action, f"{arn}:*"), (action, arn)
    for action in ("logs:PutLogEvents", "logs:CreateLogStream", "logs:DeleteLogGroup"):
        assert not allowed(policy, action, f"{OWN_ARNS[0]}:*"), action
    # GetQueryResults takes a query id, DescribeLogGroups lists the account's groups: "*" only
    assert allowed(policy, "logs:GetQueryResults", "*")
    assert allowed(policy, "logs:DescribeLogGroups", "*")


def test_run_dashboard_filters_the_runs_pod_streams() -> None:
    """The Logs Insights regex keeps the streams of the selected run's ranks: JobSet's pod names
    (``<trainjob>-node-0-<rank>-<5 random>``) plus the container, as the collector names streams."""
    board = docs.run_dashboard(cluster_name=CLUSTER, group_arns_by_name={"/g": f"{ARN}/g"})
    (logs,) = [p for p in board["panels"] if p["datasource"]["type"] == "cloudwatch"]
    expr = logs["targets"][0]["expression"]
    regex = re.search(r"like /(.+)/ \|", expr)
    assert regex and logs["targets"][0]["logGroups"] == [{"arn": "$loggroup", "name": "$loggroup"}]
    (pick,) = [v for v in board["templating"]["list"] if v["name"] == "loggroup"]
    assert pick["query"] == f"/g : {ARN}/g" and pick["current"] == {"text": "/g", "value": f"{ARN}/g"}
    pattern = regex.group(1).replace("${run}", "llama-7b").replace("${rank}", "[0-9]+")
    assert re.search(pattern, container_log_stream("llama-7b-node-0-3-x8k2p", "node"))
    assert not re.search(pattern, container_log_stream("llama-7b-v2-node-0-3-x8k2p", "node"))
    assert not re.search(pattern, container_log_stream("other-node-0-3-x8k2p", "node"))
    names = {v["name"] for v in board["templating"]["list"]}
    assert {"run", "rank"} <= names
