"""Preview-like rendering of a plan: the component tree and a count by type."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.tree import Tree

from infra.plan.runner import Plan


def plan_tree(plan: Plan) -> Tree:
    root = Tree(f"[bold]+ pulumi:pulumi:Stack[/] {plan.project}-{plan.stack} [dim]({plan.region})[/]")
    nodes: dict[str, Tree] = {}
    by_parent: dict[str | None, list] = {}
    for r in plan.resources:
        by_parent.setdefault(r.parent, []).append(r)
    known = {r.urn for r in plan.resources}

    def add(parent_node: Tree, parent_urn: str) -> None:
        for r in by_parent.get(parent_urn, []):
            style = "green" if r.custom else "cyan"
            nodes[r.urn] = parent_node.add(f"[{style}]+ {r.type}[/] {r.name}")
            add(nodes[r.urn], r.urn)

    for parent_urn, _children in by_parent.items():
        if parent_urn is None or parent_urn not in known:  # children of the stack
            for r in by_parent[parent_urn]:
                style = "green" if r.custom else "cyan"
                nodes[r.urn] = root.add(f"[{style}]+ {r.type}[/] {r.name}")
                add(nodes[r.urn], r.urn)
    return root


def type_table(plan: Plan) -> Table:
    table = Table()
    table.add_column("type")
    table.add_column("count", justify="right")
    for type_, n in plan.type_counts().items():
        table.add_row(type_, str(n))
    return table


def print_plan(plan: Plan, console: Console, *, tree: bool = True) -> None:
    if tree:
        console.print(plan_tree(plan))
    console.print(f"[bold]{plan.stack}[/]: {len(plan.resources)} resources to create")
    console.print(type_table(plan))
    if plan.outputs:
        outputs = Table(title="outputs", show_header=False)
        for key, value in sorted(plan.outputs.items()):
            outputs.add_row(key, str(value))
        console.print(outputs)


def summary_line(plan: Plan) -> str:
    """``dev-us-train (us-west-2, train): 239 resources, 3 node groups, cluster aiplat-dev-train``."""
    groups = len(plan.by_type("aws:eks/nodeGroup:NodeGroup"))
    cluster = plan.outputs.get("clusterName")
    role = plan.config.get("role", "")
    parts = [f"{len(plan.resources)} resources", f"{groups} node group{'s' if groups != 1 else ''}"]
    if cluster:
        parts.append(f"cluster {cluster}")
    return f"{plan.stack} ({plan.region}, {role}): {', '.join(parts)}"


def print_summary(plan: Plan, console: Console, *, path: Path, seconds: float) -> None:
    """Two lines per stack: what it creates, and where the plan went."""
    console.print(f"[bold]{summary_line(plan)}[/]", highlight=False)
    console.print(f"  wrote {path} ({seconds:.1f}s)", highlight=False)
