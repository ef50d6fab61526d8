"""Property: every rule body that reaches the database, from any path, passes the validator."""

from __future__ import annotations

import json
from pathlib import Path

from distill_fixtures import naive_session, write_transcript
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_distill_model import FakeMessagesAPI

from warden.config import load_settings
from warden.distill import heuristic
from warden.distill.admission import admit
from warden.distill.detectors import Finding
from warden.distill.rule_text import validate_rule_body
from warden.distill.rules_admin import add_rule
from warden.distill.service import distill_run
from warden.errors import UsageError
from warden.habits import HABITS_BY_WASTE
from warden.store.db import open_store
from warden.store.models import Rule, SessionRun

# Bodies near the edges: plausible sentences, sizes around the limits, and hostile characters.
HOSTILE = st.sampled_from(["\n", "\r", "\x00", "\x1b", "\u202e", "\u200b", "\u2028", "\ufeff", "\t", "\x85", " "])
WORDS = st.sampled_from(["Grep", "before", "reading", "files", "only", "the", "relevant", "tests", "é", "日本"])
BODIES = st.one_of(
    st.text(max_size=260),
    st.lists(st.one_of(WORDS, HOSTILE), min_size=1, max_size=60).map(" ".join),
    st.builds(lambda a, b, c: a + b + c, st.text(min_size=0, max_size=120), HOSTILE, st.text(max_size=120)),
)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _assert_store_clean(store) -> None:  # noqa: ANN001
    with store.session() as session:
        for rule in session.query(Rule):
            assert validate_rule_body(rule.body) == rule.body


def test_every_stored_body_passes_the_validator(tmp_path: Path) -> None:
    store = open_store(load_settings())
    path = write_transcript(tmp_path, naive_session(), session_id="prop")
    with store.session() as session:
        row = SessionRun(run_key="prop:main", session_id="prop", agent="coder", source_path=str(path))
        session.add(row)
        session.flush()
        run_id = row.id

    @FAST
    @given(st.lists(BODIES, min_size=0, max_size=3))
    @example(["Search with grep before opening any file you need."])
    def model_path(bodies: list[str]) -> None:
        api = FakeMessagesAPI(json.dumps([{"body": b} for b in bodies]))
        distill_run(store, load_settings(), run_id, distiller="anthropic", client=api.client())

    @FAST
    @given(BODIES, st.booleans(), st.one_of(st.none(), BODIES))
    @example("Prefer small focused edits over sweeping rewrites.", True, None)
    def manual_path(body: str, protected: bool, scope: str | None) -> None:
        try:
            with store.session() as session:
                add_rule(session, "coder", body, protected=protected, scope=scope)
        except UsageError:
            pass

    @FAST
    @given(st.lists(st.tuples(st.sampled_from(sorted(HABITS_BY_WASTE)), st.floats(0, 1e7)), max_size=8))
    def heuristic_path(kinds: list[tuple[str, float]]) -> None:
        proposals = heuristic.propose([Finding(kind, 1, saving) for kind, saving in kinds])
        with store.session() as session:
            admit(session, "coder", [p.body for p in proposals], origin="heuristic")

    model_path()
    manual_path()
    heuristic_path()
    _assert_store_clean(store)
    with store.session() as session:
        origins = {r.origin for r in session.query(Rule)}
    assert {"anthropic", "manual", "heuristic"} <= origins  # every path did write something
