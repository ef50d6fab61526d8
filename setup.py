"""The optional C fast path (warden/ingest/_skim.c); everything else is in pyproject.toml.

``optional=True``: without a compiler (or Python headers) the install goes on without it, and the
parser reads every line in Python (the specification the C reader is tested against)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("warden.ingest._skim", ["warden/ingest/_skim.c"],
                            depends=["warden/ingest/_json_scan.h"], optional=True)])
