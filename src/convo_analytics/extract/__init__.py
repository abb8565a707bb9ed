"""Extractors (being built)."""
