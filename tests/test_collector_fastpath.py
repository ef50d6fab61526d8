"""Fast paths of the collector and its post-ingest capture give exactly what the plain code does.

Each speed-up keeps a reference: the recall index built part by part equals
``recall.checkpoint_terms`` of the joined text, on the real corpus's checkpoints and on random text.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings as hsettings, strategies as st

from warden.continuity.capture import CheckpointData, capture, searchable_terms
from warden.continuity.recall import checkpoint_terms
from warden.ingest.collector import discover_transcripts, parse_file


def _checkpoint(parts: list[str]) -> CheckpointData:
    return CheckpointData(run_key="s:main", session_id="s", agent_id=None, agent="main", project=None,
                          projects=[], trigger="fill:20", fill=20.0, quality=100.0, active_task=parts[0],
                          decisions=[{"text": p, "project": None} for p in parts[1:]])


def test_searchable_terms_equal_checkpoint_terms_on_the_corpus(corpus: Path) -> None:
    checked = 0
    for path in discover_transcripts([corpus]):
        run, _state, _end = parse_file(str(path))
        for data in capture(run)[0]:
            assert searchable_terms(data) == checkpoint_terms(data.searchable_text())
            checked += 1
    assert checked > 20


# Letters, digits, CJK, Hangul, combining marks, separators and newlines: where tokenizing the
# parts and the joined text could differ if it were not exact.
_TEXT = st.text(alphabet=st.sampled_from(list("ab É é\u0301\u0308ç1_-./\n\tß") + ["漢", "字", "か", "한", "ﬁ", "İ"]),
                max_size=40)


@given(st.lists(_TEXT, min_size=1, max_size=8))
@hsettings(max_examples=300, deadline=None)
def test_searchable_terms_equal_checkpoint_terms_on_random_text(parts: list[str]) -> None:
    data = _checkpoint(parts)
    assert searchable_terms(data) == checkpoint_terms(data.searchable_text())


def test_searchable_terms_respect_the_cap() -> None:
    words = [" ".join(f"word{i}x{j}" for j in range(100)) for i in range(10)]
    data = _checkpoint(words)
    assert searchable_terms(data) == checkpoint_terms(data.searchable_text())
