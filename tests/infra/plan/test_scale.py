"""Two hundred teams on one train stack (a generated copy of prod-us-train, bench/scale_stacks.py): it plans
and passes review as ``aiplat review`` runs it, and no policy document that grows with the teams comes near
its AWS quota."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.scale_stacks import TRAIN_STACK, write_train_folder
from infra.cli.common import EXIT_OK
from infra.cli.main import main
from infra.core import policy_quotas
from infra.plan.runner import Plan, stack_file_plan

TEAMS = 200
MAX_SHARE = 0.8  # headroom left under every quota at 200 teams
# A ConfigMap holds at most 1 MiB (https://kubernetes.io/docs/concepts/configuration/configmap/); any other
# object is bounded by etcd's request size (1.5 MiB by default): 1 MiB for all is the stricter bound.
KUBERNETES_OBJECT_BYTES = 1024 * 1024


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("two-hundred-teams")


@pytest.fixture(scope="module")
def reviewed(folder: Path) -> tuple[int, Plan]:
    """``aiplat review --stack prod-us-train`` of the generated folder, and the plan it reviewed (the run's
    own, not planned again)."""
    write_train_folder(folder, TEAMS)
    code = main(["review", "--stack", TRAIN_STACK, "--stacks-dir", str(folder)])
    return code, stack_file_plan(TRAIN_STACK, folder)


@pytest.mark.slow
def test_two_hundred_teams_plan_and_pass_review(reviewed: tuple[int, Plan]) -> None:
    code, plan = reviewed
    assert code == EXIT_OK
    assert len(plan.config["teams"]) == TEAMS
    roles = {r.inputs.get("name") for r in plan.by_type("aws:iam/role:Role")}
    assert all(f"team-{team}" in " ".join(map(str, roles)) for team in plan.config["teams"])


@pytest.mark.slow
def test_every_policy_document_stays_under_80_percent_of_its_quota(reviewed: tuple[int, Plan]) -> None:
    _, plan = reviewed
    measured = policy_quotas.measure(
        policy_quotas.Registered(r.urn, r.type, r.name, r.inputs, r.property_dependencies)
        for r in plan.resources
    )
    kinds = {m.what.split(" ", 2)[1] for m in measured}
    # the plan carries each kind of document the quotas cover: managed, trust, inline, key and bucket
    assert {"managed", "trust", "key", "bucket"} <= kinds and any("inline" in m.what for m in measured)
    over = [f"{m.resource}: {m.problem()} ({m.share:.0%})" for m in measured if m.share > MAX_SHARE]
    assert not over, "\n".join(over)


@pytest.mark.slow
def test_every_kubernetes_object_stays_under_80_percent_of_a_configmaps_limit(
    reviewed: tuple[int, Plan],
) -> None:
    """Admission policies' parameters, dashboards, chart values and Kueue's objects grow with the teams."""
    _, plan = reviewed
    sizes = {
        r.name: len(json.dumps(r.inputs).encode()) for r in plan.resources if r.type.startswith("kubernetes:")
    }
    over = {name: size for name, size in sizes.items() if size > MAX_SHARE * KUBERNETES_OBJECT_BYTES}
    assert not over, over
