"""A small JSON HTTP API over :mod:`http.server` (no framework, no dependencies)."""
