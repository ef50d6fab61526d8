"""Recall scoring: tokenizer, IDF overlap, threshold, three distinguishable outcomes, and the
indexed store path agreeing with the pure scorer."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from continuity_fixtures import RunBuilder, edit
from warden.config import load_settings
from warden.continuity.capture import CheckpointData, record_checkpoints
from warden.continuity.recall import Candidate, checkpoint_terms, recall, tokenize
from warden.continuity.service import recall_from_store, recover
from warden.store.db import open_store

NOW = datetime(2026, 11, 30, 12, 0)

TEXTS = {
    1: ("sess-ko", "데이터베이스 마이그레이션 스크립트를 작성하고 인덱스를 추가해 주세요. "
                   "Decided to use alembic for the migration.", NOW - timedelta(days=1)),
    2: ("sess-es", "Corregir la configuración de autenticación en el módulo de sesión; la validación "
                   "de contraseñas falla con caracteres acentuados.", NOW - timedelta(days=2)),
    3: ("sess-en", "Speed up the CSV exporter by streaming rows with a generator instead of a list.",
        NOW - timedelta(days=1)),
    4: ("sess-js", "Fix the flaky websocket reconnect test in the React client; jest timers leak.",
        NOW - timedelta(hours=5)),
    5: ("sess-ja", "ログイン画面のバグを修正して、テストを追加する。", NOW - timedelta(days=3)),
}


def pool() -> list[Candidate]:
    return [Candidate(cid, sid, when, frozenset(checkpoint_terms(text))) for cid, (sid, text, when) in TEXTS.items()]


def test_tokenizer_keeps_accented_latin_words_whole() -> None:
    terms = tokenize("Configuración de AUTENTICACIÓN, niño and café")
    assert "configuración" in terms and "autenticación" in terms and "niño" in terms and "café" in terms
    assert "de" not in terms  # stopword


def test_tokenizer_normalises_nfc_so_decomposed_accents_match() -> None:
    decomposed = "configuracio\u0301n"  # o + combining acute
    assert tokenize(decomposed) == tokenize("configuración")


def test_tokenizer_makes_bigrams_of_cjk_runs() -> None:
    assert tokenize("데이터베이스를") == ["데이", "이터", "터베", "베이", "이스", "스를"]
    assert tokenize("修正する") == ["修正", "正す", "する"]
    assert tokenize("Python으로 작성") == ["python", "으로", "작성"]


def test_korean_prompt_matches_its_checkpoint() -> None:
    result = recall("데이터베이스 마이그레이션에 인덱스 추가", pool(), exclude_session="new")
    assert result.status == "matched" and result.checkpoint_id == 1


def test_spanish_prompt_with_accents_matches_its_checkpoint() -> None:
    result = recall("arreglar la validación de contraseñas y la configuración de autenticación", pool(),
                    exclude_session="new")
    assert result.status == "matched" and result.checkpoint_id == 2


def test_a_spanish_prompt_phrased_as_a_request_matches_its_checkpoint() -> None:
    # Spanish request words ("puedes", "revisar", "otra vez", "por favor") are generic, like
    # English "please look again": they must not outweigh the words that say what it is about
    result = recall("¿Puedes revisar otra vez la validación de contraseñas y la configuración de autenticación, "
                    "por favor?", pool(), exclude_session="new")
    assert result.status == "matched" and result.checkpoint_id == 2
    assert recall("¿Puedes revisar otra vez, por favor?", pool(), exclude_session="new").status == "unscorable"


def test_japanese_prompt_matches_its_checkpoint() -> None:
    result = recall("ログイン画面のバグ", pool(), exclude_session="new")
    assert result.status == "matched" and result.checkpoint_id == 5


def test_english_prompt_matches_and_one_checkpoint_at_most() -> None:
    result = recall("make the csv exporter stream rows", pool(), exclude_session="new")
    assert result.status == "matched" and result.checkpoint_id == 3
    assert isinstance(result.checkpoint_id, int)


def test_short_unrelated_prompt_matches_nothing() -> None:
    result = recall("write a limerick about cats", pool(), exclude_session="new")
    assert result.status == "below_threshold" and result.checkpoint_id is None
    assert "threshold" in result.reason or "shares" in result.reason


def test_the_three_outcomes_are_distinguishable() -> None:
    matched = recall("csv exporter streaming", pool(), exclude_session="new")
    below = recall("write a limerick about cats", pool(), exclude_session="new")
    empty_prompt = recall("  ?! the a of  ", pool(), exclude_session="new")
    no_pool = recall("csv exporter streaming", [], exclude_session="new")
    assert [matched.status, below.status, empty_prompt.status, no_pool.status] == \
        ["matched", "below_threshold", "unscorable", "unscorable"]
    assert len({below.reason, empty_prompt.reason, no_pool.reason}) == 3


def test_a_session_never_recovers_its_own_checkpoint() -> None:
    result = recall("make the csv exporter stream rows", pool(), exclude_session="sess-en")
    assert result.checkpoint_id != 3


def test_age_window_excludes_old_checkpoints() -> None:
    result = recall("ログイン画面のバグ", pool(), exclude_session="new", since=NOW - timedelta(days=2))
    assert result.checkpoint_id != 5


def test_ties_go_to_the_most_recent() -> None:
    text = "Migrate the billing ledger to decimal amounts"
    old = Candidate(1, "a", NOW - timedelta(days=3), frozenset(checkpoint_terms(text)))
    new = Candidate(2, "b", NOW - timedelta(days=1), frozenset(checkpoint_terms(text)))
    other = Candidate(3, "c", NOW, frozenset(checkpoint_terms("Unrelated frontend styling work")))
    assert recall("billing ledger decimal", [old, new, other]).checkpoint_id == 2
    assert recall("billing ledger decimal", [new, old, other]).checkpoint_id == 2


def test_rare_words_outweigh_common_ones() -> None:
    common = "fix the test in the module"
    cands = [Candidate(i, f"s{i}", NOW, frozenset(checkpoint_terms(common + f" topic{i}"))) for i in range(20)]
    cands.append(Candidate(99, "s99", NOW - timedelta(days=1),
                           frozenset(checkpoint_terms("fix the test for the quaternion interpolation"))))
    result = recall("fix the quaternion interpolation test", cands)
    assert result.checkpoint_id == 99


# ---------------------------------------------------------------- the store path


def _store_with_runs():
    store = open_store(load_settings())
    with store.session() as s:
        for cid, (sid, text, when) in TEXTS.items():
            b = RunBuilder(session_id=sid, cwd=f"/w/{sid}", start=when - timedelta(minutes=10)).prompt(text)
            b.turn(60_000, "Working on it.", [edit(f"/w/{sid}/main.py")])
            record_checkpoints(s, None, b.build())
    return store


@pytest.mark.parametrize("prompt, expected", [
    ("데이터베이스 마이그레이션에 인덱스 추가", "sess-ko"),
    ("arreglar la validación de contraseñas", "sess-es"),
    ("write a limerick about cats", None),
])
def test_indexed_recall_agrees_with_the_pure_scorer(prompt: str, expected: str | None) -> None:
    store = _store_with_runs()
    with store.session() as s:
        from sqlalchemy import select

        from warden.store.models import Checkpoint
        rows = list(s.scalars(select(Checkpoint)))
        cands = [Candidate(r.id, r.session_id, r.captured_at,
                           frozenset(checkpoint_terms(CheckpointData.from_row(r).searchable_text()))) for r in rows]
        naive = recall(prompt, cands, exclude_session="new", since=NOW - timedelta(days=7))
        indexed = recall_from_store(s, prompt, exclude_session="new", window_days=7, now=NOW)
        assert (indexed.status, indexed.checkpoint_id) == (naive.status, naive.checkpoint_id)
        assert indexed.score == pytest.approx(naive.score)
        got = s.get(Checkpoint, indexed.checkpoint_id).session_id if indexed.checkpoint_id else None
    assert got == expected


def test_recover_fences_the_match_and_excludes_the_own_session() -> None:
    store = _store_with_runs()
    settings = load_settings()
    with store.session() as s:
        hit = recover(s, settings, prompt="csv exporter streaming rows", session_id="new", cwd="/w/sess-en", now=NOW)
        own = recover(s, settings, prompt="csv exporter streaming rows", session_id="sess-en", cwd="/w/sess-en", now=NOW)
    assert hit.result.status == "matched" and hit.checkpoint.session_id == "sess-en"
    assert hit.block.startswith("<<<warden-recovered-data id=") and "CSV exporter" in hit.block
    assert own.checkpoint is None or own.checkpoint.session_id != "sess-en"


def test_pruning_never_changes_the_answer() -> None:
    """Exact pruning (candidates holding no 'required' term are not scored) against brute force."""
    import random

    from warden.continuity.recall import decide, idf, query_terms

    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(40)]
    for trial in range(200):
        cands = [Candidate(i, f"s{i}", NOW - timedelta(hours=rng.randint(0, 5)),
                           frozenset(rng.sample(vocab, rng.randint(1, 12)))) for i in range(rng.randint(1, 30))]
        prompt = " ".join(rng.sample(vocab, rng.randint(1, 8)))
        got = recall(prompt, cands)
        terms = query_terms(prompt)
        df = {t: sum(t in c.terms for c in cands) for t in terms}
        weights = {t: max(1, round(1_000_000 * idf(len(cands), df[t]))) for t in terms}
        total = sum(weights.values())
        brute = {c.id: sum(weights[t] for t in terms if t in c.terms) / total
                 for c in cands if any(t in c.terms for t in terms)}
        want = decide(prompt_terms=len(terms), pool_size=len(cands), scores=brute,
                      recency={c.id: c.captured_at for c in cands})
        assert (got.status, got.checkpoint_id) == (want.status, want.checkpoint_id), trial


def test_generic_prompt_words_do_not_sink_a_real_match() -> None:
    only = [Candidate(1, "a", NOW, frozenset(checkpoint_terms("Make the CSV export stream rows")))]
    result = recall("please continue the csv export streaming work", only, exclude_session="new")
    assert result.status == "matched" and result.checkpoint_id == 1
    assert recall("write a limerick about cats", only).status == "below_threshold"


def test_reindex_rebuilds_the_same_index() -> None:
    from sqlalchemy import select

    from warden.continuity.service import reindex
    from warden.store.models import CheckpointTerm

    store = _store_with_runs()
    with store.session() as s:
        before = sorted(s.execute(select(CheckpointTerm.checkpoint_id, CheckpointTerm.term)).all())
        assert reindex(s) == len(TEXTS)
    with store.session() as s:
        assert sorted(s.execute(select(CheckpointTerm.checkpoint_id, CheckpointTerm.term)).all()) == before


def test_indexed_recall_and_reingest_on_every_database(any_store) -> None:
    from sqlalchemy import func, select

    from warden.store.models import Checkpoint

    for cid, (sid, text, when) in TEXTS.items():
        run = RunBuilder(session_id=sid, cwd=f"/w/{sid}", start=when).prompt(text) \
            .turn(60_000, "Working on it.", [edit(f"/w/{sid}/main.py")]).build()
        with any_store.session() as s:
            record_checkpoints(s, None, run)
            record_checkpoints(s, None, run)
    with any_store.session() as s:
        assert s.scalar(select(func.count()).select_from(Checkpoint)) == len(TEXTS)
        ko = recall_from_store(s, "데이터베이스 마이그레이션에 인덱스 추가", exclude_session="x", window_days=7, now=NOW)
        es = recall_from_store(s, "arreglar la validación de contraseñas", exclude_session="x", window_days=7, now=NOW)
        cats = recall_from_store(s, "write a limerick about cats", exclude_session="x", window_days=7, now=NOW)
        own = recall_from_store(s, "데이터베이스 마이그레이션에 인덱스 추가", exclude_session="sess-ko", window_days=7,
                                now=NOW)
        assert s.get(Checkpoint, ko.checkpoint_id).session_id == "sess-ko"
        assert s.get(Checkpoint, es.checkpoint_id).session_id == "sess-es"
        assert cats.status == "below_threshold"
        assert own.checkpoint_id is None or s.get(Checkpoint, own.checkpoint_id).session_id != "sess-ko"
