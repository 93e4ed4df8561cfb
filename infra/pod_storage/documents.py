"""The Secrets the MinIO backend gives the pods: S3 credentials and MinIO's CA. Pure."""

from __future__ import annotations

# MinIO backend: the Secret with endpoint and credentials in each workload namespace (components/k8s/minio.py)
MINIO_SECRET = "aiplat-s3"


MINIO_CA_SECRET = "aiplat-minio-ca"  # its ca.crt: MinIO's CA, from a Certificate per namespace (minio.py)
