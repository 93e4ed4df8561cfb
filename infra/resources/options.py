"""Resource options for a component's children.

Pulumi does not put a component's ``depends_on`` on its children. At creation the Python SDK still orders
them (the component registers only once its dependencies are done, and a child waits for its parent's URN),
but the engine's dependency graph holds no edge from a child to what its component depends on: deletes and
replacements are ordered by that graph (a ``pulumi destroy`` could remove the node groups before the Helm
releases that run on them), ``--target`` follows it, and so does the plan's recorded ``dependencies``
(related: https://github.com/pulumi/pulumi/issues/8721, https://github.com/pulumi/pulumi/issues/7542).
Components whose children must wait use ``child_options``, which repeats the component's ``depends_on``
on each child, so the edge is explicit.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi


def inherited_depends_on(opts: pulumi.ResourceOptions | None) -> list[pulumi.Resource]:
    """The resources ``opts.depends_on`` names (a resource or a list of resources)."""
    deps = opts.depends_on if opts is not None else None
    if deps is None:
        return []
    if isinstance(deps, pulumi.Resource):
        return [deps]
    if isinstance(deps, list | tuple) and all(isinstance(d, pulumi.Resource) for d in deps):
        return list(deps)
    raise TypeError("depends_on of a component must be resources, not outputs, to be passed to its children")


def child_options(
    parent: pulumi.Resource,
    opts: pulumi.ResourceOptions | None,
    *,
    depends_on: Sequence[pulumi.Resource] = (),
) -> pulumi.ResourceOptions:
    """Options of a child of ``parent``: the component's own ``depends_on`` plus ``depends_on``."""
    return pulumi.ResourceOptions(parent=parent, depends_on=[*inherited_depends_on(opts), *depends_on])
