"""examples/Pulumi.models-infer.yaml: one infer stack serving two base models on two GPU pools and a LoRA
adapter on one of them. Each model gets its own Deployment, Service, PDB and ScaledObject (named and keyed by
its served name), the adapter its init container and vLLM's LoRA flags; the shared objects stay one; every
object validates; adding or removing a model leaves the other's objects (URNs and specs) as they are."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from infra.core.project import CONFIG_KEY
from infra.inference.documents import catalog
from infra.inference.documents import inference as inf
from infra.inference.router import documents as rd
from infra.plan.runner import Plan, run_plan
from tests.k8s.validate import validate_plan

EXAMPLE = "models-infer"
EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
NS = "inference"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVICE = "kubernetes:core/v1:Service"
PDB = "kubernetes:policy/v1:PodDisruptionBudget"
SCALED_OBJECT = "kubernetes:keda.sh/v1alpha1:ScaledObject"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
SECRET = "kubernetes:core/v1:Secret"
PER_MODEL = (DEPLOYMENT, SERVICE, PDB, SCALED_OBJECT)


def _in_ns(plan: Plan, type_: str) -> dict[str, dict]:
    """The objects of one type in the inference namespace, by their Kubernetes name."""
    return {
        r.inputs["metadata"]["name"]: r
        for r in plan.by_type(type_)
        if r.inputs["metadata"].get("namespace") == NS
    }


@pytest.fixture(scope="module")
def plan(plan_example) -> Plan:
    return plan_example(EXAMPLE)


def test_each_model_has_its_own_objects_and_everything_validates(plan: Plan) -> None:
    models = plan.config["inference"]["models"]
    assert len(models) == 2
    for type_ in PER_MODEL:
        # each model's own, beside the router's (infra/inference/router)
        assert set(_in_ns(plan, type_)) - {rd.NAME} == {catalog.model_object_name(m) for m in models}, type_
    # shared: one Ingress, one Secret of API keys, one KEDA
    assert len(_in_ns(plan, INGRESS)) == 1 and len(_in_ns(plan, SECRET)) == 1
    assert [r.inputs["name"] for r in plan.by_type("kubernetes:helm.sh/v3:Release")].count("keda") == 1
    assert validate_plan(plan) == []


def test_each_model_runs_on_its_pool_with_its_engine_settings(plan: Plan) -> None:
    models = plan.config["inference"]["models"]
    deployments = _in_ns(plan, DEPLOYMENT)
    for name, model in models.items():
        pod = deployments[catalog.model_object_name(name)].inputs["spec"]["template"]
        assert pod["metadata"]["labels"][catalog.MODEL_LABEL] == name
        (term,) = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        assert term["matchExpressions"][0]["values"] == model["node_pools"]
        (server,) = pod["spec"]["containers"]
        args = server["args"]
        assert args[args.index("--served-model-name") + 1] == name
        init = pod["spec"]["initContainers"][0]["command"]
        assert (init[init.index("--model") + 1], init[init.index("--version") + 1]) == (
            model["release"]["name"],
            model["release"]["version"],
        )
        want_len = str((model.get("engine") or {}).get("max_model_len", 1024))
        assert args[args.index("--max-model-len") + 1] == want_len
    scaled = _in_ns(plan, SCALED_OBJECT)
    for name, model in models.items():
        spec = scaled[catalog.model_object_name(name)].inputs["spec"]
        assert spec["scaleTargetRef"]["name"] == catalog.model_object_name(name)
        assert f'model_name="{name}"' in spec["triggers"][0]["metadata"]["query"]
        assert spec["maxReplicaCount"] == model["replicas"]["max"]


def test_the_adapter_is_fetched_and_served_by_its_base(plan: Plan) -> None:
    ((base, model),) = [(n, m) for n, m in plan.config["inference"]["models"].items() if m.get("adapters")]
    ((adapter, spec),) = model["adapters"].items()
    pod = _in_ns(plan, DEPLOYMENT)[catalog.model_object_name(base)].inputs["spec"]["template"]["spec"]
    (server,) = pod["containers"]
    args = server["args"]
    assert "--enable-lora" in args
    assert args[args.index("--max-lora-rank") + 1] == str(model["lora"]["max_lora_rank"])
    module = args[args.index("--lora-modules") + 1]
    assert module == f"{adapter}={catalog.adapter_dir(adapter)}"
    (fetch,) = [c for c in pod["initContainers"] if c["name"].startswith(inf.FETCH_ADAPTER_CONTAINER)]
    cmd = fetch["command"]
    assert cmd[cmd.index("--model") + 1] == spec["release"]["name"]
    assert cmd[cmd.index("--version") + 1] == spec["release"]["version"]
    assert cmd[cmd.index("--dest") + 1] == catalog.adapter_dir(adapter)
    # the other base serves no adapter
    (other,) = [n for n in plan.config["inference"]["models"] if n != base]
    other_pod = _in_ns(plan, DEPLOYMENT)[catalog.model_object_name(other)].inputs["spec"]["template"]["spec"]
    assert "--enable-lora" not in other_pod["containers"][0]["args"]
    assert len(other_pod["initContainers"]) == 1


def test_the_stack_output_names_every_model_its_adapters_and_service(plan: Plan) -> None:
    out = plan.outputs["inference"]["models"]
    services = _in_ns(plan, SERVICE)
    for name, model in plan.config["inference"]["models"].items():
        assert out[name]["service"] in services
        assert out[name]["release"] == {
            "name": model["release"]["name"],
            "version": model["release"]["version"],
        }
        assert set(out[name]["adapters"]) == set(model.get("adapters") or {})
    # the Ingress sends to one model's Service (a model-name router takes its place: infra/inference/router)
    (ingress,) = _in_ns(plan, INGRESS).values()
    backends = {
        p["backend"]["service"]["name"] for r in ingress.inputs["spec"]["rules"] for p in r["http"]["paths"]
    }
    assert len(backends) == 1 and backends <= set(services)


def test_adding_a_model_leaves_the_others_objects_alone(plan: Plan, tmp_path: Path) -> None:
    """Stable URNs and specs: the stack without its second model plans the first model's objects
    unchanged, so adding (or removing) a model never replaces another's."""
    for f in ("Pulumi.models-train.yaml", "Pulumi.models-infer.yaml"):
        (tmp_path / f).write_text((EXAMPLES / f).read_text())
    doc = yaml.safe_load((tmp_path / "Pulumi.models-infer.yaml").read_text())
    models = doc["config"][CONFIG_KEY]["inference"]["models"]
    first, *rest = list(models)
    for name in rest:
        del models[name]
    (tmp_path / "Pulumi.models-infer.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    alone = run_plan(EXAMPLE, stacks_dir=tmp_path)

    def objects(p: Plan, model: str) -> dict[str, dict]:
        name = catalog.model_object_name(model)
        return {
            r.urn: copy.deepcopy(r.inputs)
            for t in PER_MODEL
            for r in p.by_type(t)
            if r.inputs["metadata"]["name"] == name
        }

    mine = objects(alone, first)
    assert len(mine) == len(PER_MODEL)
    assert objects(plan, first) == mine
    assert not any(objects(alone, name) for name in rest)


def test_the_router_table_names_every_served_name_and_a_planned_service(plan: Plan) -> None:
    """``catalog.backends`` of ``server_specs``: what the wiring hands the model-name router, from the stack
    file alone; each served name (models and adapters) maps to its model's Service as the plan declares it."""
    from types import SimpleNamespace

    from infra.inference.wire import server_specs
    from infra.io.stackfiles import load_stack_config

    cfg = load_stack_config(EXAMPLE, EXAMPLES)
    assert cfg.inference is not None
    table = catalog.backends(server_specs(SimpleNamespace(cfg=cfg), cfg.inference))  # only ctx.cfg is read
    assert {b.served_name: b.model for b in table} == cfg.inference.served_names()
    services = _in_ns(plan, SERVICE)
    for b in table:
        (port,) = services[b.service].inputs["spec"]["ports"]
        assert port["port"] == b.port
        assert services[b.service].inputs["spec"]["selector"][catalog.MODEL_LABEL] == b.model
        assert b.adapter == (b.served_name != b.model)
