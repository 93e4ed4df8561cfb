"""The pack as the Pulumi CLI runs it, its metadata, and the data it keeps (taggable types)."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import sys
from pathlib import Path

import pytest
import yaml
from aiplat_policies import tags
from aiplat_policies.core import registered
from aiplat_policies.pack import PACK_NAME, policies, rules

from infra.io.policypack import default_pack_dir, read_pack_project
from infra.review import review_configured_plan
from tests.conftest import REPO

PACK = REPO / "policies"


def test_pack_project_file_runs_python_in_its_own_virtualenv() -> None:
    doc = yaml.safe_load((PACK / "PulumiPolicy.yaml").read_text())
    assert doc["runtime"] == {"name": "python", "options": {"virtualenv": "venv"}}
    assert re.fullmatch(r"\d+\.\d+\.\d+", doc["version"]) and doc["description"]
    project = read_pack_project(default_pack_dir())
    assert project.venv_python == PACK / "venv" / "bin" / "python"


def test_requirements_pin_what_the_project_runs() -> None:
    """The pack's venv pins the pulumi-policy the project venv has (installed --no-deps, see README) and the
    project's pulumi, pydantic and PyYAML."""
    from importlib.metadata import version

    pins = dict(
        line.split("==")
        for line in (PACK / "requirements.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    assert pins == {
        "pulumi-policy": version("pulumi-policy"),
        "pulumi": version("pulumi"),
        "pydantic": version("pydantic"),
        "PyYAML": version("PyYAML"),
    }
    pyproject = (REPO / "pyproject.toml").read_text()
    assert f'"pulumi=={pins["pulumi"]}"' in pyproject and f'"pydantic=={pins["pydantic"]}"' in pyproject


def test_main_only_builds_the_pack() -> None:
    tree = ast.parse((PACK / "__main__.py").read_text())
    calls = [n for n in tree.body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]
    assert [ast.unparse(c.value.func) for c in calls] == ["sys.path.insert", "PolicyPack"]
    assert not [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]


def test_every_rule_is_documented_and_kebab_case() -> None:
    assert len(rules()) == len(registered()) == len(policies()) >= 50
    for r in rules():
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", r.name), r.name
        assert r.description and r.unknowns and r.doc.startswith("https://"), r.name
        assert r.kind in ("resource", "stack")
        for key, schema in r.config.items():
            assert "default" in schema and schema.get("description"), (r.name, key)


def test_every_rule_has_a_compliant_and_a_violating_test() -> None:
    """Each rule name appears in a test of this folder that expects no violation and in one that expects
    its message (the tables in test_*.py); this guards against a rule added without tests."""
    sources = "\n".join(
        p.read_text() for p in Path(__file__).parent.glob("test_*.py") if p.name != Path(__file__).name
    )
    missing = [r.name for r in rules() if f'"{r.name}"' not in sources and f"'{r.name}'" not in sources]
    grouped = {"s3-" + s for s in ("public-access-block", "tls-only", "tls-floor", "versioning", "lifecycle")}
    grouped |= {
        "training-pool-" + s for s in ("single-zone", "placement", "efa-interfaces", "efa-security-group")
    }
    grouped |= {
        "k8s-run-as-non-root",
        "k8s-no-privilege-escalation",
        "k8s-requests-limits",
        "k8s-training-accelerators",
    }
    assert [m for m in missing if m not in grouped] == []


def _sdk_takes_tags(type_token: str) -> bool:
    _, module, cls = type_token.split(":")
    sdk = importlib.import_module(f"pulumi_aws.{module.split('/')[0]}")
    return "tags" in inspect.signature(getattr(sdk, cls)._internal_init).parameters


@pytest.mark.parametrize("type_token", sorted(tags.TAGGABLE))
def test_taggable_types_take_tags(type_token) -> None:
    assert _sdk_takes_tags(type_token)


def test_every_taggable_type_of_the_plans_is_listed(plan_stack) -> None:
    from tests.conftest import STACKS

    seen = {r.type for s in STACKS for r in plan_stack(s).resources if r.type.startswith("aws:")}
    assert {t for t in seen if _sdk_takes_tags(t)} <= tags.TAGGABLE


def test_required_tags_are_the_ones_a_stack_must_set_and_the_program_applies(plan_stack) -> None:
    from pydantic import ValidationError

    from infra.schema.platform import Tags
    from tests.conftest import STACKS

    given = plan_stack(STACKS[0]).config["tags"]
    refused = set()
    for key in Tags.model_fields:
        try:
            Tags.model_validate({k: v for k, v in given.items() if k != key})
        except ValidationError:
            refused.add(key)
    assert refused and set(tags.REQUIRED_TAGS) == refused
    for stack in STACKS:
        applied = json.loads(plan_stack(stack).one("pulumi:providers:aws").inputs["defaultTags"])["tags"]
        assert set(tags.REQUIRED_TAGS) <= set(applied), stack


def test_pack_imports_only_the_pure_layers() -> None:
    """The pack's contract (the pack is outside infra/, so not in lint-imports): it may import the pure part
    of infra (core, the schema, cost, every capability's config, rules, documents and facts: the shared
    checks), pulumi_policy and the standard library; never Pulumi providers, AWS clients, a component, the
    wiring, I/O or the program. One narrow exception: cost-cap reads the
    price table (package data, no AWS, no stack files) through the loader ``aiplat cost`` uses, so the two
    price from one table."""
    import grimp

    graph = grimp.build_graph("aiplat_policies", "infra")
    # the pure part of infra: core, the stack's schema, cost, and every capability's config, rules,
    # documents and facts; never a component, wiring, the program, I/O or the tools
    impure = (
        "infra.cli",
        "infra.plan",
        "infra.review",
        "infra.ops",
        "infra.io",
        "infra.program",
        "infra.resources",
        "infra.rules",
    )

    def pure(module: str) -> bool:
        parts = module.split(".")
        return not module.startswith(impure) and not {"component", "wire"} & set(parts)

    exceptions = {("aiplat_policies.cost", "infra.io.prices")}
    bad = []
    for module in graph.find_children("aiplat_policies") | {"aiplat_policies"}:
        for imported in graph.find_modules_directly_imported_by(module):
            if (module, imported) in exceptions:
                continue
            if imported.startswith("infra") and not pure(imported):
                bad.append((module, imported))
    assert bad == []
    external = set()
    for f in (PACK / "aiplat_policies").glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                external.add(node.module.split(".")[0])
            elif isinstance(node, ast.Import):
                external |= {a.name.split(".")[0] for a in node.names}
    assert external - set(sys.stdlib_module_names) <= {"pulumi_policy", "infra", "aiplat_policies"}


def test_pack_served_over_grpc_like_the_cli_gives_the_in_process_verdict(plan_stack) -> None:
    """`python -m pulumi.policy <engine> .` in policies/ (what the CLI's policy shim runs) serves the pack
    from __main__.py; the review through that process equals the in-process review."""
    plan = plan_stack("prod-us-train").as_json()
    in_process = review_configured_plan(plan)
    served = review_configured_plan(plan, pack_python=Path(sys.executable))
    assert served.diagnostics == in_process.diagnostics
    assert served.pack == PACK_NAME and served.policies == len(rules())


def test_pack_in_its_own_virtualenv(plan_stack) -> None:
    """With policies/venv built from requirements.txt (protobuf 5 there), the verdict is the same.

    `make test` builds the venv (`make policy-venv`), as `pulumi preview --policy-pack policies` needs it."""
    assert (PACK / "venv" / "bin" / "python").exists(), "policies/venv missing: run `make policy-venv`"
    plan = plan_stack("dev-us-train").as_json()
    served = review_configured_plan(plan, pack_python=PACK / "venv" / "bin" / "python")
    assert served.diagnostics == review_configured_plan(plan).diagnostics


def _unknown_leaves(value):
    from tests.policies.conftest import UNKNOWN

    if isinstance(value, dict):
        return {k: _unknown_leaves(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unknown_leaves(v) for v in value]
    return UNKNOWN


@pytest.mark.parametrize("depth", ["properties", "leaves"])
def test_unknown_values_never_degrade_to_the_sdk_advisory(plan_stack, depth) -> None:
    """The real prod-us-train plan with every input property (or every leaf value) unknown, a first preview
    taken to the extreme: no rule raises into the SDK's "can't run policy ... during preview" advisory
    (which would let a mandatory rule pass silently); the rules that check literals report violations; the
    rules that read policy documents leave them to the update (checked-at-update lists them, see
    test_preview_unknowns.py) and refuse them in the update's own run (PULUMI_DRY_RUN=false)."""
    import copy

    from tests.policies.conftest import UNKNOWN

    plan = copy.deepcopy(plan_stack("prod-us-train").as_json())
    for r in plan["resources"]:
        if not r["type"].startswith("pulumi:providers:"):
            r["inputs"] = (
                {k: UNKNOWN for k in r["inputs"]} if depth == "properties" else _unknown_leaves(r["inputs"])
            )
    literals = {"imds-v2-hop-limit-1", "kms-key-rotation", "s3-versioning"}
    documents = {"no-wildcard-principal", "iam-trust-scoped", "iam-no-admin", "s3-tls-only"}
    result = review_configured_plan(plan)
    assert not [d for d in result.diagnostics if "can't run policy" in d.message]
    failing = {d.policy for d in result.mandatory}
    assert literals <= failing and not documents & failing
    deferred = " ".join(d.message for d in result.diagnostics if d.policy == "checked-at-update")
    assert all(rule in deferred for rule in documents)
    update = review_configured_plan(plan, dry_run=False)
    assert not [d for d in update.diagnostics if "can't run policy" in d.message]
    assert literals | documents <= {d.policy for d in update.mandatory}


def test_diagnostics_carry_severity_and_level() -> None:
    """Each diagnostic carries its own rule's severity and level. The shipped stacks pass the pack (no
    diagnostic to look at), so the plan has violations of rules that differ in both: kms-key-rotation
    (mandatory, medium), no-wildcard-principal (mandatory, critical), iam-trust-confused-deputy (advisory)."""
    from tests.policies.conftest import R, review

    def doc(principal: object) -> str:
        return json.dumps(
            {"Statement": [{"Effect": "Allow", "Principal": principal, "Action": "sts:AssumeRole"}]}
        )

    result = review(
        [
            R("aws:kms/key:Key", "key", {"enableKeyRotation": False, "policy": doc("*")}),
            R(
                "aws:iam/role:Role",
                "flow-logs",
                {"assumeRolePolicy": doc({"Service": "vpc-flow-logs.amazonaws.com"})},
            ),
        ]
    )
    by_rule = {r.name: r for r in rules()}
    assert {"kms-key-rotation", "no-wildcard-principal", "iam-trust-confused-deputy"} <= {
        d.policy for d in result.diagnostics
    }
    assert len({(d.severity, d.enforcement) for d in result.diagnostics}) >= 3
    for d in result.diagnostics:
        assert d.severity == by_rule[d.policy].severity.value
        assert d.enforcement == by_rule[d.policy].enforcement.value
    assert json.dumps([d.__dict__ for d in result.diagnostics])  # plain data (CI artifacts)


def test_policy_reference_lists_every_rule() -> None:
    """The docs site's policy reference (generated, kept current by tests/infra/cli/test_docs.py) has one row
    per rule with its severity and level."""
    page = (REPO / "docs" / "reference" / "policies.md").read_text()
    for r in rules():
        assert f"| `{r.name}` | {r.kind} | {r.severity.value} | {r.enforcement.value} |" in page
