"""The alert rules under promtool: every rule file parses (``promtool check rules``), every unit test file
passes (``promtool test rules``), and every alert has a firing and a quiet case, a severity, and a summary
and description that name what the alert is about (its runbook URL is the program's:
``tests/monitoring/test_runbooks.py``).

promtool comes from the Debian package ``prometheus`` (2.42 on bookworm): ``make test`` installs it when
missing. Where it is absent these tests fail (they do not skip), so a CI without it cannot pass silently.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "infra" / "monitoring" / "rules"
RULE_TESTS = Path(__file__).parent / "rules"
RULE_FILES = sorted(RULES.glob("*.yaml"))
TEST_FILES = sorted(RULE_TESTS.glob("*_test.yaml"))
INSTALL_HINT = (
    "promtool not found: install the Debian package 'prometheus' (apt-get install -y prometheus), "
    "or run `make test`, which does"
)
SEVERITIES = {"critical", "warning"}


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail(INSTALL_HINT)
    return path


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def alerts() -> dict[str, dict]:
    """Alert name -> rule, over every rule file (names are unique across files)."""
    out: dict[str, dict] = {}
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    assert rule["alert"] not in out, f"alert {rule['alert']} defined twice"
                    out[rule["alert"]] = rule
    return out


def cases() -> list[tuple[str, str, dict]]:
    """(test file, alert name, alert_rule_test case) for every case of every test file."""
    out = []
    for path in TEST_FILES:
        for group in yaml.safe_load(path.read_text())["tests"]:
            for case in group.get("alert_rule_test", []):
                out.append((path.name, case["alertname"], case))
    return out


def test_rule_files_exist() -> None:
    assert {p.stem for p in RULE_FILES} == {
        "gpu",
        "efa",
        "node",
        "training",
        "inference",
        "logs",
        "waste",
        "cost",
    }
    assert {p.name for p in TEST_FILES} == {f"{p.stem}_test.yaml" for p in RULE_FILES}


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_promtool_check_rules(path: Path) -> None:
    result = run("check", "rules", str(path), cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("path", TEST_FILES, ids=lambda p: p.name)
def test_promtool_test_rules(path: Path) -> None:
    # one file per run: Debian's promtool (2.42) has no --run to pick tests
    result = run("test", "rules", path.name, cwd=path.parent)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout, result.stdout


def test_each_test_file_loads_its_rule_file() -> None:
    for path in TEST_FILES:
        doc = yaml.safe_load(path.read_text())
        loaded = {(path.parent / f).resolve() for f in doc["rule_files"]}
        assert loaded == {(RULES / path.name.replace("_test.yaml", ".yaml")).resolve()}, path.name


def test_every_alert_has_a_firing_and_a_quiet_case() -> None:
    firing: dict[str, int] = {}
    quiet: dict[str, int] = {}
    for _, name, case in cases():
        bucket = firing if case.get("exp_alerts") else quiet
        bucket[name] = bucket.get(name, 0) + 1
    missing = {
        name: [kind for kind, seen in (("firing", firing), ("quiet", quiet)) if name not in seen]
        for name in alerts()
    }
    assert {k: v for k, v in missing.items() if v} == {}
    assert set(firing) | set(quiet) <= set(alerts()), "a test names an alert no rule defines"


def test_alert_labels_and_annotations() -> None:
    for name, rule in alerts().items():
        assert rule["labels"]["severity"] in SEVERITIES, name
        annotations = rule["annotations"]
        assert {"summary", "description"} <= set(annotations), name
        # the program adds runbook_url from monitoring.docs_url (infra/monitoring/documents.py), never the
        # file
        assert "runbook_url" not in annotations, name


def test_descriptions_name_the_node_and_gpu_they_are_about() -> None:
    """Where a firing alert carries a node or gpu label (as promtool saw it), its description says it."""
    rules = alerts()
    about = ("node", "gpu", "device", "pod", "trainjob", "persistentvolumeclaim")
    checked = set()
    for _, name, case in cases():
        for alert in case.get("exp_alerts") or []:
            description = rules[name]["annotations"]["description"]
            for label in about:
                if label in alert["exp_labels"]:
                    assert f"$labels.{label}" in description, f"{name}: description omits {label}"
                    checked.add(label)
    assert checked == set(about), "no firing case carries some of these labels: the check saw nothing"
