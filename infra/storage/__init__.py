"""The data stores: S3 buckets (data, checkpoints, releases, access logs), the ECR registry, cross-region
replication, MinIO in the cluster, and the IAM roles of the trainer, publisher and inference pods."""
