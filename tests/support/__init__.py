"""Shared test helpers: renderers and golden-file comparison."""
