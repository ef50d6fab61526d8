"""Sanitising untrusted text where it is shown (terminal, MEMORY.md, HTML). Pure."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Mapping
from functools import lru_cache

from warden.strict_json import MAX_EXACT_INT

# C0 controls except tab and newline (CR included), DEL, C1 controls, the format characters
# (Unicode category Cf: bidi controls, zero-width characters, the BOM, the invisible "tag"
# characters that can spell hidden text), the whole Default_Ignorable_Code_Point set (the soft
# hyphen, the combining grapheme joiner, Khmer inherent vowels, Mongolian and other variation
# selectors, Hangul fillers, and the ranges Unicode reserves for more of them: a font draws none
# of these, so one inside "cur\u180bl" hides the word from a screen), the Braille blank U+2800 (a
# space that is no whitespace), and lone surrogates (a file name that is not UTF-8, as
# os.fsdecode gives it; they cannot even be encoded): none of them may reach a screen or a memory
# file. One regex: it runs on every transcript line the parser keeps.
_SURROGATES = "\ud800-\udfff"
_UNSAFE = re.compile(
    "[" + _SURROGATES + "\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2"
    "\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u206f\u2800\u3164"
    "\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code > 0xFFFF:  # JSON escapes are UTF-16 units: a surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def escape_unsafe_in_json(text: str) -> str:
    """JSON text with bidi, zero-width, invisible and control characters written as \\uXXXX
    escapes: the same data for a program, nothing that reorders or hides text on a terminal.
    (They can only occur inside JSON strings, where an escape means the same character.)"""
    return _UNSAFE.sub(lambda m: _json_escape(m.group()), text)


_SURROGATE = re.compile(f"[{_SURROGATES}]")


def holds_surrogate(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate — one of :func:`first_unsafe_char`'s: an escaped
    ``\\ud800`` in JSON, a file-name byte ``os.fsdecode`` could not decode. No UTF-8 holds one, so
    such a string is no text, and no hash can be taken of it."""
    return _SURROGATE.search(text) is not None


def first_unsafe_char(text: str) -> str | None:
    """The first control, bidi, zero-width or otherwise invisible character in ``text``, or None."""
    found = _UNSAFE.search(text)
    return found.group() if found else None


# Controls, format characters, surrogates, private-use and unassigned code points: what
# str.isprintable refuses apart from the separators (and str.isprintable is fast in C).
_UNDRAWN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})


def first_undrawn_char(text: str) -> str | None:
    """The first character of ``text`` a reader cannot see as what it is: one of
    :func:`first_unsafe_char`'s, or any control, format, private-use (a font may draw anything
    there) or unassigned code point (a later Unicode may make it invisible). For text where it is
    written (a rule, a ledger field), not for the parser's hot path."""
    if text.isprintable() and _UNSAFE.search(text) is None:
        return None
    return next((ch for ch in text if _UNSAFE.match(ch) or unicodedata.category(ch) in _UNDRAWN_CATEGORIES), None)


def _shown_or_dropped(match: re.Match[str]) -> str:
    """A byte a file name could not decode (surrogate escape U+DC80–DCFF) as visible ``\\xNN``;
    any other unsafe character dropped."""
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else ""


def strip_controls(text: str, *, keep_newlines: bool = True) -> str:
    """Remove control, bidi and zero-width characters (an undecodable file-name byte is shown as
    ``\\xNN`` instead); optionally flatten newlines and tabs."""
    clean = _UNSAFE.sub(_shown_or_dropped, text)
    if not keep_newlines:
        clean = clean.replace("\n", " ").replace("\t", " ")
    return clean


def one_line(text: str, limit: int) -> str:
    """``text`` as one short line: controls and invisible characters removed, whitespace runs
    (newlines included) made one space, cut to ``limit`` characters with an ellipsis."""
    text = " ".join(strip_controls(str(text)).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Cyrillic, Greek and Armenian letters drawn like Latin ones, Latin small capitals and IPA
# letters (ᴄᴜʀʟ, ɪɢɴᴏʀᴇ, ɑ, ı) and Cherokee capitals (Ꮪystem), which NFKC keeps apart: a screen
# for words ("system:", "ssh") reads them as the Latin letter they imitate; and the dashes NFKC
# keeps apart from "-" (hyphen, en and em dash, minus: "sk‐ant‐api03‐…" is a key). One character
# for one, so positions in the translated copy line up with the original.
LATIN_LOOKALIKES = str.maketrans(
    "аеорсухѕіјһԁӏѵԝԛмтпАВЕКМНОРСТУХЅІЈҺαορυντικεΑΒΕΗΙΚΜΝΟΡΤΥΧΖҮԚԜβχօսհոզμ"
    "ᴀʙᴄᴅᴇꜰɢʜɪᴊᴋʟᴍɴᴏᴘꞯʀꜱᴛᴜᴠᴡʏᴢɑɡıȷɩү"
    "ᎪᏴᏟᎠᎬᏀᎻᎥᏂᏦᏞᎷᏢᎡᏚᎢᏙᏉᏔᏃꭺᏼꮯꭰꭼꮐꮋꭵꮒꮶꮮꮇꮲꭱꮪꭲꮩꮙꮤꮓ"
    "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2e3a\u2e3b\ufe58",
    "aeopcyxsijhdlvwqmtnABEKMHOPCTYXSIJHaopuvtikeABEHIKMNOPTYXZYQWBxouhnqu"
    "abcdefghijklmnopqrstuvwyzagijiy"
    "ABCDEGHiJKLMPRSTVVWZABCDEGHiJKLMPRSTVVWZ"
    "----------")
_LATIN_LOOKALIKE = re.compile("[" + re.escape("".join(map(chr, LATIN_LOOKALIKES))) + "]")


@lru_cache(maxsize=4096)
def fold_char(char: str) -> str:
    """``char`` as the plain letters or signs it imitates, for a screen to match (never for
    showing: it loses marks): compatibility forms (full-width, mathematical) decomposed, marks
    dropped ("ìgnòre", "r̶m"), every dash as "-", look-alike letters as the Latin one."""
    if char.isascii():
        return char
    out = []
    for part in unicodedata.normalize("NFKD", char):
        if unicodedata.category(part) == "Mn" or unicodedata.combining(part):
            continue
        out.append("-" if unicodedata.category(part) == "Pd" else part.translate(LATIN_LOOKALIKES))
    return "".join(out)


def count_text(value: object) -> str:
    """A token count for people: thousands separated; ±∞ for the open end of an interval; '—' for
    none, and for what no count can be (NaN, an integer past a double's range, not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "—"
    if isinstance(value, float) and math.isinf(value):
        return "∞" if value > 0 else "−∞"
    if isinstance(value, int) and abs(value) > MAX_EXACT_INT or isinstance(value, float) and math.isnan(value):
        return "—"
    return f"{value:,.0f}"


def compact_count(value: object) -> str:
    """A token count in little room (a table cell, a chart tick): three significant digits and a
    k/M/G suffix — 950, 1.23k, 45k, 1.25M; ±∞ and '—' as :func:`count_text` says them."""
    exact = count_text(value)
    if not exact[-1].isdigit():  # ∞, −∞ or —
        return exact
    number = float(value)  # type: ignore[arg-type]  # count_text vouched it is a finite number
    for size, suffix in ((1.0, ""), (1e3, "k"), (1e6, "M")):
        scaled = float(f"{number / size:.3g}")
        if abs(scaled) < 1000:  # else it rounds up into the next unit (999,999 is 1M, not 1e+03k)
            return f"{scaled:g}{suffix}"
    scaled = float(f"{number / 1e9:.3g}")
    return (f"{scaled:g}" if abs(scaled) < 1000 else f"{scaled:,.0f}") + "G"


def counted(count: int, noun: str) -> str:
    """``count`` and ``noun``, plural unless one: "1 run", "3 consecutive runs"."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


# Markdown/HTML that would give a one-line memory entry a structure of its own: an HTML tag,
# comment or declaration (an unclosed "<!--" hides the rest of the file), a code fence, or a
# block marker at the start (a heading, quote, table or nested list inside the bullet).
_HTML_OPEN = re.compile(r"<(?=[A-Za-z/!?])")
_FENCE = re.compile(r"```|~~~")
_LEADING_BLOCK = re.compile(r"^(?:[#>|*+=-]|\d+[.)](?:\s|$))")


def markup_problem(text: str) -> str | None:
    """Why ``text`` cannot be a one-line memory entry as it is, or None."""
    if _HTML_OPEN.search(text) or "-->" in text:
        return "contains HTML (a tag or comment)"
    if _FENCE.search(text):
        return "contains a code fence (``` or ~~~)"
    if _LEADING_BLOCK.match(text):
        return "starts with a Markdown block marker (#, >, |, a list marker)"
    return None


def inline_markdown(text: str) -> str:
    """``text`` made inert inside one Markdown list item: HTML openers escaped as entities,
    fences broken, a leading block marker backslash-escaped. A no-op for text that passes
    :func:`markup_problem` (what the validators admit); this guards rows written before them."""
    clean = _HTML_OPEN.sub("&lt;", text).replace("-->", "--&gt;")
    clean = _FENCE.sub(lambda m: "\\" + m.group(0)[0] + m.group(0)[1:], clean)
    return "\\" + clean if _LEADING_BLOCK.match(clean) else clean


# ---------------------------------------------------------------- secrets

REDACTED = "[REDACTED]"

# A pattern's gate: clauses of lowercase literals; the pattern runs only where each clause has one
# of its literals in the text's gate copy (_gate_text, made once, before the first pattern). Sound
# where every match of the pattern holds a literal of each clause (in any case, under "(?i)"), and
# no earlier pattern's redaction can add one: a redaction writes "[REDACTED]" beside what was
# there, "Bearer " for the "bearer" it found, or "[REDACTED PRIVATE KEY]" where the first pattern
# found "PRIVATE KEY", so a later gate's literal holds no space or bracket and is no substring of
# "redacted". tests/test_continuity_capture.py checks each of these.
_Gate = tuple[tuple[str, ...], ...]

# Keys and tokens recognisable by their form alone (a provider's prefix and length): a match is
# a secret whatever the words around it, unlike "password …" or "token=…", which can also be prose.
# A key starts a word, or (prefix by prefix) is glued to the word before it ("/home/u/othersk-ant-
# api03-…", "abcghp_…", "x_AKIA…") where its form is one no word or identifier has: a prefix no
# word holds (github_pat_, glpat-, whsec_, GOCSPX-), the part after it too (sk-ant-api03-; Slack's
# xoxb-<digits>- and PyPI's pypi-AgE are needed at a word's start too), a body of the provider's
# full length (ghp_ and 36 letters, npm_ 36, AIza 35, ya29. 60 and more), AKIA/ASIA not inside a
# run of capitals and digits. Not: sk- ("task-list-…"), the other AWS ids, sk_live_/pk_test_
# ("desk_test_…"), hf_ ("shelf_…"), SG. ("MSG.…"), a JWT.
# Linear: a glued prefix's look-ahead reads at most ~60 characters. Each shape starts with its
# prefix's letters (the word-start test is a look-behind after them), so a search skips to them.
# Each gated (_Gate) on its prefixes, which a match of the case-sensitive shape holds as written
# (the JWT on its second part's ".eyJ", PyPI's on "pypi-AgE").
_KEY_SHAPES: list[tuple[re.Pattern[str], _Gate]] = [
    (re.compile(r"(?:AKIA|ASIA)(?<![A-Z0-9]....)[0-9A-Z]{16}(?![A-Za-z0-9])"), (("akia", "asia"),)),
    (re.compile(r"\b(?:AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b"), (("agpa", "aida", "aroa", "anpa", "anva", "aipa"),)),
    (re.compile(r"sk-(?:(?<=\bsk-)|(?=ant-[a-z]{2,8}\d\d-))(?:ant-)?[A-Za-z0-9_\-]{16,}"), (("sk-",),)),
    (re.compile(r"gh[pousr]_(?:(?<=\bgh._)|(?=[A-Za-z0-9]{36}))[A-Za-z0-9]{20,}"
                r"|github_pat_(?:(?<=\bgithub_pat_)|(?=[A-Za-z0-9]{20}))[A-Za-z0-9_]{20,}"),
     (("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),)),
    # Slack: an id or two of digits, then the body (xoxb-<digits>-<digits>-<alnum>), or a rotating
    # token's one digit and a long body (xoxe-1-…); "xoxo-friends-forever-2024" is no token
    # and an app-level token (xapp-1-A0123456789-<digits>-<hex>)
    (re.compile(r"xox[abposre]-(?:\d{1,20}-\d{1,20}-|\d{8,20}-)[A-Za-z0-9\-]{8,}|xox[abposre]-\d-[A-Za-z0-9]{24,}"
                r"|xapp-(?<=\bxapp-)\d-[A-Za-z0-9\-]{20,}"),
     (("xox", "xapp-"),)),
    (re.compile(r"AIza(?:(?<=\bAIza)|(?=[0-9A-Za-z_\-]{35}(?![0-9A-Za-z_\-])))[0-9A-Za-z_\-]{30,}"), (("aiza",),)),
    (re.compile(r"glpat-[A-Za-z0-9_\-]{16,}"), (("glpat-",),)),
    (re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"), (("_live_", "_test_"),)),
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"), ((".eyj",),)),  # JWT
    (re.compile(r"npm_(?:(?<=\bnpm_)|(?=[A-Za-z0-9]{36}(?![A-Za-z0-9])))[A-Za-z0-9]{20,}|hf_(?<=\bhf_)[A-Za-z0-9]{20,}"
                r"|pypi-AgE[A-Za-z0-9_\-]{50,}"  # a PyPI token's macaroon; not "pypi-mirror-internal-cache"
                # Groq (gsk_ and 52), Replicate (r8_ and 37), xAI (xai- and 80), DigitalOcean (dop_v1_, doo_v1_,
                # dor_v1_ and 64 hex), Square (sq0atp-, sq0csp-), a Google OAuth refresh token (1//0…): each
                # starting a word, its body a run no word or identifier has ("xai-grok-notes" is none)
                r"|gsk_(?<=\bgsk_)[A-Za-z0-9]{32,}|r8_(?<=\br8_)[A-Za-z0-9]{32,}|xai-(?<=\bxai-)[A-Za-z0-9]{40,}"
                r"|do[opr]_v1_(?<=\bdo._v1_)[a-f0-9]{40,}|sq0(?:atp|csp)-(?<=\bsq0...-)[A-Za-z0-9_\-]{22,}"
                r"|1//0(?<![\w/\-]1//0)[A-Za-z0-9_\-]{30,}"),
     (("npm_", "hf_", "pypi-age", "gsk_", "r8_", "xai-", "dop_v1_", "doo_v1_", "dor_v1_", "sq0atp-", "sq0csp-",
       "1//0"),)),
    (re.compile(r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"), (("sg.",),)),  # SendGrid
    (re.compile(r"whsec_[A-Za-z0-9+/=_\-]{16,}"), (("whsec_",),)),  # Stripe webhook signing secret
    (re.compile(r"GOCSPX-[A-Za-z0-9_\-]{16,}"), (("gocspx-",),)),  # Google OAuth client secret
    # Google OAuth access token
    (re.compile(r"ya29\.(?:(?<=\bya29\.)|(?=[A-Za-z0-9_\-]{60}))[A-Za-z0-9_\-]{16,}"), (("ya29.",),)),
]


def holds_key(text: str) -> bool:
    """Whether ``text`` holds a key or token recognisable by its form (see :data:`_KEY_SHAPES`),
    also one that invisible or full-width characters disguise (see :func:`_disguise_folded`)."""
    forms = [text, *filter(None, [_disguise_folded(text)])]
    return any(shape.search(form) for form in forms for shape, _gate in _KEY_SHAPES)


class _CommandFlag:
    """A password a client takes as a flag (``mysql -pSECRET``, ``docker login -p SECRET``): the
    flag's value after the command in the same command line (no newline, ``|``, ``;`` or ``&``
    between). One left-to-right scan: a lazy ``command[^|;&]*?-p`` regex, retried from every
    command word, was quadratic ("mysql " * 20000 took minutes). ``sub`` as a pattern's."""

    def __init__(self, command: str, flag: str, value: str) -> None:
        self._scan = re.compile(rf"(?P<command>{command})|(?P<pre>{flag})(?P<val>{value})|[\n|;&]")
        self._command = re.compile(command)

    def sub(self, repl: str | Callable[[str], str], text: str) -> str:
        if self._command.search(text) is None:  # most text names no such client: skip the per-separator scan
            return text
        armed = False  # a command word seen since the last command separator

        def one(match: re.Match[str]) -> str:
            nonlocal armed
            if match.group("command"):
                armed = True
            elif match.group("val") is not None and armed:
                armed = False
                return match.group("pre") + (repl if isinstance(repl, str) else repl(match.group("val")))
            elif match.group("val") is None:
                armed = False
            return match.group(0)

        return self._scan.sub(one, text)


_Patterns = list[tuple[re.Pattern[str] | _CommandFlag, str, _Gate]]


# "password" in other languages, as a name given a value ("Passwort: …", "contraseña = …",
# DB_SENHA=…): German, French (written with spaces, "mot de passe", it has a pattern of its own),
# Spanish, Portuguese, Dutch, Swedish, Norwegian, Danish, Finnish, Polish, Czech, Hungarian,
# Turkish, Russian, Japanese, Chinese, Korean. Lowercase: the quick screen reads lowercased text.
_PASSWORD_LABELS = ("passwort", "kennwort", "mot_de_passe", "mot-de-passe", "contraseña", "contrasena", "senha",
                    "wachtwoord", "lösenord", "losenord", "passord", "adgangskode", "salasana", "hasło", "haslo",
                    "heslo", "jelszó", "jelszo", "şifre", "sifre", "пароль", "パスワード", "密码", "密碼", "비밀번호")
_PASSWORD_WORDS = "|".join(map(re.escape, _PASSWORD_LABELS))
# What every name of a secret below holds: password and passwd hold "passw" (so does "passwort"),
# every *key "key", client secret "secret" ("pass" alone is none: "passed", "bypass").
_SECRET_NAME_WORDS = ("passw", "passphrase", "pwd", "secret", "token", "key",
                      *(w for w in _PASSWORD_LABELS if "passw" not in w))

# A secret named in words, as prose, notes and tables write it: "API key: 8f14…", "my api key is
# 8f14…", "auth token 8f14…", "pw=…", "password -> …", "password 'two words'", 'password = """…"""',
# "| password | hunter2 |", "**Token:** `…`". A label (any case; a space, "_" or "-" between the
# words of one) starts a word and ends one. What it takes depends on how surely it names a secret:
# - a password's name or a key's or token's two words (_STRONG_LABEL) after ":", "=", "==", "->" or
#   "=>": the value, quoted (whole, triple quotes too) or one run of 4+ characters; after a space, a
#   quoted value; as a Markdown table's cell, the next cell (one word, the row's last one too) when
#   it has a digit or a symbol (not a header's "| Password | Notes |");
# - any label, "key", "token", "secret" and "bearer" alone too (_WEAK_LABEL), after one of those
#   signs, "is", a cell bar, or a space (then 20 characters at least): a value that looks like a key
#   (_KEY_LIKE), not a word ("the key is to read less", "primary key: id", "token budget of 2000",
#   "sort key=lambda x: x", "api key rotation", "token count: 1234").
# Not "-p hunter2" after mysql: with a space, mysql's -p asks for the password and "hunter2" is the
# database (mysql -pSECRET, sshpass -p and docker login -p are patterns of their own; psql's -p is
# the port). Not a PIN: "pin 1234" is too often no secret.
# Linear: a label starts once per word, and no value's run holds a separator, so no run is read
# by more than the label before it (a quoted value is read at most 200 characters).
_STRONG_LABEL = (r"pass(?:word|wd|code)|pw|api[ \t_\-]?(?:key|token|secret)|secret[ \t_\-]?key"
                 r"|access[ \t_\-]?(?:key|token)|auth[ \t_\-]?(?:key|token)|client[ \t_\-]?secret"
                 r"|(?:bearer|refresh|session)[ \t_\-]?token")
_WEAK_LABEL = r"pass(?:word|wd|code|phrase)|pw|key|token|secret|bearer"
_LABEL_END = r"(?![A-Za-z0-9])[\"'*_`]{0,2}"  # the word ends; a closing quote or Markdown mark may follow
_ASSIGN = r"[ \t]*(?:==?|:|->|=>)[*_`]{0,2}[ \t]*"
_IS = r"[ \t]+is(?=[\s:=\-])[ \t]*(?:[:=\-][ \t]*)?"
# Key-like: 16+ characters of a key's alphabet (base64, base64url, hex) and "=" padding, with two
# digits (or one in 40 characters of base64, an AWS secret key's form) and a letter (a number is a
# count), a run of 12 letters and digits (not "claude-3-5-sonnet-20241022", "a1/b2/c3/d4/e5/f6/g7"),
# and ending where a word ends (not "build_cache_2024.json", "host:8080").
_KEY_LIKE = (r"(?=[A-Za-z0-9+/_\-]*[0-9][A-Za-z0-9+/_\-]*[0-9]|[A-Za-z0-9+/]{40}(?![A-Za-z0-9+/_\-]))"
             r"(?=[A-Za-z0-9+/_\-]*[A-Za-z])(?=[A-Za-z0-9+/_\-]*?[A-Za-z0-9+]{12})"
             r"[A-Za-z0-9+][A-Za-z0-9+/_\-]{15,}={0,2}"
             r"(?=\Z|[\s\"'`,;)\]}|>*]|[.!?:](?:\Z|[\s\"'`)\]}*]))")
_LABELLED_VALUE = re.compile(
    r"(?i)(?P<pre>(?<![A-Za-z0-9])(?:"
    rf"(?:{_STRONG_LABEL}){_LABEL_END}(?:{_ASSIGN}|[ \t]+(?=[\"'`]))(?P<q>\"\"\"|'''|[\"'`])?"
    rf"|(?:{_WEAK_LABEL}){_LABEL_END}(?:{_ASSIGN}|{_IS}|[ \t]*\|[ \t]*|[ \t]+(?=[\"'`]?[A-Za-z0-9+/_\-]{{20}}))"
    r"[\"'`]?(?P<key>))"
    rf"|\|[ \t]*(?:{_STRONG_LABEL})[ \t]*\|[ \t]*(?P<cell>))"
    r"(?P<val>(?(q)[^\"'\n]{1,200}(?=(?P=q))|(?(key)" + _KEY_LIKE + r"|(?(cell)"
    r"(?=[^\s|\"'`]*[0-9!@#$%^&*])[^\s|\"'`]{4,}(?=[ \t]*(?:\||\n|\Z))|[^\s\"'`,;|]{4,}))))")
# "my passphrase is correct horse battery staple": a passphrase is words, to the end of its clause
# (a newline, a quote, a cell bar, or ".", "!", "?", ";", "," before a space), at most 200 characters
_PASSPHRASE_VALUE = re.compile(
    r"(?i)(?P<pre>(?<![A-Za-z0-9])pass[ \t_\-]?phrase" + _LABEL_END
    + r"(?:[ \t]*(?:==?|:|->|=>)|[ \t]+is(?=[\s:=\-])(?:[ \t]*[:=\-])?)[*_`]{0,2}[ \t]*[\"'`]?)"
    r"(?P<val>(?=[^\n\r\"'`|]{4})[^\s\"'`|](?:[^\n\r\"'`|.!?;,]|[.!?;,](?=[^\s\"'`|])){0,199}(?<=\S))")
# What every labelled value's match holds (its label's), lowercased: the gate, and the quick screen's
_LABEL_WORDS = ("pass", "pw", "key", "token", "secret", "bearer")
# The quick screen's copies: the patterns as they read lowercased text, not "(?i)": that also reads
# "ſ" and "ı" as letters (a key "…20241022ſ" ends at the "ſ"), so the screen reads its text as the
# gates do (_gate_text), with those letters folded.
_LABELLED_SCREEN = re.compile(_LABELLED_VALUE.pattern.removeprefix("(?i)"))
_PASSPHRASE_SCREEN = re.compile(_PASSPHRASE_VALUE.pattern.removeprefix("(?i)"))
# Where either can start: the first word of a label of _STRONG_LABEL's or _WEAK_LABEL's, a cell's bar
_LABEL_STARTS = ("pass", "pw", "key", "token", "secret", "bearer", "api", "access", "auth", "client", "refresh",
                 "session", "|")

# Order matters: whole private-key blocks first, then structured credentials, then key=value.
# Linear time on any input: a pattern starts once per word (a look-behind, not \b, which holds
# inside "a-a-a-…"), and "a word holding a secret's name" is a look-ahead then a possessive run
# (not [\w-]*name[\w-]*, which rescans the word's rest from every name inside it).
# The structured ones name a secret by its form or its place (a URL's password, a header): they
# hold in any text, an API's error message included.
# Each with its gate (_Gate): the literals every match holds, lowercased (":" or "=" for [:=]);
# "(?i)" matches them in any case, which the gate copy reads as lowercase letters.
_STRUCTURED_SECRET_PATTERNS: _Patterns = [
    # PGP armour names its block: "-----BEGIN PGP PRIVATE KEY BLOCK-----"
    (re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
                r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)", re.S),
     "[REDACTED PRIVATE KEY]", (("private key",),)),  # first: no redaction before it adds one
    # scheme://user:password@host → keep user and host (redis://:password@host has no user)
    (re.compile(r"(?P<pre>(?<![a-zA-Z0-9+.\-])[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@'\"]*:)(?P<pw>[^\s@/'\"]+)(?=@)"),
     r"\g<pre>" + REDACTED, (("://",), ("@",))),  # "@": its look-ahead
    # webhook URLs are credentials themselves
    (re.compile(r"(?P<pre>\bhooks\.slack\.com/(?:services|workflows)/)[A-Za-z0-9/_\-]+"), r"\g<pre>" + REDACTED,
     (("hooks.slack.com/",),)),
    (re.compile(r"(?P<pre>\bdiscord(?:app)?\.com/api/webhooks/)[A-Za-z0-9/_\-]+"), r"\g<pre>" + REDACTED,
     (("discord",), (".com/api/webhooks/",))),  # on either side of "(?:app)?"
    (re.compile(r"(?i)\b(?P<pre>(?:set-)?cookie\s*:\s*)[^\s;'\"]+(?:;[ \t]*[^\s;'\"]+)*"), r"\g<pre>" + REDACTED,
     (("cookie",), (":",))),
    (re.compile(r"(?i)\b(?P<pre>(?:authorization|proxy-authorization)\s*[:=]\s*)(?:bearer|basic|token)?\s*[A-Za-z0-9._~+/=\-]{8,}"),
     r"\g<pre>" + REDACTED, (("authorization",), (":", "="))),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=\-]{8,}"), "Bearer " + REDACTED, (("bearer",),)),
    # an Azure shared access signature (…?sv=…&sig=…): the signature is the credential
    (re.compile(r"(?i)(?P<pre>[?&]sig=)[A-Za-z0-9%+/=_.~\-]{8,}"), r"\g<pre>" + REDACTED, (("sig=",),)),
    *((shape, REDACTED, gate) for shape, gate in _KEY_SHAPES),
]
_SECRET_PATTERNS: _Patterns = [
    *_STRUCTURED_SECRET_PATTERNS,
    # passwords given to clients on their command line: mysql -pSECRET, sshpass -p SECRET,
    # curl -u user:SECRET (--user too)
    (_CommandFlag(r"\b(?:mysql|mariadb|mysqldump|mysqladmin)\b", r"\s-p", r"[^\s\"']{3,}"), REDACTED,
     (("mysql", "mariadb"), ("-p",))),  # a command word (mysqldump holds "mysql"), then its flag
    (re.compile(r"(?P<pre>\bsshpass\s+-p\s*)(?P<val>\S+)"), r"\g<pre>" + REDACTED, (("sshpass",), ("-p",))),
    (_CommandFlag(r"\bdocker\s+login\b", r"\s-p\s*", r"[^\s\"']+"), REDACTED,
     (("docker",), ("login",), ("-p",))),  # the command's words, then its flag
    (re.compile(r"(?P<pre>(?:\s-u|\s--user)[ =]?[\"']?[^\s:\"']+:)(?P<val>[^\s\"'@]+)"), r"\g<pre>" + REDACTED,
     (("-u",), (":",))),  # "--user" holds "-u"
    # "password is hunter22", and with a sign after "is": "is: …", "is = …", "is - …"
    (re.compile(r"(?i)\b(?P<pre>(?:password|passphrase)\s+is(?=[\s:=\-])\s*[:=\-]?\s*)(?P<val>\S{4,})"),
     r"\g<pre>" + REDACTED, (("passw", "passphrase"),)),  # "passw": password (see _SECRET_NAME_WORDS)
    # "the db password hunter2x": the next word, when it has a digit or symbol (not "password reset")
    (re.compile(r"(?i)\b(?P<pre>(?:password|passwd|passphrase|pwd)\s+)(?P<val>(?=[^\s\"']*[\d!@#$%^&*])[^\s\"']{6,})"),
     r"\g<pre>" + REDACTED, (("passw", "passphrase", "pwd"),)),
    (re.compile(r"(?i)(?P<pre>(?<![A-Za-z])pass\s*[:=]\s*[\"']?)(?P<val>[^\s\"',;]{4,})"), r"\g<pre>" + REDACTED,
     (("pass",), (":", "="))),
    # "mot de passe: …", French "password: …" (the other languages' are names below: one word)
    (re.compile(r"(?i)(?P<pre>(?<![\w\-])mot[ \t]+de[ \t]+passe\s*[:=]\s*[\"']?)(?P<val>[^\s\"',;]{4,})"),
     r"\g<pre>" + REDACTED, (("mot",), ("passe",), (":", "="))),
    # --password VALUE: a command-line flag naming a secret, its value the next word
    (re.compile(r"(?i)(?P<pre>(?<![\w\-])--?(?=[\w\-]*?(?:password|passwd|secret|token|api[_\-]?key|access[_\-]?key|"
                r"private[_\-]?key|account[_\-]?key|client[_\-]?secret))[\w\-]*+[ \t]+[\"']?)(?P<val>[^\s\"'-][^\s\"']{3,})"),
     r"\g<pre>" + REDACTED, (("-",), ("passw", "secret", "token", "key"))),  # each name holds one
    # "key": "a quoted value, spaces and all" for names that hold secrets
    (re.compile(r"(?i)(?P<pre>(?<![\w\-])(?=[\w\-]*?(?:password|passwd|passphrase|pwd|secret|token|api[_\-]?key|"
                r"access[_\-]?key|private[_\-]?key|account[_\-]?key|client[_\-]?secret|" + _PASSWORD_WORDS + r"))"
                r"[\w\-]*+[\"']?\s*[:=]\s*(?P<q>[\"']))"
                r"(?P<val>[^\"'\n]{4,200})(?P=q)"), r"\g<pre>" + REDACTED + r"\g<q>",
     (_SECRET_NAME_WORDS, (":", "="), ("'", '"'))),  # a name, [:=], the quote (?P<q>)
    # key = value / key: value / "key": "value" for names that hold secrets
    (re.compile(r"(?i)(?P<pre>(?<![\w\-])(?=[\w\-]*?(?:password|passwd|passphrase|pwd|secret|token|api[_\-]?key|access[_\-]?key|"
                r"private[_\-]?key|account[_\-]?key|sharedaccesskey|client[_\-]?secret|auth|" + _PASSWORD_WORDS + r"))"
                r"[\w\-]*+[\"']?\s*[:=]\s*[\"']?)"
                r"(?P<val>[^\s\"',;]{4,})"), r"\g<pre>" + REDACTED,
     ((*_SECRET_NAME_WORDS, "auth"), (":", "="))),  # sharedaccesskey holds "key"
    # a secret named in words: "API key: …", "the token is 8f14…", "| password | hunter2 |" (see
    # _LABELLED_VALUE); last, so a value the patterns above took one word of ("passphrase is correct
    # horse battery staple.") is taken to its clause's end, and its full stop kept
    (_LABELLED_VALUE, r"\g<pre>" + REDACTED, (_LABEL_WORDS,)),
    (_PASSPHRASE_VALUE, r"\g<pre>" + REDACTED, (("pass",), ("phrase",))),
]


# Every pattern above needs one of these (lowercased) somewhere in the text, or what one of the
# regexes below finds: most text has none and skips the patterns, which cost ~30 µs even on a
# short command. Keep in step with them (tests/test_continuity_capture.py checks the two agree).
# As branches of one regex the literals were tried at every position of every text (~80 µs on a
# 600-character command that had none of them): a regex for the words of each first character
# skips to that character, reading the text once for the group instead of once for each word.
_SCREEN_WORDS = ("private key", "://", "bearer", "authorization", "akia", "asia", "agpa", "aida", "aroa", "anpa",
                 "anva", "aipa", "sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat", "xox", "aiza", "glpat",
                 "_live_", "_test_", "eyj", "npm_", "hf_", "pypi-", "sg.", "mysql", "mariadb", "sshpass", "docker",
                 "--user", "cookie", "hooks.slack", "discord", "whsec_", "gocspx-", "ya29.", "sig=", "xapp-", "gsk_",
                 "r8_", "xai-", "dop_v1_", "doo_v1_", "dor_v1_", "sq0atp-", "sq0csp-", "1//0",
                 # the password labels (a label holding "pass" is a name the regexes below find: "passwort: …")
                 *(w for w in _PASSWORD_LABELS if "pass" not in w and w.isascii()))


def _first_char_groups(words: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    """A regex for the words of each first character: one finds what an ``in`` for each word would."""
    firsts = dict.fromkeys(word[0] for word in words)
    return tuple(re.compile(re.escape(first) + "(?:" + "|".join(re.escape(w[1:]) for w in words if w[0] == first) + ")")
                 for first in firsts)


_SCREEN_GROUPS = _first_char_groups(_SCREEN_WORDS)
_SECRET_WORDS_NON_ASCII = tuple(w for w in _PASSWORD_LABELS if not w.isascii())
_SPACE_DASH_U = re.compile(r"\s-u")  # curl -u, and --user
_PASSWORD_WORD = re.compile(r"(?:password|passwd|passphrase|pwd)\s+(?:is[\s:=\-]|[^\s\"']*[\d!@#$%^&*])")
# A name that holds a secret, given a value (name=…, "name": …, --name …); a bare word such as
# "tokenizer.js" or "api/" is not one ("mot de passe:" is one by its last word). Each runs only
# where its words are: a word start is tried at every word, and most text names no secret.
_NAME_WORDS = ("pass", "pwd", "secret", "token", "api", "access", "key", "auth", "private", "account")
_NAMED_VALUE = re.compile(r"(?<![\w\-])(?=[\w\-]*?(?:" + "|".join(_NAME_WORDS) + r"))[\w\-]*+[\"']?\s*[:=]")
_FLAG_WORDS = ("pass", "secret", "token", "api", "access", "private", "account")
_NAMED_FLAG = re.compile(r"(?<![\w\-])--?(?=[\w\-]*?(?:" + "|".join(_FLAG_WORDS) + r"))[\w\-]*+[ \t]")


def _holds_labelled_value(lowered: str) -> bool:
    """Whether :data:`_LABELLED_VALUE` or :data:`_PASSPHRASE_VALUE` finds something in text, given
    lowercased: each tried where one of its labels' first words or a cell bar starts, the only
    places a match can start (str.find skips to them; a search tries the regex at every position)."""
    read = _gate_text(lowered)  # as "(?i)" reads it: "ſ", "ı", and "İ" (lowercased to "i" and a dot)
    for start in _LABEL_STARTS:
        at = read.find(start)
        while at >= 0:
            if _LABELLED_SCREEN.match(read, at) is not None or start == "pass" and _PASSPHRASE_SCREEN.match(read, at):
                return True
            at = read.find(start, at + 1)
    return False


def names_a_secret(text: str) -> bool:
    """Whether ``text`` gives a secret it names in words ("the password hunter2hunter2", "API key:
    …"): the password and labelled patterns alone, not :func:`redact_secrets`'s ``name=value`` guesses, which
    read "max_tokens=1024" or "--api-key-file" as one."""
    lowered = text.lower()
    return _PASSWORD_WORD.search(lowered) is not None or _holds_labelled_value(lowered)


def _may_hold_secret(lowered: str) -> bool:
    """Whether lowercased text has what some pattern needs (the quick screen). A regex runs only
    where the literals each of its matches holds are in the text: the one regex's answer, sooner;
    a secret named in words (:data:`_LABELLED_VALUE`) is the labelled patterns' own answer."""
    if any(group.search(lowered) is not None for group in _SCREEN_GROUPS):
        return True
    if "-u" in lowered and _SPACE_DASH_U.search(lowered) is not None:
        return True
    if ("pass" in lowered or "pwd" in lowered) and _PASSWORD_WORD.search(lowered) is not None:
        return True
    if any(word in lowered for word in _NAME_WORDS):  # _FLAG_WORDS are names too
        if ("=" in lowered or ":" in lowered) and _NAMED_VALUE.search(lowered) is not None:
            return True
        if "-" in lowered and any(word in lowered for word in _FLAG_WORDS) and _NAMED_FLAG.search(lowered) is not None:
            return True
    read = _gate_text(lowered)  # as the labelled patterns' gate and screens read it: "paſſword=…" holds "pass"
    if any(word in read for word in _LABEL_WORDS) and _holds_labelled_value(lowered):
        return True
    return not lowered.isascii() and any(word in lowered for word in _SECRET_WORDS_NON_ASCII)


# Under "(?i)" a long s matches "s", a dotless i and a dotted capital I match "i", the narrow
# Cyrillic o U+1C82 matches "о" (and a Kelvin sign "k", which lowercases to it): the gate copy
# reads them as that letter, and drops the combining dot "İ" lowercases to after its "i" (only
# there: elsewhere the dot stays, as "(?i)" reads it, a character that ends a word: dropped, it
# joined the words around it, and a label after it no longer started a word for the screens).
# More text passes a gate, never less (tests/test_continuity_capture.py finds every such character).
_GATE_FOLD = str.maketrans({"ſ": "s", "ı": "i", "\u1c82": "о"})
_DOTTED_I = "i\u0307"  # "İ".lower()
_GATE_FOLDED = (*map(chr, _GATE_FOLD), _DOTTED_I)


def _gate_text(lowered: str) -> str:
    """Lowercased text as the gates read it (see :data:`_GATE_FOLD`)."""
    if lowered.isascii() or not any(folded in lowered for folded in _GATE_FOLDED):
        return lowered
    return lowered.replace(_DOTTED_I, "i").translate(_GATE_FOLD)


def _gate_open(gate: _Gate, gated: str) -> bool:
    """Whether each clause of ``gate`` has a literal in ``gated`` (loops: no generator per pattern)."""
    for clause in gate:
        for word in clause:
            if word in gated:
                break
        else:
            return False
    return True


def _redact_as_written(text: str, patterns: _Patterns = _SECRET_PATTERNS) -> str:
    lowered = text.lower()
    if not _may_hold_secret(lowered):
        return text
    gated = _gate_text(lowered)  # once: a redaction adds no gate's literal (see _Gate)
    for pattern, repl, gate in patterns:
        if _gate_open(gate, gated):
            text = pattern.sub(repl, text)
    return text


def _redact(text: str, patterns: _Patterns) -> str:
    """``text`` with what ``patterns`` find redacted, as written and as it reads."""
    folded = _disguise_folded(text)
    if folded is None or _redact_as_written(folded, patterns) == folded:
        return _redact_as_written(text, patterns)
    return _redact_disguised(text, patterns)


def redact_secrets(text: str) -> str:
    """``text`` with API keys, tokens, passwords, private keys, AWS keys, bearer headers, cookies,
    webhook URLs, connection-string passwords and secrets named in words ("my API key is …",
    "| password | … |") replaced by ``[REDACTED]``, also where invisible
    or full-width characters or look-alike letters disguise them (:func:`_disguise_folded`)."""
    return _redact(text, _SECRET_PATTERNS)


# A secret disguised: a zero-width space, soft hyphen, control or other invisible character inside
# it ("sk-ant-\u200bapi03-…"), full-width and other compatibility forms ("ｓｋ－ａｎｔ－…"), or
# letters that look Latin (a Cyrillic "ѕk-аnt-…", a Greek omicron in "ghp_…": LATIN_LOOKALIKES).
# The patterns miss it, yet a screen shows it whole, and so do a memory file and the recall index
# (fence.defang drops the invisible characters and folds the rest). Such text is read again as it
# reads — _UNSAFE characters dropped, the rest NFKC-folded, look-alikes as the Latin letter — and
# what a pattern finds in that copy or in the text as written is redacted in the original. Plain
# ASCII text costs one check or two.
_MASK = "\x00"  # a redacted character (a folded copy never holds one: _UNSAFE drops it)


def _disguise_folded(text: str) -> str | None:
    """``text`` as it reads (invisible characters dropped, compatibility forms NFKC-folded,
    look-alike letters as the Latin one), or None when that is ``text`` itself."""
    if text.isascii():  # NFKC changes no ASCII, and it holds no look-alike: only a control can hide in it
        if text.isprintable() or text.replace("\n", "").replace("\t", "").isprintable():
            return None
        return _UNSAFE.sub("", text)
    if unicodedata.is_normalized("NFKC", text) and _UNSAFE.search(text) is None:
        # Cyrillic or Greek prose: only look-alikes to fold (the common case, kept cheap)
        return text.translate(LATIN_LOOKALIKES) if _LATIN_LOOKALIKE.search(text) else None
    folded = unicodedata.normalize("NFKC", _UNSAFE.sub("", text))
    # translate looks every character up (~50 ns each): only where there is a look-alike to fold
    return folded.translate(LATIN_LOOKALIKES) if _LATIN_LOOKALIKE.search(folded) else folded


def _folded_char(char: str) -> str:
    """One character as :func:`_disguise_folded` reads it ("" for an invisible one)."""
    return "" if _UNSAFE.match(char) else unicodedata.normalize("NFKC", char).translate(LATIN_LOOKALIKES)


def _masked_match(match: re.Match[str]) -> str:
    """A pattern's match with what its replacement drops masked, length kept (its ``pre`` kept)."""
    keep = match.end("pre") - match.start() if "pre" in match.re.groupindex and match.start("pre") >= 0 else 0
    return match.group()[:keep] + _MASK * (len(match.group()) - keep)


def _masked(text: str, patterns: _Patterns) -> str:
    """``text`` with every character one of ``patterns`` would redact replaced by :data:`_MASK`."""
    for pattern, _repl, _gate in patterns:
        if isinstance(pattern, _CommandFlag):
            text = pattern.sub(lambda value: _MASK * len(value), text)
        else:
            text = pattern.sub(_masked_match, text)
    return text


def _redact_disguised(text: str, patterns: _Patterns) -> str:
    """``text`` with the secrets ``patterns`` find in it as written and as it reads redacted: each character
    folded on its own (positions map back), one ``[REDACTED]`` for each run of characters that
    are or fold into a secret (an invisible character inside the run included; a NUL as written
    counts as masked, which only hides a NUL). Linear, like the patterns."""
    pieces = [_folded_char(ch) for ch in text]
    masked = _masked("".join(pieces), patterns)
    as_written = _masked(text, patterns)
    out: list[str] = []
    pos, hidden = 0, False
    for ch, piece, written in zip(text, pieces, as_written):
        end = pos + len(piece)
        if written == _MASK:
            secret = True
        elif piece:
            secret = _MASK in masked[pos:end]
        else:  # an invisible character: hidden when it sits inside a secret
            secret = hidden and end < len(masked) and masked[end] == _MASK
        if not secret:
            out.append(ch)
        elif not hidden:
            out.append(REDACTED)
        hidden, pos = secret, end
    return "".join(out)


# Environment variables holding the credentials a bench backend or the distiller is given.
CREDENTIAL_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "AWS_ACCESS_KEY_ID",
                   "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def redact_credentials(text: str, environ: Mapping[str, str]) -> str:
    """An error message of an API or a CLI with every value of ``environ``'s
    :data:`CREDENTIAL_VARS` (8+ characters) redacted wherever it occurs — a server that echoes
    the key back gives it in a shape no pattern need know — and then keys, tokens, bearer and
    authorization headers and URL passwords by their form, also where invisible or full-width
    characters or look-alike letters disguise them, as :func:`redact_secrets` finds them. (Not
    :func:`redact_secrets`'s ``name: value`` guesses: "authentication_error: invalid x-api-key"
    is the message to keep.)"""
    for name in CREDENTIAL_VARS:
        value = (environ.get(name) or "").strip()
        if len(value) >= 8:
            text = text.replace(value, REDACTED)
    return _redact(text, _STRUCTURED_SECRET_PATTERNS)


REDACT_MARGIN = 256  # read past the cut: a key (and what names it) is whole when it is recognised
_TOKEN_END = re.compile(r"\s")


def redacted_prefix(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text``, secrets redacted *before* the cut: a key cut
    in half is no longer recognisable, and its first half would be kept. Past the cut it reads a
    margin and then on to the end of the token it stops in (a long JWT), at most 4 KB."""
    end = limit + REDACT_MARGIN
    while True:
        space = _TOKEN_END.search(text, end, end + 4096)
        stop = space.start() if space else min(len(text), end + 4096)
        redacted = redact_secrets(text[:stop])
        # a redaction that shortened the window pulled its (unscreened) edge towards the cut
        if stop >= len(text) or len(redacted) >= limit + REDACT_MARGIN or stop >= limit + 65_536:
            return redacted[:limit]
        end = max(stop + limit + REDACT_MARGIN - len(redacted), 2 * stop)  # doubling: a few passes at most
