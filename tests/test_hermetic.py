"""The suite writes nothing into the checkout: hypothesis's storage lives in a temp dir."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis.configuration import storage_directory

from tests.conftest import HYPOTHESIS_HOME, REPO


def test_hypothesis_storage_is_a_temp_dir_not_the_checkout() -> None:
    home = storage_directory().home_directory.resolve()
    assert home == HYPOTHESIS_HOME.resolve()
    assert home.is_relative_to(Path(tempfile.gettempdir()).resolve())
    assert not home.is_relative_to(REPO)
