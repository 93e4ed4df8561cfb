"""Which stacks a rollout runs (``--stack``, ``--wave``, ``--model-only``, ``--resume``) and the record a
resumed rollout reads (``infra/ops/rollout_state.py``), on the project's prod waves."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.core.config import Environment, Role
from infra.core.errors import ConfigErrors
from infra.io.rollout_config import load_rollout_config
from infra.io.stackfiles import list_stacks, load_stack_config
from infra.ops.rollout import StackResult, State
from infra.ops.rollout_state import finished, forget, read_state, record, select_waves
from infra.stack.rollout import plan_waves

CONFIGS = {s: load_stack_config(s) for s in list_stacks()}
WAVES = plan_waves(load_rollout_config(), Environment.prod, CONFIGS)


def test_selections_keep_the_wave_order() -> None:
    assert select_waves(WAVES, CONFIGS) == WAVES
    last, first = WAVES[-1][0], WAVES[0][0]
    assert select_waves(WAVES, CONFIGS, stacks=[last, first]) == [[first], [last]]
    assert select_waves(WAVES, CONFIGS, wave=2) == [WAVES[1]]
    model = select_waves(WAVES, CONFIGS, model_only=True)
    assert model and all(CONFIGS[s].role is Role.infer for w in model for s in w)
    assert [s for w in model for s in w] == [s for w in WAVES for s in w if CONFIGS[s].role is Role.infer]
    assert select_waves(WAVES, CONFIGS, skip=[first]) == WAVES[1:]


def test_unknown_stack_and_wave_are_refused() -> None:
    with pytest.raises(ConfigErrors) as e:
        select_waves(WAVES, CONFIGS, stacks=["dev-us-train"], wave=len(WAVES) + 1)
    text = str(e.value)
    assert "--stack: ['dev-us-train'] is not in these waves" in text
    assert f"--wave: {len(WAVES) + 1} is not a wave" in text


def test_record_finished_and_forget(tmp_path: Path) -> None:
    state = tmp_path / "rollout" / "prod.json"
    assert finished(state) == set()
    record(state, StackResult("a", 0, State.healthy))
    record(state, StackResult("b", 1, State.aws_side))
    record(state, StackResult("c", 2, State.awaiting_release))
    record(state, StackResult("d", 2, State.gate_failed))
    assert finished(state) == {"a", "c"}  # an AWS side only or a failed stack is not done
    assert read_state(state)["b"]["wave"] == 2
    forget(state, ["a", "x"])
    assert finished(state) == {"c"}
    state.write_text("not json")
    assert finished(state) == set()


def test_a_first_deploy_without_the_plan_extra_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The copy area's resources come from the stack's offline plan, whose AWS snapshot is moto's (the
    `plan` extra); a machine with `pip install -e .` only is told what to install."""
    import argparse

    from infra.cli.rollout import _first_deploys
    from infra.core.errors import ToolMissingError

    def no_moto(*args: object, **kwargs: object) -> None:
        raise ModuleNotFoundError("No module named 'moto'", name="moto")

    class NeverDeployed:
        def outputs(self, stack: str) -> dict:
            return {}

    monkeypatch.setattr("infra.plan.runner.run_plan", no_moto)
    with pytest.raises(ToolMissingError, match=r"moto is missing\): \.venv/bin/pip install -e '\.\[plan\]'"):
        _first_deploys(
            ["prod-us-train"], CONFIGS, NeverDeployed(), argparse.Namespace(stacks_dir=None), tmp_path
        )
