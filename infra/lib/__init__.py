"""Pure logic (no Pulumi): names, CIDR math, IAM/KMS policy JSON, EFA layout, ..."""
