"""desktop."""
