"""The optional C fast path (warden/ingest/_skim.c); everything else is in pyproject.toml.

``optional=True``: without a compiler (or Python headers) the install goes on without it, and the
collector frames lines in Python (the reference the C code is tested against)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("warden.ingest._skim", ["warden/ingest/_skim.c"], optional=True)])
