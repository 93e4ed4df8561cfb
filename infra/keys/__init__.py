"""The stack's KMS keys and the key guard (key admins, break-glass, alerts on key use)."""
