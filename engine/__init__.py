"""Ember's engine: backends, the token pipeline, the turn policy, history. Never imports Qt."""

__version__ = "0.2.0"
