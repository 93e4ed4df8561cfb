"""The pieces every capability shares: physical names, user errors, project names, AWS fact types, the config
base class and chart pins, IAM statement helpers, Kubernetes placement helpers and namespaces."""
