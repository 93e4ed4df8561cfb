"""The offline plan: the real Pulumi program under Pulumi's own mocks, answered from AWS data."""
