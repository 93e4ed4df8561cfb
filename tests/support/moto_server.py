"""The local moto server for tests of boto3 code: the one helper, ``trainer/tools/moto_server.py`` (a free
port, waited for until it answers, reset to an empty account, stopped in teardown), under the name these
tests import."""

from __future__ import annotations

from trainer.ports import free_port
from trainer.tools.moto_server import CREDENTIALS, MotoServer

__all__ = ["CREDENTIALS", "MotoServer", "free_port"]
