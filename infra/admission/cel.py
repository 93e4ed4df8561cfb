"""What the admission policy documents are made of: CEL string literals, validations, the TrainJob rule."""

from __future__ import annotations

from typing import Any

TRAINJOBS = {
    "apiGroups": ["trainer.kubeflow.org"],
    "apiVersions": ["v1alpha1"],
    "operations": ["CREATE", "UPDATE"],
    "resources": ["trainjobs"],
}


def quote(text: str) -> str:
    """A CEL string literal (single-quoted raw string: the pattern's backslashes stay as they are)."""
    if "'" in text:
        raise ValueError(f"cannot quote {text!r} as a CEL raw string")
    return f"r'{text}'"


def validation(expression: str, message: str, reason: str = "Forbidden") -> dict[str, Any]:
    return {"expression": expression, "message": message, "reason": reason}
