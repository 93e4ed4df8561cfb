"""What the stacks share below the capabilities: the rule registry, the allow-lists, the cross-stack
and rollout rules. The composed schema is ``infra.schema`` (above the capabilities)."""
