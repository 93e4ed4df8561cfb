"""kube-prometheus-stack, the GPU and EFA exporters, alert rules and Grafana dashboards; the data files
(`rules/`, `dashboards/`, `dcgm/`, `efa/`) sit beside the code."""
