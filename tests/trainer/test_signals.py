"""The SIGTERM handler only sets a flag; agree() reports it (world of one: no collective needed)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from trainer.run.signals import StopFlags


@pytest.fixture()
def restore_handlers() -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def test_sigterm_sets_flag_without_raising(restore_handlers: None) -> None:
    flags = StopFlags()
    flags.install()
    assert flags.agree() == (False, False)
    os.kill(os.getpid(), signal.SIGTERM)  # the process keeps running: no exception, no exit
    assert flags.sigterm
    flags.save_failed = True
    assert flags.agree() == (True, True)


def test_second_ctrl_c_interrupts(restore_handlers: None) -> None:
    flags = StopFlags()
    flags.install()
    os.kill(os.getpid(), signal.SIGINT)
    assert flags.sigterm
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)  # the handler runs before the next bytecode
