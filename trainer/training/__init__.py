"""The training step: model, data, schedule, metrics and the distributed setup."""
