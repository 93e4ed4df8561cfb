"""Pure logic (no Pulumi): CIDR math, names, EFA layout, IAM documents, node user data."""
