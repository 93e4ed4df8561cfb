"""What a team can ever be given on a flavor (Kueue's nominal + borrowing within the cohort), and how a
job's Kueue Workload conditions read in ``aiplat train list``."""

from __future__ import annotations

from typing import Any

import pytest

from infra.core.errors import NoFlavorFitsError, UnknownTeamError
from infra.io.stackfiles import load_stack_config
from infra.jobs import documents as jobs
from infra.jobs.rules import check_fits, most_gpus, team_config
from infra.schema.parse import parse_platform_config

CFG = load_stack_config("prod-us-train")


def _with_teams(teams: dict[str, Any]):
    raw = CFG.model_dump(mode="json", exclude_none=True)
    raw["teams"] = teams
    for run in raw["training"]["runs"].values():
        run["team"] = next(iter(teams))
        run.pop("priority", None)
    return parse_platform_config(raw)


def test_a_team_gets_its_nominal_plus_what_it_may_borrow_within_the_pool() -> None:
    # prod-us-train: production and research 8 nominal each, each borrowing at most 8; the pool at max 4 x 8
    assert most_gpus(CFG, "research", "train", pool_gpus=32) == 16
    assert most_gpus(CFG, "production", "train", pool_gpus=32) == 16  # borrows all of research's 8
    assert most_gpus(CFG, "production", "train", pool_gpus=12) == 12  # never more than the pool holds


def test_borrowing_stops_at_what_the_others_lend() -> None:
    cfg = _with_teams(
        {
            "a": {"quotas": {"train": {"gpus": 8}}},
            "b": {"quotas": {"train": {"gpus": 16, "lending_limit": 4}}},
        }
    )
    assert most_gpus(cfg, "a", "train", pool_gpus=32) == 12
    assert most_gpus(cfg, "a", "gpu-other", pool_gpus=32) == 0  # no quota on that flavor


def test_a_team_without_quota_on_the_runtime_pool_fits_no_flavor() -> None:
    cfg = _with_teams({"a": {"quotas": {"train": {"gpus": 8}}}, "b": {"quotas": {"other": {"gpus": 8}}}})
    with pytest.raises(NoFlavorFitsError) as exc:
        check_fits(cfg, "b", nodes=1, gpus_per_node=8)
    assert "team 'b' has no quota on pool 'train'" in str(exc.value)
    assert "fix: ask your platform team to add teams.b.quotas.train to the stack file" in str(exc.value)
    check_fits(cfg, "a", nodes=1, gpus_per_node=8)  # 8 of 8: fits


def test_an_unknown_team_names_the_stack_teams() -> None:
    with pytest.raises(UnknownTeamError) as exc:
        team_config(CFG, "prod-us-train", "nlp")
    assert str(exc.value).startswith(
        "--team: 'nlp' is not a team of stack prod-us-train (its teams: production"
    )


def _cond(kind: str, status: str, reason: str, message: str = "") -> dict[str, str]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-12-02T01:00:00Z",
    }


TJ = {"metadata": {"name": "x", "namespace": "team-a"}, "spec": {"trainer": {"numNodes": 1}}}


@pytest.mark.parametrize(
    ("conditions", "state", "reason"),
    [
        ([], "waiting", "not evaluated by Kueue yet"),
        (
            [_cond("QuotaReserved", "False", "Pending", "insufficient quota")],
            "waiting",
            "Pending: insufficient quota",
        ),
        (
            [
                _cond("QuotaReserved", "True", "QuotaReserved"),
                _cond("Admitted", "True", "Admitted"),
                _cond("PodsReady", "False", "PodsReady", "Not all pods are ready or succeeded"),
            ],
            "admitted",
            "Not all pods are ready or succeeded",
        ),
        (
            [
                _cond("Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout"),
                _cond("Admitted", "False", "NoReservation"),
            ],
            "evicted",
            "PodsReadyTimeout: Exceeded the PodsReady timeout",
        ),
        (
            [_cond("Finished", "True", "Succeeded", "Job finished successfully")],
            "finished",
            "Job finished successfully",
        ),
    ],
)
def test_workload_conditions_read_as_a_state_and_why(conditions, state: str, reason: str) -> None:
    assert jobs.job_state(TJ, {"metadata": {"name": "w"}, "status": {"conditions": conditions}}) == (
        state,
        reason,
    )


def test_a_job_kueue_has_not_seen_is_not_queued() -> None:
    assert jobs.job_state(TJ, None)[0] == "not-queued"
    failed = {
        **TJ,
        "status": {"conditions": [_cond("Failed", "True", "BackoffLimitExceeded", "rank 3 failed")]},
    }
    assert jobs.job_state(failed, None) == ("failed", "rank 3 failed")


def test_gpu_hours_count_every_admission() -> None:
    from datetime import UTC, datetime

    job = {"metadata": {"name": "x"}, "spec": {"trainer": {"numNodes": 2, "numProcPerNode": 8}}}
    admitted = {**_cond("Admitted", "True", "Admitted"), "lastTransitionTime": "2026-12-02T01:00:00Z"}
    finished = {**_cond("Finished", "True", "Succeeded"), "lastTransitionTime": "2026-12-02T01:30:00Z"}
    later = datetime(2026, 12, 2, 3, 0, tzinfo=UTC)
    # an hour in earlier admissions (Kueue's accumulated time) plus the half hour of the last one
    done = {"status": {"accumulatedPastExecutionTimeSeconds": 3600, "conditions": [admitted, finished]}}
    assert jobs.gpu_hours(job, done, later) == 2 * 8 * 1.5
    # still running: up to now
    running = {"status": {"conditions": [admitted]}}
    assert jobs.gpu_hours(job, running, datetime(2026, 12, 2, 1, 15, tzinfo=UTC)) == 2 * 8 * 0.25
    # evicted and waiting again: what it had
    waiting = {"status": {"accumulatedPastExecutionTimeSeconds": 900, "conditions": []}}
    assert jobs.gpu_hours(job, waiting, later) == 2 * 8 * 0.25
    # never admitted, or a TrainJob that left the processes per node to the runtime: not known
    assert jobs.gpu_hours(job, {"status": {"conditions": []}}, later) is None
    assert jobs.gpu_hours({"spec": {"trainer": {"numNodes": 2}}}, done, later) is None
