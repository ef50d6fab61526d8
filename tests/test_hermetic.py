"""The suite writes nothing into the checkout: hypothesis's storage lives in a temp dir."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, strategies as st
from hypothesis.configuration import storage_directory

from tests.conftest import HYPOTHESIS_HOME, REPO


@given(st.integers())
def _a_property(value: int) -> None:
    assert isinstance(value, int)


def test_hypothesis_storage_is_a_temp_dir_not_the_checkout() -> None:
    _a_property()  # a run of a property, which reads and writes hypothesis's storage
    home = storage_directory().home_directory.resolve()
    assert home == HYPOTHESIS_HOME.resolve()
    assert home.is_relative_to(Path(tempfile.gettempdir()).resolve())
    assert not home.is_relative_to(REPO)
