"""Container logs kept in CloudWatch Logs: Fluent Bit on every node, log groups, roles, alerts, dashboard."""
