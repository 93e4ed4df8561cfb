"""The ``teams:`` and ``queueing:`` sections: what the schema refuses, and the names derived per team."""

from __future__ import annotations

import pytest

from infra.queueing import names
from infra.schema.parse import parse_platform_config
from tests.conftest import DELETE, assert_rejected


@pytest.fixture
def prod(stack_config) -> dict:
    return stack_config("prod-us-train")


def test_shipped_teams_and_their_names(prod: dict) -> None:
    cfg = parse_platform_config(prod)
    got = {t: names.team_names(t, c.namespace) for t, c in cfg.teams.items()}
    assert set(got) == {"production", "research"}
    research = got["research"]
    assert (research.namespace, research.local_queue, research.cluster_queue, research.service_account) == (
        "team-research",
        "research",
        "team-research",
        "trainer",
    )
    assert research.namespace_labels == {"aiplat.io/team": "research", "aiplat.io/workloads": "true"}
    assert research.trainjob_labels("dev") == {
        "kueue.x-k8s.io/queue-name": "research",
        "kueue.x-k8s.io/priority-class": "dev",
    }


def test_a_namespace_named_in_the_config_wins() -> None:
    assert names.team_names("vision", "cv-jobs").namespace == "cv-jobs"


def test_team_without_a_quota_has_no_queue(prod: dict) -> None:
    assert_rejected(prod, "teams.research.quotas", {}, ["teams.research.quotas", "a team without a quota"])


def test_team_without_quotas_key_is_refused(prod: dict) -> None:
    assert_rejected(prod, "teams.research.quotas", DELETE, ["teams.research.quotas"])


def test_team_name_must_be_a_dns_label(prod: dict) -> None:
    assert_rejected(prod, "teams.Research_Team", {"quotas": {"train": {"gpus": 1}}}, ["'Research_Team'"])


def test_two_teams_cannot_share_a_namespace(prod: dict) -> None:
    assert_rejected(
        prod, "teams.research.namespace", "team-production", ["'team-production' is also team 'production'"]
    )


def test_team_cannot_take_a_platform_namespace(prod: dict) -> None:
    assert_rejected(prod, "teams.research.namespace", "kube-system", ["platform namespace"])


def test_unknown_default_priority(prod: dict) -> None:
    assert_rejected(
        prod, "queueing.default_priority", "urgent", ["'urgent' is not a key of priority_classes"]
    )
    assert_rejected(prod, "teams.research.default_priority", "urgent", ["teams.research.default_priority"])


def test_run_must_name_a_declared_team(prod: dict) -> None:
    assert_rejected(prod, "training.runs.gpt2-124m.team", DELETE, ["training.runs.gpt2-124m.team is None"])
    assert_rejected(prod, "training.runs.gpt2-124m.team", "vision", ["one of ['production', 'research']"])


def test_run_priority_must_be_declared(prod: dict) -> None:
    assert_rejected(prod, "training.runs.gpt2-124m.priority", "urgent", ["queueing.priority_classes"])


def test_lending_more_than_nominal(prod: dict) -> None:
    assert_rejected(
        prod,
        "teams.research.quotas.train",
        {"gpus": 4, "lending_limit": 8},
        ["lending_limit 8 is above gpus 4"],
    )


def test_backoff_order(prod: dict) -> None:
    assert_rejected(
        prod,
        "queueing.wait_for_pods_ready.backoff",
        {"base_delay_s": 600, "max_delay_s": 60},
        ["max_delay_s (60) is below base_delay_s (600)"],
    )


def test_teams_need_the_s3_backend(prod: dict) -> None:
    prod["storage"]["minio"] = {"storage_size": "500Gi"}
    prod["storage"]["replicate_to"] = []
    assert_rejected(prod, "storage.backend", "minio", ["teams need storage.backend s3"])


def test_runtime_service_account_is_the_teams(prod: dict) -> None:
    trainer = {"namespace": "training", "service_account": "runner", "prefix": "trainer"}
    assert_rejected(prod, "storage.trainer", trainer, ["set it to 'trainer' or remove teams"])


def test_team_namespace_cannot_be_empty(prod: dict) -> None:
    # the namespace is derived ('team-<team>') unless named; a named one must be a namespace name
    assert_rejected(prod, "teams.research.namespace", "", ["aiplat:platform.teams.research.namespace"])
    assert parse_platform_config(prod).teams["research"].namespace is None


def test_releasing_teams_are_capped_where_the_publishers_policy_would_outgrow_its_quota(prod) -> None:
    from infra.queueing.config import MAX_RELEASING_TEAMS

    teams = {
        f"r{i:02d}": {"quotas": {"train": {"gpus": 0}}, "releases": True} for i in range(MAX_RELEASING_TEAMS)
    }
    teams["research"] = prod["teams"]["research"]  # releases too: one over
    assert_rejected(
        prod,
        "teams",
        teams,
        [f"teams: {MAX_RELEASING_TEAMS + 1} teams set releases", f"at most {MAX_RELEASING_TEAMS}", "10,240"],
    )
