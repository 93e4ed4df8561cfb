"""Every alert links to its own runbook page on the docs site: the URL each planned PrometheusRule carries is
``monitoring.docs_url`` plus the address MkDocs serves ``docs/runbooks/<alert>.md`` at, and that page exists.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from mkdocs.config import load_config
from mkdocs.structure.files import File

from infra.monitoring.config import MonitoringConfig
from tests.conftest import STACKS

REPO = Path(__file__).resolve().parents[2]
RUNBOOKS = REPO / "docs" / "runbooks"
RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"


def alert_names() -> set[str]:
    """Every alert of every rule file under infra/monitoring/rules/."""
    names = set()
    for path in (REPO / "infra" / "monitoring" / "rules").glob("*.yaml"):
        for group in yaml.safe_load(path.read_text())["groups"]:
            names |= {r["alert"] for r in group["rules"] if "alert" in r}
    return names


@pytest.fixture(scope="module")
def site():
    """The site's MkDocs config (mkdocs.yml), as ``mkdocs build`` reads it."""
    return load_config(str(REPO / "mkdocs.yml"))


def page_url(site, page: Path) -> str:
    """Where MkDocs serves ``page`` (a file under docs/), relative to the site's root."""
    return File(
        str(page.relative_to(site["docs_dir"])),
        site["docs_dir"],
        site["site_dir"],
        site["use_directory_urls"],
    ).url


def test_one_runbook_page_per_alert() -> None:
    from infra.audit.documents import AUDIT_ALERTS

    pages = {p.stem for p in RUNBOOKS.glob("*.md")} - {"index"}
    assert alert_names() and pages == alert_names() | set(AUDIT_ALERTS)


def test_each_audit_alert_page_says_what_to_run_where_to_look_and_how_to_verify() -> None:
    """The audit alerts' pages (EventBridge, not Prometheus): what it means, commands to run, where to look,
    how to resolve and how to verify."""
    from infra.audit.documents import AUDIT_ALERTS

    for name in AUDIT_ALERTS:
        text = (RUNBOOKS / f"{name}.md").read_text()
        assert text.startswith(f"# {name}\n"), name
        for heading in ("## What it means", "## Look", "## Resolve", "## Verify"):
            assert heading in text, (name, heading)
        assert "aws " in text and "CloudTrail" in text, name


def test_default_docs_url_is_the_site(site) -> None:
    assert MonitoringConfig().docs_url == site["site_url"]


@pytest.mark.parametrize("stack", STACKS)
def test_every_planned_alert_links_to_its_runbook_page(plan_stack, site, stack: str) -> None:
    plan = plan_stack(stack)
    docs_url = plan.config["monitoring"]["docs_url"]
    by_url = {docs_url + page_url(site, p): p for p in RUNBOOKS.glob("*.md")}
    seen = set()
    for obj in plan.by_type(RULE):
        for group in obj.inputs["spec"]["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    page = by_url.get(rule["annotations"]["runbook_url"])
                    assert page is not None and page.stem == rule["alert"], rule["annotations"]["runbook_url"]
                    assert page.read_text().startswith(f"# {rule['alert']}\n")
                    seen.add(rule["alert"])
    assert seen  # every stack deploys alerts


def test_docs_url_must_be_a_base_url() -> None:
    """Runbook URLs are appended to it, so it must be http(s) and end in '/'."""
    assert MonitoringConfig(docs_url="https://docs.example.org/aiplat/").docs_url.endswith("/aiplat/")
    for bad in ("https://docs.example.org/aiplat", "docs.example.org/", "https:// x/"):
        with pytest.raises(ValueError, match="docs_url"):
            MonitoringConfig(docs_url=bad)
