"""The EKS cluster: control plane, add-ons, access entries, the Kubernetes version calendar, the workload
namespaces, the access gate and the storage classes."""
