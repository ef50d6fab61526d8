"""Recall scoring (pure): which earlier checkpoint, if any, a new prompt is about.

Score = the share of the prompt's information found in a checkpoint: the sum of the IDF of the
prompt terms the checkpoint contains, over the sum of the IDF of all prompt terms. IDF is
computed over the candidate pool (checkpoints of *other* sessions inside the age window), so
words every checkpoint shares ("file", "test") count little and rare ones ("limerick",
"데이터베이스") decide. A prompt term no candidate holds has the highest IDF and pulls the score
down: an unrelated prompt cannot ride on one common word.

The best score at or above :data:`RELEVANCE_THRESHOLD` wins, ties go to the most recent, and at
most one checkpoint is returned. The result always says which of three things happened:
``matched``, ``below_threshold`` (candidates were scored, none was relevant enough) or
``unscorable`` (the prompt has no usable terms, or there was no candidate to score).

Tokenizer: NFC + casefold; letter/digit runs of any script are words (accented Latin stays
whole: "configuración"); Han and Kana runs become character bigrams, Hangul runs syllable bigrams
(Korean attaches particles to words, so bigrams match "데이터베이스를" with "데이터베이스").
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import Iterable, Literal, Mapping

RELEVANCE_THRESHOLD = 0.45
MAX_TERM_CHARS = 64  # the index column's width
MAX_TERMS_PER_CHECKPOINT = 600
MAX_PROMPT_TERMS = 200  # a pasted log is not a better query; its first terms say what it is about
IDF_SCALE = 1_000_000

Status = Literal["matched", "below_threshold", "unscorable"]

_STOPWORDS = frozenset("""
a an and are as at be been but by can could did do does doing done for from had has have how i if in
into is it its it's me my no not now of on or our please so than that the their them then there these
they this those to up us was we were what when where which while who why will with would you your
yo tu el la los las un una unos unas de del al en y o que es por para con se lo le les su sus mi
como pero más mas este esta estos estas ese esa hay ser muy sin sobre también ya
le la les des du et est un une pour dans que qui sur pas au aux ce cette
der die das und ist nicht ein eine zu mit den dem von
""".split()) | frozenset("""
please continue resume keep going work task thing stuff let lets now again also just still more some any
get got want need like help make made do done go see look try use using new one first last next back way
sure ok okay thanks thank hi hello hey good great well right write create add update change start finish
can't don't it's i'm we're you're what's there's here tell show give take put run find
""".split()) | frozenset("""
puedes puede podrías podrias podemos favor otra otro vez sigue seguir sigamos continúa continua continuar
retoma retomar ahora necesito necesitamos quiero quieres ayuda ayúdame haz hacer hazlo cosa cosas tarea trabajo
trabajar todavía aún solo sólo algo algún alguna nuevo nueva primero último siguiente gracias hola bien bueno vale
escribe escribir crea crear añade añadir agrega agregar actualiza actualizar cambia cambiar empieza empezar termina
terminar dime muestra muéstrame dame pon ejecuta ejecutar busca buscar mira mirar ver usa usar intenta intentar
revisa revisar
""".split())  # generic words of prompts: they say how, not what about, so they never decide a match
# (the Spanish line: without it "¿puedes revisar otra vez …?" carried four unmatched words
# that outweighed five matched ones in a small pool)


def _script(ch: str) -> str:
    """'han_kana', 'hangul', 'word' or 'sep' for one (NFC, casefolded) character."""
    cp = ord(ch)
    if (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0xF900 <= cp <= 0xFAFF or 0x20000 <= cp <= 0x2FFFF
            or 0x3040 <= cp <= 0x30FF or 0x31F0 <= cp <= 0x31FF or 0xFF66 <= cp <= 0xFF9F):
        return "han_kana"
    if 0xAC00 <= cp <= 0xD7AF or 0x1100 <= cp <= 0x11FF or 0x3130 <= cp <= 0x318F:
        return "hangul"
    if ch.isalnum():
        return "word"
    if unicodedata.category(ch) == "Mn":  # a combining mark that NFC could not fold: part of its word
        return "word"
    return "sep"


def _fold_word(word: str) -> str | None:
    if len(word) < 2 or word in _STOPWORDS or word.isdigit():
        return None
    word = _fold_suffix(word)
    return None if word in _STOPWORDS else word[:MAX_TERM_CHARS]


def _fold_suffix(word: str) -> str:
    # light English suffix folding, the same on both sides ("tests" ~ "test", "streaming" ~
    # "stream"); ASCII words only, so accented words of other languages stay whole
    if word.isascii():
        if len(word) > 5 and word.endswith("ing"):
            word = word[:-3]
        elif len(word) > 4 and word.endswith("ed") and not word.endswith("eed"):
            word = word[:-2]
        elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
    return word


def tokenize(text: str) -> list[str]:
    """Recall terms of ``text`` in order (with repeats)."""
    text = unicodedata.normalize("NFC", text).casefold()
    terms: list[str] = []
    run: list[str] = []
    run_script = "sep"

    def flush() -> None:
        if not run:
            return
        chunk = "".join(run)
        if run_script == "word":
            term = _fold_word(chunk)
            if term:
                terms.append(term)
        elif len(chunk) == 1:
            terms.append(chunk)
        else:
            terms.extend(chunk[i:i + 2] for i in range(len(chunk) - 1))

    for ch in text:
        script = _script(ch)
        if script != run_script:
            flush()
            run = []
            run_script = script
        if script != "sep":
            run.append(ch)
    flush()
    return terms


def checkpoint_terms(text: str) -> set[str]:
    """The distinct terms a checkpoint is indexed under (capped: a checkpoint is a pointer)."""
    distinct = list(dict.fromkeys(tokenize(text)))
    return set(distinct[:MAX_TERMS_PER_CHECKPOINT])


@dataclass(frozen=True)
class Candidate:
    """A checkpoint as recall sees it: id, session, time, and its terms."""

    id: int
    session_id: str
    captured_at: datetime
    terms: frozenset[str]


@dataclass(frozen=True)
class RecallResult:
    status: Status
    reason: str  # one line, for the user
    checkpoint_id: int | None = None
    score: float = 0.0
    best_score: float = 0.0  # highest score seen, also when below the threshold
    candidates: int = 0  # pool size
    prompt_terms: int = 0

    @property
    def matched(self) -> bool:
        return self.status == "matched"


def idf(pool_size: int, doc_freq: int) -> float:
    """BM25-style smoothed IDF: always positive, highest for terms no candidate holds."""
    return math.log(1.0 + (pool_size - doc_freq + 0.5) / (doc_freq + 0.5))


def query_terms(prompt: str) -> list[str]:
    """The prompt's distinct terms, in order (at most :data:`MAX_PROMPT_TERMS`)."""
    return list(dict.fromkeys(tokenize(prompt)))[:MAX_PROMPT_TERMS]


def term_weights(terms: list[str], *, pool_size: int, doc_freq: Mapping[str, int]) -> dict[str, int]:
    """IDF of each prompt term in integer millionths: sums are then exact in Python and in SQL,
    so the indexed and the naive scorer agree to the last tie."""
    return {t: max(1, round(IDF_SCALE * idf(pool_size, doc_freq.get(t, 0)))) for t in terms}


def required_terms(weights: Mapping[str, int], threshold: float = RELEVANCE_THRESHOLD) -> set[str]:
    """Terms one of which any candidate reaching ``threshold`` must hold: the heaviest terms,
    until the remaining lighter ones together stay below the threshold's mass. Candidates
    holding none of them cannot match and need no scoring (exact pruning: the winner and its ties
    are unchanged; a below-threshold best score is reported among candidates that could match)."""
    total = sum(weights.values())
    need = threshold * total
    required: set[str] = set()
    rest = total
    for term, weight in sorted(weights.items(), key=lambda kv: (-kv[1], kv[0])):
        if rest < need:
            break
        required.add(term)
        rest -= weight
    return required


def score_candidates(terms: list[str], *, pool_size: int, postings: Mapping[int, Iterable[str]],
                     doc_freq: Mapping[str, int], threshold: float = RELEVANCE_THRESHOLD) -> dict[int, float]:
    """Score of every candidate holding at least one prompt term: the IDF mass of the prompt terms
    it holds over the IDF mass of all prompt terms (0–1)."""
    weights = term_weights(terms, pool_size=pool_size, doc_freq=doc_freq)
    total = sum(weights.values()) or 1
    required = required_terms(weights, threshold)
    return {cid: sum(weights.get(t, 0) for t in set(held)) / total for cid, held in postings.items()
            if required.intersection(held)}


def top_ties(scores: Mapping[int, float]) -> list[int]:
    """The candidates sharing the best score (recency decides among them)."""
    if not scores:
        return []
    best = max(scores.values())
    return sorted(cid for cid, score in scores.items() if score == best)


def decide(*, prompt_terms: int, pool_size: int, scores: Mapping[int, float], recency: Mapping[int, datetime],
           threshold: float = RELEVANCE_THRESHOLD) -> RecallResult:
    """The one answer: best score wins, ties to the most recent (``recency`` needs only the
    :func:`top_ties`), under the threshold nothing; and which of the three outcomes it was."""
    if not prompt_terms:
        return RecallResult("unscorable", "the prompt has no searchable words", candidates=pool_size)
    if pool_size == 0:
        return RecallResult("unscorable", "no checkpoints of other sessions in the recall window",
                            prompt_terms=prompt_terms)
    tied = top_ties(scores)
    if not tied:
        return RecallResult("below_threshold", f"no checkpoint holds enough of the prompt's words to reach the relevance "
                            f"threshold {threshold:.2f} ({pool_size} scored)",
                            candidates=pool_size, prompt_terms=prompt_terms)
    cid = max(tied, key=lambda c: (recency.get(c, datetime.min), c))
    score = scores[cid]
    if score < threshold:
        return RecallResult("below_threshold",
                            f"best of {pool_size} checkpoints scored {score:.2f}, under the relevance threshold {threshold:.2f}",
                            best_score=score, candidates=pool_size, prompt_terms=prompt_terms)
    return RecallResult("matched", f"checkpoint {cid} scored {score:.2f} (threshold {threshold:.2f}, {pool_size} candidates)",
                        checkpoint_id=cid, score=score, best_score=score, candidates=pool_size,
                        prompt_terms=prompt_terms)


def score_postings(prompt: str, *, pool_size: int, postings: Mapping[int, Iterable[str]],
                   doc_freq: Mapping[str, int], recency: Mapping[int, datetime],
                   threshold: float = RELEVANCE_THRESHOLD) -> RecallResult:
    """Score a prompt given, for the prompt's own terms only, their document frequencies over the
    pool and which candidates hold which of them (what an inverted index answers)."""
    terms = query_terms(prompt)
    scores = (score_candidates(terms, pool_size=pool_size, postings=postings, doc_freq=doc_freq, threshold=threshold)
              if terms else {})
    return decide(prompt_terms=len(terms), pool_size=pool_size, scores=scores, recency=recency, threshold=threshold)


def recall(prompt: str, candidates: list[Candidate], *, exclude_session: str | None = None,
           since: datetime | None = None, threshold: float = RELEVANCE_THRESHOLD) -> RecallResult:
    """Score ``prompt`` against full candidates (no index): the pool is every candidate of
    another session captured at or after ``since``."""
    pool = [c for c in candidates if c.session_id != exclude_session and (since is None or c.captured_at >= since)]
    query = set(query_terms(prompt))
    doc_freq: dict[str, int] = {}
    postings: dict[int, list[str]] = {}
    for cand in pool:
        held = [t for t in query if t in cand.terms]
        for t in held:
            doc_freq[t] = doc_freq.get(t, 0) + 1
        if held:
            postings[cand.id] = held
    return score_postings(prompt, pool_size=len(pool), postings=postings, doc_freq=doc_freq,
                          recency={c.id: c.captured_at for c in pool}, threshold=threshold)
