"""What a rule body may be (DESIGN.md §3), and when two bodies are near-duplicates.

Pure: every writer of a rule body (distillers, ``rules add``, ``adopt``, ``verify-ledger``) calls
:func:`validate_rule_body`; every dedupe calls :func:`trigram_jaccard`.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import unicodedata

from warden.errors import UsageError
from warden.sanitize import first_undrawn_char, fold_char, holds_key, markup_problem, names_a_secret

MIN_RULE_CHARS = 10
MAX_RULE_CHARS = 200
NEAR_DUPLICATE_JACCARD = 0.85


class RuleTextError(UsageError, ValueError):
    """Why a rule body was refused (one line)."""


def validate_rule_body(body: object) -> str:
    """Return the NFC-normalised body, or raise :class:`RuleTextError` saying why not."""
    if not isinstance(body, str):
        raise RuleTextError("rule body must be a string")
    text = unicodedata.normalize("NFC", body).strip()
    if any(ch in "\r\n\u2028\u2029" for ch in text):
        raise RuleTextError("rule body must be one line")
    for ch in text:
        category = unicodedata.category(ch)
        if category in ("Cc", "Cs", "Co", "Cn") or (category.startswith("Z") and ch != " "):
            raise RuleTextError(f"rule body contains a non-printable character U+{ord(ch):04X}")
    # able to make a rule read otherwise than the agent gets it (format characters, Default_Ignorable ones)
    hidden = first_undrawn_char(text)
    if hidden is not None:
        raise RuleTextError(f"rule body contains an invisible or bidi character U+{ord(hidden):04X}")
    if len(text) < MIN_RULE_CHARS:
        raise RuleTextError(f"rule body is shorter than {MIN_RULE_CHARS} characters")
    if len(text) > MAX_RULE_CHARS:
        raise RuleTextError(f"rule body is longer than {MAX_RULE_CHARS} characters ({len(text)})")
    if not any(ch.isalpha() for ch in text):
        raise RuleTextError("rule body has no words")
    mixed = _mixed_script_word(text)
    if mixed:
        raise RuleTextError(f"rule body mixes scripts within the word {mixed!r} (look-alike letters)")
    problem = markup_problem(text)
    if problem:
        raise RuleTextError(f"rule body {problem}: a rule is one plain line of MEMORY.md")
    return text


# Japanese writes one word in kanji, hiragana and katakana at once: one writing system here.
_SCRIPT_GROUPS = {"CJK": "HAN", "HIRAGANA": "HAN", "KATAKANA": "HAN", "KATAKANA-HIRAGANA": "HAN",
                  "IDEOGRAPHIC": "HAN"}
MICRO_SIGN = "\u00b5"


def _script(ch: str) -> str:
    name = unicodedata.name(ch, "")
    first = name.split(" ", 1)[0] if name else "?"
    return _SCRIPT_GROUPS.get(first, first)


# Writing systems that put no space between words, or join particles to them ("grepで",
# "grep을"): a Latin tool name inside their text is a word of its own, not a look-alike.
_UNSPACED_SCRIPTS = frozenset({"HAN", "HANGUL", "THAI", "LAO", "KHMER", "MYANMAR", "TIBETAN"})


def _mixed_script_word(text: str) -> str | None:
    """A word whose letters come from more than one script (Latin 'symbоl' with a Cyrillic 'о'):
    look-alikes that would slip a near-duplicate past the similarity check. Letters of an
    unspaced script end a word here."""
    for match in re.finditer(r"[^\W\d_]+", text):
        word = match.group()
        if word.startswith(MICRO_SIGN) and match.start() and text[match.start() - 1].isdigit():
            word = word[1:]  # a unit after a number ("50µs"), not a letter imitating "u"
        scripts: set[str] = set()
        for ch in word + "\u4e00":  # a sentinel Han letter ends the last run
            script = _script(ch)
            if script in _UNSPACED_SCRIPTS:
                if len(scripts) > 1:
                    return match.group()
                scripts = set()
            else:
                scripts.add(script)
    return None


@functools.lru_cache(maxsize=4096)  # a ledger's 500 rules are compared pairwise
def _trigrams(text: str) -> frozenset[str]:
    norm = " ".join(unicodedata.normalize("NFC", text).casefold().split())
    padded = f"  {norm} "
    return frozenset(padded[i:i + 3] for i in range(len(padded) - 2))


def trigram_jaccard(a: str, b: str) -> float:
    """Character-trigram Jaccard similarity of two bodies (case- and whitespace-insensitive)."""
    ta, tb = _trigrams(a), _trigrams(b)
    if not ta and not tb:
        return 1.0
    return len(ta & tb) / len(ta | tb)


def is_near_duplicate(a: str, b: str) -> bool:
    return trigram_jaccard(a, b) > NEAR_DUPLICATE_JACCARD


def find_near_duplicate(body: str, others: list[tuple[int | str, str]]) -> tuple[int | str, float] | None:
    """The first (id, similarity) among ``others`` that ``body`` nearly duplicates."""
    for other_id, other_body in others:
        score = trigram_jaccard(body, other_body)
        if score > NEAR_DUPLICATE_JACCARD:
            return other_id, score
    return None


# What may sit between a command and its verb: flags, a flag's value given apart ("make -C site
# publish", "npm --registry x publish", "kubectl -n prod apply") and make's variables ("make
# PREFIX=/srv deploy"). A closing backquote, comma or pipe ends the command ("`make -n` before a
# deploy" is prose); one value per flag ("make -C site test" and "npm -w pkg test" stay admitted).
_OPTIONS = r"(?:-[^\s`]+\s+(?:[^\s\-`,;|&=][^\s`,;|&=]*\s+)?|[a-z_]\w*=[^\s`]*\s+)*"

# The verbs of an instruction override in every form a sentence puts them in ("Ignoring all
# previous instructions, …", "Disregarding the earlier instructions, …", "forgotten rules"): the
# bare word alone let the gerund and the participle through
_IGNORE = r"ignor(?:e|es|ed|ing)"
_DISREGARD = r"disregard(?:s|ed|ing)?"
_FORGET = r"(?:forget(?:s|ting)?|forgot(?:ten)?)"
_OVERRIDE = r"(?:overrid(?:e|es|ing|den)|overrode)"
_BYPASS = r"bypass(?:es|ed|ing)?"
_OVERRIDE_VERBS = "|".join((_IGNORE, _DISREGARD, _FORGET, _OVERRIDE, _BYPASS))
_SET_ASIDE_VERBS = "|".join((r"neglect(?:s|ed|ing)?", _DISREGARD, _FORGET, _OVERRIDE, _BYPASS, _IGNORE,
                             r"discard(?:s|ed|ing)?", r"dismiss(?:es|ed|ing)?", r"abandon(?:s|ed|ing)?"))
# what an override voids, and the words that void it ("the user's instructions no longer apply",
# "(when previous instructions are cancelled)")
_VOID_WORDS = (r"(ignored|disregarded|forgotten|overridden|bypassed|void(ed)?|cancell?ed|revoked|rescinded|lifted|"
               r"suspended|superseded|nullified|null)")
_VOIDED = (r"(no\s+longer\s+(apply|applies|hold|holds|matter|matters|count|counts|stand|stands)|"
           r"(are|is|be|been|get|gets|got)\s+(now\s+|hereby\s+)?" + _VOID_WORDS + r")\b")

# What an efficiency rule never needs, but an injected one does: a rule from an untrusted source
# (a model's reply, a shared ledger) with any of these is refused. Rules by hand are exempt.
_UNTRUSTED_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"\b[a-z][a-z0-9+.\-]*://|\bwww\.|\b(javascript|vbscript):|\bdata:[a-z]+/|\bfile:/", "a URL"),
    # [text](target) or ![image](target): MEMORY.md renders them; reference-style too — [text][1],
    # [text][] — and the definition "[1]: target" that gives one (or a bare [text]) its target: a
    # definition starts its line (after the rule's "(when …)" scope at most), or names a label the
    # body uses too. Not links: a regex's character classes ('[A-Z][a-z]+': a range or escape in
    # the second, and no three-letter word in either — "[notes][ref-id]" is a link),
    # "[Errno 2]: …" and a TOML table "[tool.pytest.ini_options]: …" within a sentence (an
    # autolink <https://…> is HTML and a URL: the validator and the pattern above refuse it)
    (r"\]\s*\(|(^|[^\w\]])!?\[(?=[^\]]*[^\W\d_]{3})[^\]]*\]\s?\[(?!\^[^\]\s]*\])|"
     r"(^|[^\w\]])!?\[[^\]]*\]\s?\[(?!(\^[^\]\s]*|(?![^\]]*[^\W\d_]{3})[^\]\s]*([^\W_]-[^\W_]|\\[a-z])[^\]\s]*)\])|"
     r"(?m:^(\(when\b[^)]*\)\s+)?\s{0,3}\[[^\]]+\]:\s*\S)|"
     r"\[(?P<used>[^\]]+)\](?!:).*\[(?P=used)\]:\s*\S|\[(?P<defined>[^\]]+)\]:\s*\S.*\[(?P=defined)\]",
     "a Markdown link"),
    (r"\|\s*(sh|bash|zsh|dash|python\d?|perl|ruby|node)\b", "a pipe into an interpreter"),
    (r"\b(curl|wget\d*|aria2c?|netcat|nc|ncat|socat|telnet|scp|sftp|ssh|rsync|ftp|invoke-webrequest|invoke-restmethod|"
     r"iwr|irm)\b|"
     # a server opened on the machine ("python3 -m http.server", Python 2's SimpleHTTPServer)
     r"\bpython[\d.]*\s+" + _OPTIONS + r"-m\s*(http\.server|SimpleHTTPServer|CGIHTTPServer)\b",
     "a network command"),
    (r"\b(" + _OVERRIDE_VERBS + r")\b.{0,60}\b(instructions?|rules?|prompts?|guidelines?|"
     r"system|polic(y|ies))\b|"
     # its synonyms, said of what came before
     r"\b(" + _SET_ASIDE_VERBS + r")\b.{0,40}"
     r"\b(prior|previous|earlier|above|preceding|former|original)\b.{0,30}"
     r"\b(instructions?|guidance|directions?|rules?|prompts?|guidelines?|directives?)\b|"
     # other files' instructions declared void, or this one's put above them
     r"\bobey\b.{0,30}\.(md|txt|ya?ml|json|toml)\b|\bobey\s+(only\s+)?(this|these|me)\b|"
     r"\bover\s+(any|all|every|the)\b.{0,30}\b(claude|agents)\.md\b|"
     r"\b(claude|agents)\.md\b.{0,40}\b(stale|outdated|obsolete|void|superseded)\b|"
     r"\b(rules?|instructions?|guidance)\b.{0,30}\b(above|earlier|prior|previous)\b.{0,30}"
     r"\b(outdated|obsolete|stale|void|superseded)\b|"
     # instructions declared void, or new ones given ("New instructions: …"); rules only when
     # they are the ones given before ("lint rules are ignored for generated files" is a setting)
     r"\b(instructions?|directives?|guidance|guidelines?|prompts?)\b.{0,30}\b" + _VOIDED + r"|"
     r"\b(prior|previous|earlier|above|preceding|former|original|old|other|existing|all|your|user'?s)\s+"
     r"(rules?|instructions?|directives?|guidance|guidelines?|prompts?)\b(.{0,30}\b" + _VOIDED + r"|\s+"
     + _VOID_WORDS + r"\b)|"
     r"\bnew\s+(instructions?|directives?|orders|rules?|guidelines?|system\s+prompt)\s*:|"
     # secrecy towards the user
     r"\b(never|not|don't)\s+(mention|reveal|disclose|tell|show)\b.{0,20}(\b(these|this|the|our)\s+(rules?|"
     r"instructions?|lines?|memory|guidance)\b.{0,20}|\bthis\s+)(to|with|from)\s+the\s+user\b|"
     # the same in German, Russian and Chinese
     r"\b(ignorier|vergiss|vergessen|missacht)\w*\b.{0,60}\b(anweisung|instruktion|regel|vorgabe)|"
     r"\b(игнорир|проигнорир|забудь|забудьте)\w*.{0,60}\b(инструкци|указани|правил)|"
     r"(忽略|无视|忽视|無視|忘记|忘記).{0,20}(指令|指示|规则|規則)", "an instruction override"),
    (r"(^|[\s(\[])(system|assistant|user|developer|human)\s*:|"
     # assistants' own names as a speaker, where a line or sentence starts ("(when …) " starts one too)
     r"(^|[.!?;]\s+|\(when\s+|\)\s+)(claude|ai)\s*:", "a role label"),
    (r"<\|[^|\n]{0,40}\|>|\[/?inst\]|<</?sys>>", "a chat-template marker"),
    (r"\b(developer|god|jailbreak|dan|admin) mode\b", "a mode switch"),
    (r"~/\.ssh|\bid_(rsa|ed25519|ecdsa)\b|\.aws/|\.netrc\b|\bexfiltrat|\b(print|show|send|post|upload|share|"
     r"reveal|echo|cat|copy|leak|output|display|paste|dump|email|mail|forward)\b.{0,40}\b(api[_ \-]?keys?|passwords?|"
     r"credentials?|secrets?|private keys?|tokens?|env(ironment)? var)", "handling secrets or credentials"),
    # the environment and .env files hold the keys; an upper-case *_KEY/_TOKEN/_SECRET name is one
    # (case-sensitive: "max_tokens=1024" is a setting, not a secret)
    (r"\bprintenv\b|/proc/\S*environ\b|\b(run|type|execute|call)\s+[`'\"]?(env|set|export)\b(?![\-_.])|"
     r"\benv\s*[|>]|(?<![\w.])\.env\b|(?-i:\b(?!MAX_)[A-Z][A-Z0-9]*_(?:[A-Z0-9]+_)*(?:API_?KEYS?|KEYS?|TOKENS?|SECRETS?|"
     r"PASSWORDS?|PASSWD|CREDENTIALS?)\b|\b(?:SECRET|TOKEN|PASSWORD|API_KEY)_[A-Z0-9_]+)",
     "the environment or a secret's name"),
    (r"\brm\s+(-\w+\s+)*-\w*[rf]|\brm\s+--(recursive|force)|\bdd\s+\S*(if|of)=|\bof=/dev/|\bmkfs\b|"
     r"\bchmod\s+(-\w+\s+)*(-R\b|0?777\b|a\+rwx)|\bchown\s+-R\b|\bsudo\b|"
     r"\bgit\s+push\b.{0,40}(--force|\s-f\b|--mirror|--delete|\s\+\w)|\bforce[- ]push|"
     r"\bgit\s+reset\s+--hard|\bgit\s+clean\s+-\w*[fdx]|\bfind\b.{0,80}\s(-delete\b|-exec\s+rm\b)|"
     # the working tree's changes discarded as reset --hard does ("git checkout -- .", "git restore
     # ."), a branch deleted unmerged ("git branch -D main"), a file overwritten or emptied
     r"\bgit\s+(checkout|restore)\s+(-[^\s`]+\s+)*(--\s+)?(\.|\*|:/)(?=$|[\s`'\",;)])|"
     r"\bgit\s+checkout\s+(-[^\s`]+\s+)*(-f\b|--force\b)|"
     r"\bgit\s+branch\b.{0,30}((?-i:\s-\w*D\b)|--delete\b.{0,20}(--force\b|\s-f\b)|"
     r"(--force\b|\s-f\b).{0,20}(--delete\b|\s-d\b))|"
     r"\bshred\b|\btruncate\s+(-\S+\s+)*(-\w*s|--size\b)|"
     # SQL that destroys tables or databases ("drop the stale cache" and "drop tables from the
     # summary" are words). TRUNCATE TABLE and DELETE FROM (with no WHERE) as SQL writes them, in
     # capitals or ending at the table's name: "truncate table output to 20 rows" and "delete from
     # the summary" are habits
     r"\bdrop\s+(temporary\s+)?(table|database|schema)\b|\bdropdb\b|"
     r"(?-i:\bTRUNCATE\s+TABLE\b)|\btruncate\s+(table\s+)?(only\s+)?[\w.\"`]+\s*(;|\s+cascade\b)|"
     r"(?-i:\bDELETE\s+FROM\s+[\w.\"`]+)(?![\w.\"`]|\s+where\b)|\bdelete\s+from\s+[\w.\"`]+\s*;|"
     # the repository's history deleted: its .git directory ("remove .git/index.lock" clears a
     # stale lock, "remove the .git suffix" edits a name, .gitignore is another file)
     r"\b(delete|remove|rm|rmdir|rd|del|erase|wipe|nuke|purge|destroy|trash|rmtree|remove-item)\b.{0,30}"
     r"((?<![\w.\-])\.git(?![\w.\-]|/\w|\s+(suffix|extension|ending)\b)|\bgit\s+(directory|folder|dir)\b)",
     "a destructive command"),
    # effects beyond the working tree: publishing commits, replacing git's hooks, a root container
    (r"\bgit\s+" + _OPTIONS + r"push\b|\bgit\s+config\b.{0,40}\bhookspath\b|\bdocker\s+run\b.{0,80}--privileged\b",
     "a command acting beyond the working tree"),
    # publishing, releasing and deploying: as far beyond the working tree as git push ("make
    # deploy-prod" too; "just published" and "task uploads" are words; "make release" builds a
    # release configuration, "rake release" pushes a gem)
    (r"\b(make|just|rake|task|mage)\s+" + _OPTIONS + r"(deploy|publish|upload)(?![a-z])|"
     r"\b(rake|task|mage)\s+" + _OPTIONS + r"release(?![a-z])|"
     r"\b(npm|pnpm|yarn|bun|cargo|poetry|uv|pdm|hatch|flit|mvn|gradlew?|dotnet)\s+" + _OPTIONS + r"(run\s+" + _OPTIONS + r")?"
     r"(publish|deploy|release|upload)\b|\btwine\s+upload\b|\bgem\s+push\b|\b(docker|podman)\s+" + _OPTIONS + r"push\b|"
     r"\bkubectl\s+" + _OPTIONS + r"(apply|create|delete|replace|patch|scale|rollout|set|edit)\b|"
     r"\bhelm\s+(install|upgrade|uninstall|rollback)\b|\b(terraform|tofu)\s+" + _OPTIONS + r"(apply|destroy|import)\b|"
     r"\bpulumi\s+(up|destroy)\b|\bgh\s+(release\s+create|pr\s+merge)\b|"
     r"\b(fly|flyctl|vercel|netlify|firebase|serverless|sls|heroku|wrangler|eb)\s+(\S+\s+)?(deploy|publish)\b|"
     r"\bvercel\s+--prod\b|\bgcloud\b.{0,40}\bdeploy\b|\baws\s+s3\s+(cp|sync|mv|rm)\b",
     "a deploy, release or publish command (acting beyond the working tree)"),
    (r"\beval\b|\bbase64\s+(-\w*d|--decode)|\bexec\s*\(|\bpython[\d.]*\s+" + _OPTIONS + r"-c\b|"
     r"\|\s*(iex|invoke-expression)\b|\binvoke-expression\b|"
     # a shell told to run a string, or a command built where it runs: command and process
     # substitution, backquotes inside a quoted or assigned string, ANSI-C quoting, byte escapes
     # (parameter expansion "${file}" only reads a variable: it builds no command)
     r"\b(ba|z|da|k|fi|c|tc)?sh\s+(-\w+\s+)*-\w*c\b|\$\(|[<>]\(|[\"'=]`|\$'|"
     r"\\(x[0-9a-f]{2}|[0-7]{3}|u[0-9a-f]{4}|U[0-9a-f]{8})", "executing generated or encoded code"),
    # text to decode and then act on; a blob is never a habit ("aWdub3Jl…", "69676e6f…")
    (r"\b(decode|decrypt|deobfuscate|unescape|rot13|base64)\b.{0,60}\b((follow|obey|execute|run|apply|do) "
     r"(it|them|that|this|the result|its instructions|what it says)|do (as|what) it says)\b", "encoded instructions"),
    # approving on the user's behalf what the permission prompts exist for
    (r"\bauto[- ]?(approv|accept|allow|confirm)\w*|\bdangerously\W?skip|--dangerously|\bbypass\W?permissions?\b|"
     r"\byolo\b|--permission-mode\b|--allowed-?tools\b|\ballowedtools\b|"
     # the thing approved right after the quantifier: "approve every permission prompt", "allow all
     # tools" ("confirm each step's output before running more commands" is care, not a bypass)
     r"\b(approve|accept|allow|grant|confirm|permit|(say|answer) yes to)\s+(every|all|any|each)\s+"
     r"(of\s+(the|your|my)\s+)?(pending\s+|tool\s+)?"
     r"(permissions?|prompts?|requests?|tools?|tool calls?|commands?|actions?|approvals?)\b(?!['\u2019]s)|"
     r"\balways\s+(allow|approve|accept|grant)\b.{0,30}\b(tools?|permissions?|commands?|prompts?|requests?|"
     r"everything|all)\b|"
     r"\b(skip|bypass|disable|turn off|suppress|override|circumvent)\s+(\w+\s+){0,2}(permissions?|approvals?|"
     r"sandbox(ing)?)\b|\b(permissions?|approvals?)\s+(checks?|prompts?)\b.{0,20}\b(skip|off|disabled?|bypass)",
     "a permission bypass"),
    # a package manager with only flags between it and its install verb ("go" only as go install/get:
    # "Go and add the import" is advice)
    (r"\b(pip3?|pipx|uv|npm|pnpm|yarn|gem|cargo|apt(-get)?|brew|conda|dnf|yum|apk|poetry)\s+" + _OPTIONS +
     r"(install|add|i)\b|\bgo\s+(install|get)\b|\bnpx\b|\buvx\b|\bbunx\b|\bpnpx\b|\bnpm\s+" + _OPTIONS + r"exec\b|"
     r"\b(pnpm|yarn)\s+dlx\b|\bpipx\s+run\b|\buv\s+tool\s+(run|install)\b", "installing packages"),
    # overriding what was said before; "ignore everything under node_modules" or "forget previously read
    # contents" is about files, not instructions
    (r"\b(" + _IGNORE + "|" + _FORGET + "|" + _DISREGARD + r")\b.{0,40}\b(told|said|instructed|guidance|directions?)\b|"
     r"\b(" + _IGNORE + "|" + _FORGET + "|" + _DISREGARD + r")\s+(all\s+|everything\s+|anything\s+)?(of\s+)?"
     r"(the\s+|that\s+)?above\b|"
     r"\byou('re| are) now\b|\bfrom now on,? you\b|\bpretend (to be|you)\b|"
     r"\b(unrestricted|unfiltered|god|jailbreak|root|sudo|privileged) mode\b|\bsystem prompt\b",
     "an instruction override"),
)


# Digits and signs written for letters ("1gn0re", "$udo"): read as those letters, inside a word
# that has a letter, for matching only ("10 files" and "python3" stay as they are).
_LEET = str.maketrans("013457@$", "oieastas")
_LEET_WORD = re.compile(r"[\w@$]*[^\W\d_][\w@$]*")


def screen_fold(text: str) -> str:
    """``text`` as the letters it imitates (:func:`warden.sanitize.fold_char`), for a screen to
    match: full-width, mathematical, accented, Cyrillic and small-capital forms as Latin letters."""
    return text if text.isascii() else "".join(map(fold_char, text))


# A long run of base64 or hex: rules are short plain-English habits, and a blob is text the agent
# cannot read until it decodes it. Base64 shows itself by its padding, or by digits among letters
# of both cases that do not read as a CamelCase name; hex by digits among its letters. Words,
# names ("parseHTTP2Response", "getUTF8ByteLength"), numbers and paths stay.
_BLOB = re.compile(r"(?<![\w+/=])[A-Za-z0-9+/]{16,}={0,2}(?![\w+/=])")
_HEX_BLOB = re.compile(r"^(0x)?[0-9a-f]{16,}$", re.IGNORECASE)
_NAME_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def _name_shaped(run: str) -> bool:
    """Whether ``run`` reads as a CamelCase name: words and acronyms of 2.5+ characters on average,
    at most two numbers among them. Base64 changes case or class every two characters or so (a
    random 16-character run passes about one time in twenty; base64 of English text does not)."""
    if "+" in run:
        return False
    parts = _NAME_PARTS.findall(run)
    return len(parts) * 5 <= len(run) * 2 and sum(part.isdigit() for part in parts) <= 2


def _looks_encoded(run: str) -> bool:
    if _HEX_BLOB.match(run):
        return not run.isdigit() and any(ch.isdigit() for ch in run)
    return run.endswith("=") or (any(ch.isdigit() for ch in run) and any(ch.isupper() for ch in run)
                                 and any(ch.islower() for ch in run) and not _name_shaped(run))


_WORDS = re.compile(rb"[A-Za-z]{2,}")


def _decodes_to_text(run: str) -> bool:
    """Whether ``run`` is standard base64 of plain text: printable ASCII, a third of it or more
    words. Base64 of a short sentence can lack padding and digits ("ZGVsZXRlIHRoZSByZXBv" is
    "delete the repo"), which the form check needs; a word, name or path decodes to bytes that are
    not text (of 26,000 stdlib identifiers of 16+ letters, 2 decode to printable bytes: both base64)."""
    body = run.rstrip("=")
    body = body[:-1] if len(body) % 4 == 1 else body  # a lone trailing character holds no byte
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except binascii.Error:
        return False
    if not all(32 <= byte < 127 or byte in b"\t\n" for byte in raw):
        return False
    # words: letters in runs of two or more ("curl x | sh" has enough; printable noise has few)
    return sum(map(len, _WORDS.findall(raw))) * 3 >= len(raw)


def _encoded_blob(text: str) -> bool:
    """Whether ``text`` holds a base64 or hex blob. A run with slashes is read segment by segment
    ("src/main/java/com/acme/Base64Util" is a path of names), unless padding ends it, and as a
    whole for base64 of text (whose "/" is a character of it)."""
    for match in _BLOB.finditer(text):
        run = match.group()
        if run.endswith("=") or any(len(part) >= 16 and (_looks_encoded(part) or _decodes_to_text(part))
                                    for part in run.split("/")) or _decodes_to_text(run):
            return True
    return False


def untrusted_rule_problem(body: str, scope: str | None = None) -> str | None:
    """Why a rule from an untrusted source (model reply, shared ledger) is refused, or None.
    The scope is screened with the body, as the agent reads them: "(when SCOPE) BODY". Look-alike
    letters (full-width ｃｕｒｌ, mathematical 𝐢𝐠𝐧𝐨𝐫𝐞, Cyrillic ѕѕһ, small capitals ᴄᴜʀʟ,
    accented ìgnòre, leet 1gn0re) are screened as the letters they imitate."""
    text = f"(when {scope}) {body}" if scope else body
    folded = screen_fold(text)
    leet = _LEET_WORD.sub(lambda word: word.group().translate(_LEET), folded)
    screened = "(rules from models and ledgers are screened)"
    for pattern, what in _UNTRUSTED_PATTERNS:
        if any(re.search(pattern, form, re.IGNORECASE) for form in (text, folded, leet)):
            return f"mentions {what}: not something an efficiency rule needs {screened}"
    if _encoded_blob(text) or _encoded_blob(folded):
        return f"mentions an encoded blob (base64 or hex): not something an efficiency rule needs {screened}"
    if holds_key(text) or holds_key(folded):  # by its form: "max_tokens=1024" is no secret
        return f"holds a key or token, which every run of the agent would read {screened}"
    if names_a_secret(text) or names_a_secret(folded):  # by its label: "the password hunter2hunter2", "API key: …"
        return f"holds what reads as a secret (a password, key or token), which every run would read {screened}"
    return None
