"""What the training and inference pods store to: IRSA roles onto the stack's buckets (S3 backend), or MinIO
in the cluster with its certificate and Secrets (MinIO backend)."""
