"""Checks of a real deployment through the AWS APIs (boto3)."""
