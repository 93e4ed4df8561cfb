"""Where the trainer's bytes go: the S3 object store client (create-only writes) and content hashes."""
