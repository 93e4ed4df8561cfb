"""trainer.checkpoint.job, the job contract's checkpoint helper, in this process (a world of one): what it
commits, what it loads, and the preemption window. The same helper under torchrun, on a slow and a
crashing S3: tests/examples/test_byo_llama_checkpoint.py."""

from __future__ import annotations

import logging
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from trainer.checkpoint.job import JobCheckpoint
from trainer.checkpoint.store import LocalStore, step_dir_name
from trainer.storage.hashing import MANIFEST
from trainer.training.distributed import DistInfo


@pytest.fixture()
def handlers() -> Iterator[None]:
    """The helper installs SIGTERM/SIGINT handlers; put the test process's back."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


class Team:
    """A team's own model and optimizer, stepped on a fixed batch."""

    def __init__(self) -> None:
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-2)
        self.x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))

    def step(self) -> None:
        self.model(self.x).pow(2).mean().backward()
        self.opt.step()
        self.opt.zero_grad()

    def weights(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def helper(self, uri: str, **kw: object) -> JobCheckpoint:
        return JobCheckpoint(self.model, self.opt, uri=uri, model_config={"layers": 2}, **kw)  # type: ignore[arg-type]


def test_saves_commit_and_restore_loads_the_newest_committed_step_only(
    info: DistInfo, handlers: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    uri = str(tmp_path / "ckpt")
    a = Team()
    ckpt = a.helper(uri)
    assert ckpt.restore() == 0  # a fresh start
    saved = {}
    for step in (1, 2):
        a.step()
        assert ckpt.save(step) is True
        saved[step] = a.weights()
    ckpt.close()
    store = LocalStore(uri)
    assert store.list_steps() == [1, 2]
    # a save cut short: step 2's data is all there, its manifest is not
    (tmp_path / "ckpt" / step_dir_name(2) / MANIFEST).unlink()

    b = Team()
    with caplog.at_level(logging.WARNING):
        resumed = b.helper(uri)
        assert resumed.restore() == 1
    resumed.close()
    assert any(f"{step_dir_name(2)}: no {MANIFEST}" in r.getMessage() for r in caplog.records)
    assert all(torch.equal(b.weights()[k], saved[1][k]) for k in saved[1])
    assert b.opt.state_dict()["state"][0]["step"] == a.opt.state_dict()["state"][0]["step"] - 1


def test_after_sigterm_a_save_that_cannot_fit_the_window_is_skipped(
    info: DistInfo, handlers: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    uri = str(tmp_path / "ckpt")
    t = Team()
    ckpt = t.helper(uri, window_s=30)
    assert ckpt.deadline() is None  # no SIGTERM yet
    t.step()
    assert ckpt.save(1)
    signal.raise_signal(signal.SIGTERM)  # the helper's handler only records when the window began
    deadline = ckpt.deadline()
    assert deadline is not None and ckpt.stop_requested()
    # What is left of the window, less than the last save took: pretend the window began 30 s minus a
    # hair ago (the handler's own time, moved back; the check reads the clock itself).
    ckpt.flags.sigterm_at = time.monotonic() - 30 + 1e-6
    t.step()
    with caplog.at_level(logging.WARNING):
        assert ckpt.save(2) is False
        assert ckpt.save(3) is False  # every later save too, without asking again
    ckpt.close()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("not saving")]
    assert len(lines) == 1 and lines[0].startswith("not saving step 2: the last save (step 1) took ")
    assert lines[0].endswith("the next attempt resumes from step 1")
    assert LocalStore(uri).list_steps() == [1]


def test_the_window_comes_from_the_job_environment(
    info: DistInfo, handlers: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIPLAT_CHECKPOINT_URI", str(tmp_path / "ckpt"))
    monkeypatch.setenv("AIPLAT_PREEMPTION_WINDOW_S", "120")
    monkeypatch.delenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", raising=False)
    t = Team()
    ckpt = JobCheckpoint(t.model, t.opt)
    assert ckpt.window_s == 120
    ckpt.close()
    # under torchrun the ranks are killed when torchrun's shutdown timeout ends, before the pod's window
    monkeypatch.setenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "115")
    ckpt = JobCheckpoint(t.model, t.opt)
    assert ckpt.window_s == 115
    ckpt.close()
    monkeypatch.delenv("AIPLAT_CHECKPOINT_URI")
    with pytest.raises(ValueError, match="AIPLAT_CHECKPOINT_URI is not set"):
        JobCheckpoint(t.model, t.opt)
