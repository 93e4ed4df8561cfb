"""Evaluates a policy's validations with cel-python as the API server would (its variables: ``object``,
``oldObject``, ``request``, ``namespaceObject``); every expression must give a boolean, never an error."""

from __future__ import annotations

from typing import Any

import celpy


def refusals(policy: dict[str, Any], **variables: Any) -> list[str]:
    """The messages of the validations of ``policy`` that refuse the request ``variables`` describe; the
    policy's ``matchConditions`` (all true) decide first whether it applies at all."""
    env = celpy.Environment()
    activation = {k: celpy.json_to_cel(v) for k, v in variables.items()}

    def run(expression: str) -> bool:
        result = env.program(env.compile(expression)).evaluate(activation)
        assert isinstance(result, celpy.celtypes.BoolType), (expression, result)
        return bool(result)

    if not all(run(c["expression"]) for c in policy["spec"].get("matchConditions", [])):
        return []
    return [v["message"] for v in policy["spec"]["validations"] if not run(v["expression"])]
