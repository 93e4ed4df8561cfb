"""Bootstrap: what must exist before the first pulumi up of a stack (state bucket, secrets key, deployer role)."""
