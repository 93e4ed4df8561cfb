"""The storage capability's config modules: its section of the stack file's schema."""
