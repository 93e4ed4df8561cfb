"""Kubernetes semantics the tests check plans against, from the Kubernetes docs (not our code)."""

from __future__ import annotations


def tolerates(tolerations: list[dict], key: str, value: str, effect: str) -> bool:
    """Kubernetes toleration matching
    (https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/)."""
    for t in tolerations:
        if t.get("effect") not in (None, "", effect):
            continue
        if t.get("operator") == "Exists" and t.get("key") in (None, "", key):
            return True
        if t.get("operator", "Equal") == "Equal" and t.get("key") == key and t.get("value") == value:
            return True
    return False
