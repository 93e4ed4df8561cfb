"""Bootstrap: what must exist before a stack's first pulumi up (state bucket, secrets key, deployer role)."""
