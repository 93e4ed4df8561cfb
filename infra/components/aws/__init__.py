"""AWS ComponentResources (pulumi-aws), one concern per module."""
