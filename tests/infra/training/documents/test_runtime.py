"""The training documents as data: worker sizes from AWS facts, environment, failure policy, TrainJobs,
and the typed Trainer v2.3.0 / prometheus-operator models that check them."""

from __future__ import annotations

import copy
import re

import pytest

from infra.core.lognames import container_log_group, container_log_stream
from infra.core.trainjobs import pod_name_length
from infra.io import snapshot
from infra.io.kube_validate import validate_manifest
from infra.io.stackfiles import load_stack_config
from infra.io.trainer_configs import read_trainer_settings
from infra.pools.busbw import threshold_for
from infra.training.documents import runtime as t
from infra.training.documents import stack
from trainer import exitcodes


def facts(itype: str, region: str = "us-east-1"):
    f = snapshot.instance_facts(itype, region)
    assert f is not None, itype
    return f


def shape(itype: str, *, efa: bool):
    f = facts(itype)
    return t.worker_shape(
        f,
        efa_devices=f.efa_interface_limit if efa else 0,
        hugepages_2mi="5120Mi",
        memory_fraction=0.85,
        cpu_fraction=0.75,
        shm_size=None,
        cache_size_gib=None,
    )


# GPUs, EFA devices: AWS's numbers for the type (DescribeInstanceTypes via moto's snapshot)
@pytest.mark.parametrize(
    ("itype", "efa", "gpus", "efa_devices"),
    [
        ("p5.48xlarge", True, 8, 32),
        ("p5en.48xlarge", True, 8, 16),
        ("p4d.24xlarge", True, 8, 4),
        ("g5.xlarge", False, 1, 0),
    ],
)
def test_worker_requests_every_gpu_and_efa_device(itype: str, efa: bool, gpus: int, efa_devices: int) -> None:
    res = shape(itype, efa=efa).resources()
    for part in ("requests", "limits"):
        assert res[part][t.GPU_RESOURCE] == str(gpus)
        if efa_devices:
            assert res[part][t.EFA_RESOURCE] == str(efa_devices)
            assert res[part][t.HUGEPAGES_RESOURCE] == "5120Mi"
        else:
            assert t.EFA_RESOURCE not in res[part]
            assert t.HUGEPAGES_RESOURCE not in res[part]
    # extended resources and huge pages: request == limit (Kubernetes refuses anything else)
    for key, value in res["limits"].items():
        assert res["requests"][key] == value


def test_worker_memory_and_shm_come_from_the_type() -> None:
    s = shape("p5.48xlarge", efa=True)
    assert s.memory_mib == int(facts("p5.48xlarge").memory_mib * 0.85)
    assert s.shm_mib == t.SHM_CAP_MIB  # a quarter of 1.7 TiB is capped
    small = shape("g5.xlarge", efa=False)
    assert small.shm_mib == small.memory_mib // 4
    assert small.cache_gib == int(facts("g5.xlarge").instance_store_total_gb * 0.9)


def test_type_without_instance_store_needs_a_cache_size() -> None:
    f = facts("m6i.2xlarge")
    with pytest.raises(ValueError, match="no instance store"):
        t.worker_shape(
            f,
            efa_devices=0,
            hugepages_2mi="5120Mi",
            memory_fraction=0.8,
            cpu_fraction=0.5,
            shm_size=None,
            cache_size_gib=None,
        )


def test_efa_env_is_current_aws_ofi_nccl_and_nothing_obsolete() -> None:
    efa = t.worker_env(efa=True, region="us-east-1")
    assert efa["NCCL_NET"][0] == "Libfabric" and efa["NCCL_NET_PLUGIN"][0] == "ofi"
    assert efa["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"][0] == "1"
    assert not set(efa) & set(t.OBSOLETE_ENV)
    assert all(why.strip() for _value, why in efa.values()), "every variable says why it is set"
    sockets = t.worker_env(efa=False, region="us-west-2")
    assert sockets["NCCL_NET"][0] == "Socket" and "NCCL_NET_PLUGIN" not in sockets
    assert sockets["AWS_REGION"][0] == "us-west-2"


def test_failure_policy_follows_the_launcher_exit_codes() -> None:
    jobset, pods = t.failure_policies(4)
    fail, preempted, disrupted = pods["rules"]
    assert fail["action"] == "FailJob" and fail["onExitCodes"]["values"] == [exitcodes.BAD_INPUT]
    assert preempted["action"] == "Ignore" and preempted["onExitCodes"]["values"] == [exitcodes.PREEMPTED]
    assert disrupted == {
        "action": "Ignore",
        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
    }
    # codes that are real errors are in no rule: they count, and backoffLimit 0 fails the Job
    listed = {c for r in pods["rules"] if "onExitCodes" in r for c in r["onExitCodes"]["values"]}
    for code in (
        exitcodes.CRASH,
        exitcodes.SAVE_FAILED,
        exitcodes.STORE_UNAVAILABLE,
        exitcodes.PREEMPTED_SAVE_FAILED,
    ):
        assert code not in listed
    rules = {r["name"]: r for r in jobset["rules"]}
    assert rules["bad_input"]["action"] == "FailJobSet"
    assert rules["bad_input"]["onJobFailureReasons"] == ["PodFailurePolicy"]
    assert rules["errors"]["action"] == "RestartJobSet"
    assert jobset["maxRestarts"] == 4


def _runtime(itype: str = "p5.48xlarge", efa: bool = True) -> dict:
    cfg = load_stack_config("prod-us-train")
    settings = read_trainer_settings("trainer/configs/gpt2_124m.toml")
    spec = stack.runtime_spec(cfg, facts(itype), settings, image="registry/trainer@sha256:" + "0" * 64)
    return t.runtime_document(spec)


def _pod(doc: dict) -> dict:
    return doc["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def test_runtime_pod_follows_the_trainer_config() -> None:
    settings = read_trainer_settings("trainer/configs/gpt2_124m.toml")
    pod = _pod(_runtime())
    (node,) = pod["containers"]
    assert node["name"] == "node" and node["command"] == ["python", "-m", "trainer.run.launch"]
    mounts = {m["name"]: m["mountPath"] for m in node["volumeMounts"]}
    assert mounts["data-cache"] == settings.cache_dir
    assert mounts["dshm"] == "/dev/shm"
    assert pod["terminationGracePeriodSeconds"] >= settings.shutdown_window_s
    assert [p["containerPort"] for p in node["ports"]] == [settings.metrics_port_base + i for i in range(8)]
    assert pod["restartPolicy"] == "Never"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    term = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term == [{"matchExpressions": [{"key": "aiplat.io/pool", "operator": "In", "values": ["train"]}]}]
    assert pod["serviceAccountName"] == "trainer"


def _expand(value: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion of an env value from the variables before it
    (https://kubernetes.io/docs/tasks/inject-data-application/define-interdependent-environment-variables/)."""
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)), value)


def test_runtime_pod_knows_itself_its_queue_and_where_its_log_lands() -> None:
    cfg = load_stack_config("prod-us-train")
    (node,) = _pod(_runtime())["containers"]
    fields = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in node["env"] if "valueFrom" in e}
    assert fields["NODE_NAME"] == "spec.nodeName"  # the run record's node names
    assert fields["POD_NAME"] == "metadata.name" and fields["POD_NAMESPACE"] == "metadata.namespace"
    assert fields["AIPLAT_QUEUE"] == "metadata.labels['kueue.x-k8s.io/queue-name']"
    assert fields["AIPLAT_SUBMITTED_AT"] == "metadata.annotations['aiplat.io/submitted-at']"
    assert fields["AIPLAT_SUBMITTED_BY"] == "metadata.annotations['aiplat.io/submitted-by']"
    from trainer.run.runrecord import SUBMITTED_BY_ENV  # the name the run record reads

    assert fields[SUBMITTED_BY_ENV] == fields["AIPLAT_SUBMITTED_BY"]
    # what the kubelet makes of the log variables in a team's pod: the collector's group and stream (C4)
    names = [e["name"] for e in node["env"]]
    seen = {"POD_NAME": "exp-node-0-1-abcde", "POD_NAMESPACE": "team-research"}
    values = {e["name"]: e["value"] for e in node["env"] if "value" in e}
    assert names.index("AIPLAT_LOG_GROUP") > names.index("POD_NAMESPACE")  # $(VAR) sees only earlier ones
    assert _expand(values["AIPLAT_LOG_GROUP"], seen) == container_log_group(
        cfg.names.cluster, "team-research"
    )
    assert _expand(values["AIPLAT_LOG_STREAM"], seen) == container_log_stream("exp-node-0-1-abcde", "node")


def test_runtime_pod_knows_its_attempt_its_window_cache_and_ports() -> None:
    """The job contract's runtime part (docs/platform/job-contract.md), on every pod of every job."""
    pod = _pod(_runtime())
    (node,) = pod["containers"]
    fields = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in node["env"] if "valueFrom" in e}
    values = {e["name"]: e["value"] for e in node["env"] if "value" in e}
    names = [e["name"] for e in node["env"]]
    # the attempt: JobSet's restart count (the label its controller puts on every pod) and the pod's UID
    assert fields["AIPLAT_RESTART_ATTEMPT"] == "metadata.labels['jobset.sigs.k8s.io/restart-attempt']"
    assert fields["AIPLAT_POD_UID"] == "metadata.uid"
    seen = {"AIPLAT_RESTART_ATTEMPT": "2", "AIPLAT_POD_UID": "0b1c"}
    assert _expand(values["AIPLAT_ATTEMPT_ID"], seen) == "2-0b1c"
    assert names.index("AIPLAT_ATTEMPT_ID") > max(names.index(n) for n in seen)  # defined after its parts
    # the preemption window is the grace period the pods get; the cache and the scraped ports are the pod's
    assert values["AIPLAT_PREEMPTION_WINDOW_S"] == str(pod["terminationGracePeriodSeconds"])
    mounts = {m["name"]: m["mountPath"] for m in node["volumeMounts"]}
    assert values["AIPLAT_CACHE_DIR"] == mounts["data-cache"]
    assert int(values["AIPLAT_METRICS_PORT_BASE"]) == node["ports"][0]["containerPort"]


def test_a_teams_run_of_the_bundled_trainer_gets_the_team_contract() -> None:
    cfg = load_stack_config("prod-us-train")
    doc = stack.run_trainjob(cfg, "gpt2-124m", cfg.training.runs["gpt2-124m"], facts("p5.48xlarge"))
    env = {e["name"]: e["value"] for e in doc["spec"]["trainer"]["env"]}
    args = doc["spec"]["trainer"]["args"]
    # the variables say where the trainer reads and checkpoints: the same URIs as its own overrides
    assert f"checkpoint.uri={env['AIPLAT_CHECKPOINT_URI'].rstrip('/')}" in args
    assert f"data.source={env['AIPLAT_DATA_URI'].rstrip('/')}" in args
    assert env["AIPLAT_TEAM"] == "production"
    assert env["AIPLAT_OUTPUT_URI"] == "s3://aiplat-prod-us-east-1-checkpoints/production/outputs/gpt2-124m/"


def test_runtime_validates_against_the_crd_model_and_kubernetes() -> None:
    assert validate_manifest(_runtime(), "1.35") == []


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: d["spec"]["template"]["spec"]["failurePolicy"]["rules"][0].update(action="RestartJob"),
            "action",
        ),
        (
            lambda d: d["spec"]["template"]["spec"]["failurePolicy"]["rules"][0].update(name="bad name"),
            "name",
        ),
        (lambda d: d["spec"]["mlPolicy"]["torch"].update(numProcPerNode="auto"), "numProcPerNode"),
        (lambda d: _pod(d).update(restartPolicy="OnFailure"), "restartPolicy: Never"),
        (lambda d: d["spec"]["template"]["spec"]["replicatedJobs"][0].update(replicas=2), "replicas"),
        (lambda d: _pod(d)["containers"][0].update(name="trainer"), "named 'node'"),
        (lambda d: _pod(d)["containers"][0].update(bogus=1), "bogus"),
        (
            lambda d: d["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"][
                "podFailurePolicy"
            ]["rules"][0]["onExitCodes"].update(values=[0, 2]),
            "value 0",
        ),
    ],
    ids=[
        "restart-job-gated",
        "rule-name",
        "numProcPerNode-gone",
        "restart-policy",
        "replicas",
        "container-name",
        "unknown-field",
        "exit-0",
    ],
)
def test_validation_refuses_what_the_api_would(mutate, message: str) -> None:
    doc = copy.deepcopy(_runtime())
    mutate(doc)
    problems = validate_manifest(doc, "1.35")
    assert problems and any(message in p for p in problems), problems


def test_trainjob_validates_and_reserved_env_is_refused() -> None:
    cfg = load_stack_config("prod-us-train")
    run = cfg.training.runs["gpt2-124m"]
    doc = stack.run_trainjob(cfg, "gpt2-124m", run, facts("p5.48xlarge"))
    assert validate_manifest(doc, "1.35") == []
    assert doc["spec"]["trainer"]["numProcPerNode"] == 8 and doc["spec"]["trainer"]["numNodes"] == 2
    args = doc["spec"]["trainer"]["args"]
    # the run is the production team's: its prefix of both buckets
    assert "checkpoint.uri=s3://aiplat-prod-us-east-1-checkpoints/production/checkpoints/gpt2-124m" in args
    assert "data.source=s3://aiplat-prod-us-east-1-datasets/production/shards/openwebtext" in args
    bad = copy.deepcopy(doc)
    bad["spec"]["trainer"]["env"] = [{"name": "PET_NNODES", "value": "3"}]
    assert any("reserved" in p for p in validate_manifest(bad, "1.35"))
    bad = copy.deepcopy(doc)
    bad["metadata"]["name"] = "1-starts-with-a-digit"
    assert validate_manifest(bad, "1.35")


def test_bandwidth_check_runs_the_benchmark_on_the_runtime() -> None:
    cfg = load_stack_config("prod-us-train")
    doc, basis = stack.bandwidth_trainjob(cfg, facts("p5.48xlarge"))
    assert validate_manifest(doc, "1.35") == []
    assert doc["spec"]["runtimeRef"]["name"] == cfg.training.runtime.name
    patch = doc["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    assert (
        patch["template"]["spec"]["template"]["metadata"]["labels"][t.WORKLOAD_LABEL] == t.WORKLOAD_BANDWIDTH
    )
    assert doc["spec"]["trainer"]["command"] == ["python", "-m", "trainer.tools.allreduce_bench"]
    args = doc["spec"]["trainer"]["args"]
    assert f"--min-busbw={threshold_for(facts('p5.48xlarge')).min_gbps}" in args
    assert "--max-bytes=8589934592" in args
    assert "479.0 GB/s" in basis


def test_thresholds_from_published_figures_or_the_network() -> None:
    p5 = threshold_for(facts("p5.48xlarge"))
    # 80% of the 479 GB/s all_reduce_perf reached at 8 GiB on 2 p5.48xlarge (awsome-distributed-training)
    assert p5.min_gbps == 383.2
    assert p5.message_bytes == 8 << 30
    g5 = threshold_for(facts("g5.xlarge", "us-west-2"))
    # no published figure: half of the type's baseline network bandwidth from AWS data (2.5 Gbps)
    network = sum(c.baseline_bandwidth_gbps for c in facts("g5.xlarge", "us-west-2").network_cards) / 8
    assert network == 2.5 / 8 and g5.min_gbps == pytest.approx(network / 2, abs=1e-3)
    assert "BaselineBandwidthInGbps" in g5.basis


@pytest.mark.parametrize(
    ("name", "nodes", "length"), [("gpt2-124m", 2, 24), ("x" * 48, 10, 63), ("x" * 48, 11, 64)]
)
def test_pod_name_length_as_jobset_computes_it(name: str, nodes: int, length: int) -> None:
    assert pod_name_length(name, nodes) == length


def test_launcher_args_expand_the_trainers_pet_variables() -> None:
    args = t.launcher_args("/opt/trainer/trainer/configs/x.toml", ["a.b=1"], worker_restarts=2)
    assert re.findall(r"\$\((\w+)\)", " ".join(args)) == [
        "PET_NNODES",
        "PET_NPROC_PER_NODE",
        "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
    ]
    assert args[-4:] == ["--config", "/opt/trainer/trainer/configs/x.toml", "--set", "a.b=1"]
