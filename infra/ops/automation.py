"""The production ``StackRunner``: the Pulumi Automation API driving the project's own program (a local
program: ``Pulumi.yaml`` and the stack files in the repository), kept thin.

The Automation API runs the ``pulumi`` CLI; without it, creating a workspace raises the builtin
``FileNotFoundError`` (pulumi/automation/_cmd.py runs ``pulumi version`` in ``PulumiCommand()``), so the
runner checks ``shutil.which("pulumi")`` first and turns either case into one clear message.
Backend and secrets provider come from ``rollout.yaml``: ``PULUMI_BACKEND_URL`` is passed to every CLI call
(https://www.pulumi.com/docs/iac/cli/environment-variables/), the secrets provider to new stacks. Every
preview and up runs the policy packs with the stack's own pack settings, ``stacks/policy-pack/<stack>.json``
(the file ``aiplat review`` reads): ``--policy-pack-config`` pairs with ``--policy-pack`` by position, and
Pulumi wants one per pack once any is given (https://www.pulumi.com/docs/iac/cli/commands/pulumi_up/).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from infra.core.errors import ConfigError, ConfigErrors, ToolMissingError
from infra.io.policypack import PACK_DIR, stack_pack_config_file
from infra.ops.rollout import WHOLE, EventSink, Pass, PolicyViolation, PreviewOutcome, StackEvent, UpOutcome
from infra.stack.rollout import ROLLOUT_FILE, RolloutConfig

INSTALL_DOC = "https://www.pulumi.com/docs/iac/download-install/"
NO_CLI = (
    "the Pulumi CLI is not installed here (no `pulumi` on PATH); the Automation API drives it. Install "
    "it with `curl -fsSL https://get.pulumi.com | sh` (or `brew install pulumi/tap/pulumi`, see "
    f"{INSTALL_DOC}), open a new shell so PATH has ~/.pulumi/bin, check `pulumi version`, then run this again"
)


def require_pulumi_cli() -> str:
    """The path of the ``pulumi`` CLI, or ToolMissingError saying how to install it."""
    found = shutil.which("pulumi")
    if not found:
        raise ToolMissingError(NO_CLI)
    return found


def to_stack_event(stack: str, event: Any) -> StackEvent | None:
    """An Automation API ``EngineEvent`` as a ``StackEvent`` (None for events a progress display ignores)."""
    if event.resource_pre_event is not None:
        m = event.resource_pre_event.metadata
        return StackEvent(stack, "resource", f"{m.op.value} {m.type}", op=m.op.value, urn=m.urn)
    if event.res_op_failed_event is not None:
        m = event.res_op_failed_event.metadata
        return StackEvent(
            stack, "failed", f"{m.op.value} {m.type} failed", op=m.op.value, urn=m.urn, level="error"
        )
    if event.diagnostic_event is not None:
        d = event.diagnostic_event
        if d.ephemeral:
            return None
        level = {"info#err": "info"}.get(d.severity, d.severity)
        return StackEvent(stack, "diagnostic", d.message.strip(), urn=d.urn or "", level=level)
    if event.policy_event is not None:
        p = event.policy_event
        message = f"{p.policy_pack_name}/{p.policy_name}: {p.message.strip()}"
        return StackEvent(stack, "policy", message, urn=p.resource_urn or "", level=p.enforcement_level)
    if event.summary_event is not None:
        changes = ", ".join(f"{op} {n}" for op, n in sorted(event.summary_event.resource_changes.items()))
        return StackEvent(stack, "summary", changes or "no changes")
    return None


def violation(event: StackEvent) -> PolicyViolation:
    pack_policy, _, message = event.message.partition(": ")
    pack, _, policy = pack_policy.partition("/")
    return PolicyViolation(policy, pack, message, mandatory=event.level == "mandatory", urn=event.urn)


class _Recorder:
    """Forwards translated events and keeps the policy violations of one operation."""

    def __init__(self, stack: str, sink: EventSink) -> None:
        self.stack, self.sink = stack, sink
        self.violations: list[PolicyViolation] = []

    def __call__(self, event: Any) -> None:
        translated = to_stack_event(self.stack, event)
        if translated is None:
            return
        if translated.kind == "policy":
            self.violations.append(violation(translated))
        self.sink(translated)


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


class AutomationRunner:
    """``StackRunner`` on the Automation API; one workspace per stack, all on the one backend."""

    def __init__(
        self,
        project_dir: Path,
        rollout: RolloutConfig,
        env: Mapping[str, str] | None = None,
        *,
        stacks_dir: Path | None = None,
    ) -> None:
        require_pulumi_cli()
        self.project_dir = project_dir
        self.stacks_dir = stacks_dir
        if rollout.policy_packs not in ([], [PACK_DIR]):
            # the stack's pack config is the project pack's; Pulumi pairs configs and packs by position
            raise ConfigErrors(
                [
                    ConfigError(
                        f"{ROLLOUT_FILE}: policy_packs",
                        f"{rollout.policy_packs}: only the project's pack ({PACK_DIR}) has per-stack "
                        "settings (stacks/policy-pack/<stack>.json)",
                        f"list [{PACK_DIR}]; put another pack's rules in it, or run that pack in CI",
                    )
                ]
            )
        self.policy_packs = [str(project_dir / p) for p in rollout.policy_packs]
        missing = [p for p in rollout.policy_packs if not (project_dir / p).is_dir()]
        if missing:
            raise ConfigErrors(
                [
                    ConfigError(
                        f"{ROLLOUT_FILE}: policy_packs",
                        f"{missing} is not a folder under {project_dir}",
                        "add the policy pack (policies/) or list the folders that hold one",
                    )
                ]
            )
        self.backend_url = rollout.backend_url
        self.secrets_provider = rollout.secrets_provider
        self.env = {"PULUMI_BACKEND_URL": rollout.backend_url, **(env or {})}

    def _stack(self, name: str) -> Any:
        from pulumi import automation as auto

        opts = auto.LocalWorkspaceOptions(env_vars=self.env, secrets_provider=self.secrets_provider)
        try:
            return auto.create_or_select_stack(name, work_dir=str(self.project_dir), opts=opts)
        except FileNotFoundError as exc:  # pulumi vanished from PATH, or a broken install
            raise ToolMissingError(f"{NO_CLI} ({exc})") from None

    def pack_options(self, stack: str) -> dict[str, Any]:
        """``policy_packs`` and, where the stack has its file, ``policy_pack_configs`` (one per pack)."""
        options: dict[str, Any] = {"policy_packs": self.policy_packs}
        config = stack_pack_config_file(stack, self.stacks_dir)
        if self.policy_packs and config.is_file():
            options["policy_pack_configs"] = [str(config.resolve())]
        return options

    def _pass_options(self, stack: str, part: Pass) -> dict[str, Any]:
        options = self.pack_options(stack)
        if part.targets:
            options["target"] = list(part.targets)
        if part.config_file:
            options["config_file"] = part.config_file
        return options

    def preview(self, stack: str, on_event: EventSink, part: Pass = WHOLE) -> PreviewOutcome:
        from pulumi.automation import errors

        recorder = _Recorder(stack, on_event)
        try:
            result = self._stack(stack).preview(
                on_event=recorder, color="never", diff=False, **self._pass_options(stack, part)
            )
        except errors.CommandError as exc:  # includes a preview refused by a mandatory policy
            return PreviewOutcome({}, tuple(recorder.violations), _tail(str(exc)))
        return PreviewOutcome(dict(result.change_summary or {}), tuple(recorder.violations))

    def outputs(self, stack: str) -> dict[str, Any]:
        """The stack's outputs as deployed now (empty before its first deploy); secrets stay masked."""
        return {k: v.value for k, v in self._stack(stack).outputs().items() if not v.secret}

    def up(self, stack: str, on_event: EventSink, part: Pass = WHOLE) -> UpOutcome:
        from pulumi.automation import errors

        recorder = _Recorder(stack, on_event)
        target = self._stack(stack)
        try:
            result = target.up(on_event=recorder, color="never", **self._pass_options(stack, part))
        except errors.CommandError as exc:
            return UpOutcome({}, {}, _tail(str(exc)))
        outputs = {k: v.value for k, v in result.outputs.items()}
        return UpOutcome(dict(result.summary.resource_changes or {}), outputs)
