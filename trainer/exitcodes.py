"""Exit codes of ``python -m trainer.run.launch`` (the pod's exit code) and of each ``trainer.train`` worker.

Dependency-free on purpose: the Kubernetes training runtime imports it to build its failure policy.

* 0 OK: trained to ``train.steps``, or a checkpoint at/after ``train.steps`` already existed.
* 1 CRASH: unexpected error (a traceback in the log), e.g. a rank died and ``--max-restarts`` ran out.
* 2 BAD_INPUT: config, dataset or checkpoint refused; one line names the field and the fix. Retrying
  cannot help: fail the job.
* 3 SAVE_FAILED: a checkpoint save failed under ``on_save_failure=stop``, or the final save failed.
* 4 STORE_UNAVAILABLE: the data or checkpoint store did not answer for ``*.store_wait_s`` at start.
* 5 PREEMPTED_SAVE_FAILED: stopped by SIGTERM, but the preemption checkpoint was not committed (the run
  resumes from an older one).
* 143 PREEMPTED: stopped by SIGTERM after the preemption checkpoint was committed: restart the job
  without counting a failure.
"""

from __future__ import annotations

OK = 0
CRASH = 1
BAD_INPUT = 2
SAVE_FAILED = 3
STORE_UNAVAILABLE = 4
PREEMPTED_SAVE_FAILED = 5
PREEMPTED = 143  # 128 + SIGTERM: what a process killed by SIGTERM would report

NAMES: dict[int, str] = {
    OK: "ok",
    CRASH: "crash",
    BAD_INPUT: "bad_input",
    SAVE_FAILED: "save_failed",
    STORE_UNAVAILABLE: "store_unavailable",
    PREEMPTED_SAVE_FAILED: "preempted_save_failed",
    PREEMPTED: "preempted",
}

# Codes a worker returns on purpose: the launcher does not restart workers after one of them (the same
# input would give the same result) and passes it on as its own exit code.
FINAL: frozenset[int] = frozenset(
    {BAD_INPUT, SAVE_FAILED, STORE_UNAVAILABLE, PREEMPTED_SAVE_FAILED, PREEMPTED}
)
# For a Job podFailurePolicy: FailJob on these, Ignore (restart without counting) on RESTART_NOT_COUNTED,
# Count the rest.
FAIL_JOB: frozenset[int] = frozenset({BAD_INPUT})
RESTART_NOT_COUNTED: frozenset[int] = frozenset({PREEMPTED})


def name(code: int) -> str:
    """Short name of an exit code (``"exit_<n>"`` for codes outside the contract)."""
    return NAMES.get(code, f"exit_{code}")
