"""The inference server: its Deployment, autoscaling with KEDA, the Ingress and its ALB, TLS certificate, DNS
name and WAF."""
