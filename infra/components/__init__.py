"""Pulumi ComponentResources, one concern per module."""
