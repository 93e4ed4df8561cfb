"""The policy pack as an analyzer: in this process, or as its own process over gRPC, as the engine runs it.

Both speak the Analyzer service (``pulumi/runtime/proto/analyzer.proto``). ``InProcessPack`` calls
pulumi-policy's ``_PolicyAnalyzerServicer`` directly (fast: tests and ``aiplat review``). ``PackProcess``
starts the pack as the CLI's ``pulumi-analyzer-policy-python`` shim does (``<python> -u -m pulumi.policy
<engine address> .``, with the environment of analyzer_plugin.go ``constructEnv``, from which the pack
reads the stack's role) and calls it over gRPC: ``aiplat review --pack-python policies/venv/bin/python``.
"""

from __future__ import annotations

import contextvars
import importlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol, TypeVar

from google.protobuf import empty_pb2
from pulumi.runtime.proto import analyzer_pb2

from infra.core.errors import ReviewInputError
from infra.io.environ import environment
from infra.io.policypack import PackProject

T = TypeVar("T")
# The engine address argument of `python -m pulumi.policy`; Python policy packs do not call the engine.
_NO_ENGINE = "127.0.0.1:0"


class Analyzer(Protocol):
    """The Analyzer RPCs the review drives, in the engine's order."""

    def info(self) -> analyzer_pb2.AnalyzerInfo: ...
    def configure(self, request: analyzer_pb2.ConfigureAnalyzerRequest) -> None: ...
    def configure_stack(self, request: analyzer_pb2.AnalyzerStackConfigureRequest) -> None: ...
    def analyze(self, request: analyzer_pb2.AnalyzeRequest) -> analyzer_pb2.AnalyzeResponse: ...
    def analyze_stack(self, request: analyzer_pb2.AnalyzeStackRequest) -> analyzer_pb2.AnalyzeResponse: ...
    def close(self) -> None: ...


def load_rules_package(folder: Path) -> Any:
    """Import ``aiplat_policies.pack`` from the pack folder (the folder goes on ``sys.path``, as
    ``runpy.run_path`` puts it there when the engine starts the pack)."""
    if not (folder / "aiplat_policies").is_dir():
        raise ReviewInputError(f"{folder}: no aiplat_policies package (not the aiplat policy pack)")
    entry = str(folder.resolve())
    if entry not in sys.path:
        sys.path.insert(0, entry)
    return importlib.import_module("aiplat_policies.pack")


class InProcessPack:
    """The pack's servicer in this process. Each call runs with the engine's environment set and in a copy
    of the context, so the Pulumi runtime settings and config the servicer sets from it do not leak into
    this process (a plan run afterwards sets its own)."""

    def __init__(self, project: PackProject, env: Mapping[str, str]):
        from pulumi_policy import EnforcementLevel
        from pulumi_policy.policy import _PolicyAnalyzerServicer

        pack = load_rules_package(project.folder)
        self._env = dict(env)
        # What PolicyPack(...) in policies/__main__.py builds; the version is PulumiPolicy.yaml's, which the
        # engine reports over the pack's own.
        self._servicer = _PolicyAnalyzerServicer(
            pack.PACK_NAME,
            project.version,
            pack.policies(),
            EnforcementLevel.MANDATORY,
            description=pack.DESCRIPTION,
        )

    def _call(self, fn: Callable[[], T]) -> T:
        def isolated() -> T:
            import pulumi.runtime

            pulumi.runtime.set_all_config({})  # a fresh config map in this context only
            return fn()

        with environment(self._env):
            return contextvars.copy_context().run(isolated)

    def info(self) -> analyzer_pb2.AnalyzerInfo:
        return self._call(lambda: self._servicer.GetAnalyzerInfo(empty_pb2.Empty(), None))

    def configure(self, request: analyzer_pb2.ConfigureAnalyzerRequest) -> None:
        self._call(lambda: self._servicer.Configure(request, None))

    def configure_stack(self, request: analyzer_pb2.AnalyzerStackConfigureRequest) -> None:
        self._call(lambda: self._servicer.ConfigureStack(request, None))

    def analyze(self, request: analyzer_pb2.AnalyzeRequest) -> analyzer_pb2.AnalyzeResponse:
        return self._call(lambda: self._servicer.Analyze(request, None))

    def analyze_stack(self, request: analyzer_pb2.AnalyzeStackRequest) -> analyzer_pb2.AnalyzeResponse:
        return self._call(lambda: self._servicer.AnalyzeStack(request, None))

    def close(self) -> None:
        pass


class PackProcess:
    """The pack started as the Pulumi CLI starts it, called over gRPC."""

    def __init__(self, project: PackProject, env: Mapping[str, str], python: Path, *, timeout_s: float = 60):
        import grpc
        from pulumi.runtime.proto import analyzer_pb2_grpc

        if not python.exists():
            raise ReviewInputError(
                f"{python}: no such Python; build the pack's virtualenv first "
                f"(python3 -m venv {project.folder}/venv && {project.folder}/venv/bin/pip install -r "
                f"{project.folder}/requirements.txt)"
            )
        # stderr to a file: a chatty pack must not block on a full pipe nobody reads
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed in close())
        # absolute (the process starts in the pack's folder) but not resolved: a venv's python is a symlink
        # whose target would not know the venv
        self._proc = subprocess.Popen(  # noqa: S603 (our own pack, our own interpreter)
            [str(python.absolute()), "-u", "-m", "pulumi.policy", _NO_ENGINE, "."],
            cwd=project.folder,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().strip()
        if not line.isdigit():
            self._proc.kill()
            self._proc.communicate(timeout=timeout_s)
            self._stderr.seek(0)
            err = self._stderr.read().strip()[-2000:]
            self._stderr.close()
            raise ReviewInputError(f"the policy pack did not start (printed {line!r}): {err}")
        self._channel = grpc.insecure_channel(f"127.0.0.1:{line}")
        grpc.channel_ready_future(self._channel).result(timeout=timeout_s)
        self._stub = analyzer_pb2_grpc.AnalyzerStub(self._channel)
        self._timeout = timeout_s

    def info(self) -> analyzer_pb2.AnalyzerInfo:
        return self._stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=self._timeout)

    def configure(self, request: analyzer_pb2.ConfigureAnalyzerRequest) -> None:
        self._stub.Configure(request, timeout=self._timeout)

    def configure_stack(self, request: analyzer_pb2.AnalyzerStackConfigureRequest) -> None:
        self._stub.ConfigureStack(request, timeout=self._timeout)

    def analyze(self, request: analyzer_pb2.AnalyzeRequest) -> analyzer_pb2.AnalyzeResponse:
        return self._stub.Analyze(request, timeout=self._timeout)

    def analyze_stack(self, request: analyzer_pb2.AnalyzeStackRequest) -> analyzer_pb2.AnalyzeResponse:
        return self._stub.AnalyzeStack(request, timeout=self._timeout)

    def close(self) -> None:
        self._channel.close()
        self._proc.terminate()
        try:
            self._proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.communicate()
        self._stderr.close()
