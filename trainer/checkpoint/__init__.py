"""Checkpoints: DCP save/restore, the committed-step manifest, the store, side writes."""
