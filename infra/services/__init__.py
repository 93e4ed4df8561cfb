"""The chart-based cluster services: device plugins, the AWS Load Balancer Controller, metrics-server,
cert-manager; one documents module per service, and the wiring of every service (Karpenter and MinIO
included)."""
