"""Settings: environment > ``$WARDEN_HOME/warden.toml`` > defaults.

Every stage takes a :class:`Settings` instead of reading the environment itself, so tests and
the nightly job can run several homes side by side.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from warden.errors import UsageError


class ConfigError(UsageError):
    """A setting that cannot be used; the message is one line for the user."""


@dataclass(frozen=True)
class Settings:
    home: Path
    database_url: str
    claude_home: Path
    memory_dir: Path  # MEMORY.md lands in <memory_dir>/<agent>/MEMORY.md
    golden_dir: Path
    fixture_dir: Path
    ledgers_dir: Path
    # selector
    keep_margin_k: float = 2.0
    alpha: float = 0.05  # false keep
    beta: float = 0.01  # false evict at `design_effect` above the margin (power 0.99 at a 10% saving)
    design_effect: float = 0.10  # relative saving (fraction of a run) the power is stated at
    evidence_budget_tokens: int = 6_000_000  # per rule per decision
    reference_freshness_days: float = 7.0
    # bench
    backend: str = "sim"
    model: str | None = None
    concurrency: int = 2
    max_turns: int = 40
    max_output_tokens: int = 16_000
    max_total_tokens: int = 2_000_000
    max_wall_s: float = 300.0
    # distill
    distiller: str = "heuristic"
    distill_model: str = "claude-sonnet-4-6"  # 4-5 reaches end-of-life on 2026-11-30
    distill_max_runs: int = 200  # queued runs one nightly distills (the rest wait; a model call each)
    # ledgers
    adopt_max_candidates: int = 25  # new candidates one adopted ledger may add (each costs bench runs)
    # continuity
    recall_window_days: float = 7.0
    checkpoint_keep: int = 5000
    checkpoint_max_age_days: float = 90.0
    # pricing overrides: {model: {input, output, cache_write_5m, cache_write_1h, cache_read}} $/MTok
    pricing: dict[str, dict[str, float]] = field(default_factory=dict)

    @property
    def sqlite_path(self) -> Path | None:
        if self.database_url.startswith(_SQLITE_PREFIX) and "?" not in self.database_url:
            database = unquote(self.database_url[len(_SQLITE_PREFIX):])  # what sqlite_url wrote
            return Path(database) if database and database != ":memory:" else None
        from sqlalchemy.engine import make_url  # any other shape: a driver name, a query string
        from sqlalchemy.exc import ArgumentError

        try:
            url = make_url(self.database_url)
        except ArgumentError:
            return None
        if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
            return None
        return Path(url.database)


_SQLITE_PREFIX = "sqlite:///"


def sqlite_url(path: Path) -> str:
    """The SQLAlchemy URL of a SQLite file; '?', '#' and '%' in the path are escaped, so a home
    directory named ``a?b`` is not read as ``a`` with a query string. Built as SQLAlchemy renders
    it, without importing SQLAlchemy: the hooks' fast path cannot pay for that import."""
    return _SQLITE_PREFIX + quote(str(path), safe=" +/")


def checked_database_url(value: str) -> str:
    """``database_url`` as given, without surrounding whitespace (a newline pasted with it would
    name another file), a SQLite path's ``~`` expanded; a usage error for a SQLite database that
    keeps nothing (in memory) or whose relative path would name another file in each directory a
    command or hook runs in. Read without SQLAlchemy (the hooks' fast path)."""
    url = value.strip()
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.split("+")[0].lower() != "sqlite":
        return url
    path, query_mark, query = rest.partition("?")
    database = unquote(path[1:] if path.startswith("/") else path)
    if database in ("", ":memory:") or database.startswith("file::memory:"):
        raise ConfigError(f"database_url {url!r} is an in-memory SQLite database: nothing would be kept; "
                          "name a file (or leave it unset for $WARDEN_HOME/warden.db)")
    if database.startswith("~"):
        database = os.path.expanduser(database)
        url = f"{scheme}:///{quote(database, safe=' +/')}{query_mark}{query}"
    if not os.path.isabs(database):
        raise ConfigError(f"database_url {url!r} is a relative path: it would name another database in each "
                          "directory a command or hook runs in; give an absolute path")
    return url


def repo_root() -> Path:
    """The checkout warden runs from (golden tasks, fixture, ledgers), or the cwd."""
    env = os.environ.get("WARDEN_REPO")
    if env:
        root = Path(env).expanduser().resolve()
        if not root.is_dir():  # a typo in a cron job must not pass as "no golden suites"
            raise ConfigError(f"WARDEN_REPO={env!r} is not a directory")
        return root
    here = Path(__file__).resolve().parent.parent
    if (here / "golden_tasks").is_dir():
        return here
    return Path.cwd()


_FLOAT_KEYS = {"keep_margin_k", "alpha", "beta", "design_effect", "reference_freshness_days",
               "max_wall_s", "recall_window_days", "checkpoint_max_age_days"}
_INT_KEYS = {"evidence_budget_tokens", "concurrency", "max_turns", "max_output_tokens",
             "max_total_tokens", "checkpoint_keep", "distill_max_runs", "adopt_max_candidates"}
_STR_KEYS = {"backend", "model", "distiller", "distill_model"}
BACKEND_NAMES = ("sim", "anthropic", "claude-code")
DISTILLER_NAMES = ("heuristic", "anthropic")
# settings with a fixed set of values: a typo is refused where it is read, naming the setting
_CHOICES = {"backend": BACKEND_NAMES, "distiller": DISTILLER_NAMES}
_PATH_KEYS = {"claude_home", "memory_dir", "golden_dir", "fixture_dir", "ledgers_dir"}


# The interval a numeric setting may take ("[" / "]": bound included). Beyond it a value is a
# typo, or would exhaust the machine (a thread per unit of concurrency) or a 64-bit column.
MAX_BUDGET_TOKENS = 10**15  # the largest token budget anywhere (settings, --budget)
_RANGES: dict[str, tuple[str, float, float, str]] = {
    "keep_margin_k": ("[", 0, 100, "]"), "alpha": ("(", 0, 0.5, ")"), "beta": ("(", 0, 0.5, ")"),
    "design_effect": ("[", 0.001, 1, ")"), "reference_freshness_days": ("[", 0, 3650, "]"),
    "max_wall_s": ("(", 0, 86_400, "]"), "recall_window_days": ("(", 0, 3650, "]"),
    "checkpoint_max_age_days": ("[", 0, 36_500, "]"), "evidence_budget_tokens": ("[", 1, MAX_BUDGET_TOKENS, "]"),
    "concurrency": ("[", 1, 64, "]"), "max_turns": ("[", 1, 10_000, "]"), "max_output_tokens": ("[", 1, 10**7, "]"),
    "max_total_tokens": ("[", 1, 10**12, "]"), "checkpoint_keep": ("[", 0, 10**9, "]"),
    "distill_max_runs": ("[", 1, 10**6, "]"), "adopt_max_candidates": ("[", 1, 500, "]"),  # a ledger's limit
}


def _plain(number: float) -> str:
    """A number as a user would write it: 100000, not 100000.0 (whole-number settings are floats here)."""
    return str(int(number)) if math.isfinite(number) and number == int(number) else repr(number)


def _in_range(key: str, value: float) -> float:
    opening, low, high, closing = _RANGES[key]
    above = low <= value if opening == "[" else low < value
    below = value <= high if closing == "]" else value < high
    if not (above and below):  # NaN fails both
        raise ConfigError(f"setting {key}={_plain(value)} is out of range {opening}{_plain(low)}, "
                          f"{_plain(high)}{closing}")
    return value


def _number(value: Any) -> float:
    """A setting's number from the file (a TOML number) or the environment (text): never a
    boolean, which Python would take for 0 or 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError("not a number")
    return float(value)


def _whole(key: str, value: Any) -> int:
    """A whole number, also when written 6e6; a fraction is refused, never cut."""
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        return int(value)  # exact, however long
    number = _number(value)
    if math.isfinite(number) and number != int(number):
        raise ConfigError(f"setting {key}={_shown(value)} is not a whole number")
    return int(number)


def _shown(value: Any) -> str:
    """A setting's value as its file or environment wrote it: TOML's true, not Python's 'True'."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value[:40]) if isinstance(value, str) else str(value)[:40]


def _coerce(key: str, value: Any) -> Any:
    try:
        if key in _FLOAT_KEYS:
            return _in_range(key, _number(value))
        if key in _INT_KEYS:
            return _in_range(key, _whole(key, value))
        if key in _PATH_KEYS:
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"setting {key} must be a path (a non-empty string), got {_shown(value)}")
            return Path(value).expanduser()
        if key in _STR_KEYS or key == "database_url":
            if not isinstance(value, str):
                raise ConfigError(f"setting {key} must be a string, got {_shown(value)}")
            if key in _CHOICES and value not in _CHOICES[key]:
                raise ConfigError(f"setting {key}={value[:40]!r}: choose one of {', '.join(_CHOICES[key])}")
            return value
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"setting {key}={_shown(value)} is not a valid value") from None
    if key == "pricing":
        return _pricing(value)
    raise ConfigError(f"unknown setting {key!r}")


PRICE_FIELDS = ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")
MAX_PRICE_PER_MTOK = 100_000.0


def _pricing(value: Any) -> dict[str, dict[str, float]]:
    """Pricing overrides, checked: known fields, finite dollars per million tokens, input > 0
    (the weighted-tokens metric divides by it)."""
    if not isinstance(value, dict):
        raise ConfigError("setting pricing must be a table of model -> prices")
    out: dict[str, dict[str, float]] = {}
    for model, prices in value.items():
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("setting pricing: a model name must be a non-empty string")
        if not isinstance(prices, dict):
            raise ConfigError(f"setting pricing.{model!r} must be a table of prices, e.g. input = 3.0")
        checked: dict[str, float] = {}
        for name, price in prices.items():
            where = f"setting pricing.{model!r}.{name}"
            if name not in PRICE_FIELDS:
                raise ConfigError(f"{where}: unknown price (known: {', '.join(PRICE_FIELDS)})")
            if isinstance(price, bool) or not isinstance(price, (int, float)):
                raise ConfigError(f"{where}={price!r}: expected a number of dollars per million tokens")
            if not (0.0 <= float(price) <= MAX_PRICE_PER_MTOK) or (name == "input" and float(price) == 0.0):
                low = "above 0" if name == "input" else "at least 0"
                raise ConfigError(f"{where}={price!r}: must be {low} and at most {MAX_PRICE_PER_MTOK:g}")
            checked[name] = float(price)
        out[model] = checked
    return out


def home_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$WARDEN_HOME``, or ``~/.warden`` when it is unset or empty ("" would be the current
    directory: a hook's is the session's project). The one reading of it, hooks included."""
    value = (os.environ if env is None else env).get("WARDEN_HOME")
    return Path(value or "~/.warden").expanduser()


def load_settings(env: dict[str, str] | None = None, **overrides: Any) -> Settings:
    env = dict(os.environ if env is None else env)
    home = home_dir(env)
    root = repo_root()
    claude_home = Path(env.get("CLAUDE_CONFIG_DIR") or "~/.claude").expanduser()
    settings = Settings(
        home=home,
        database_url=sqlite_url(home / "warden.db"),
        claude_home=claude_home,
        memory_dir=claude_home / "agent-memory",
        golden_dir=root / "golden_tasks",
        fixture_dir=root / "fixture_repo",
        ledgers_dir=root / "ledgers",
    )
    values: dict[str, Any] = {}
    toml_path = home / "warden.toml"
    if os.path.lexists(toml_path):
        # A stale symlink or a directory in its place is refused, not skipped: skipping would drop
        # database_url and start a fresh local database instead of the configured one.
        if not toml_path.is_file():
            raise ConfigError(f"{toml_path}: not a readable file (a dangling symlink or a directory?)")
        import tomllib  # only with a settings file: a first collect's parsers wait on these imports

        try:
            data = tomllib.loads(toml_path.read_text(encoding="utf-8-sig"))  # a BOM an editor wrote is no setting
        except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError) as exc:
            raise ConfigError(f"{toml_path}: {exc}") from None
        section = data.get("warden", data)
        if not isinstance(section, dict):
            raise ConfigError(f"{toml_path}: [warden] must be a table of settings")
        if section is not data:
            stray = sorted(key for key in data if key != "warden")
            if stray:
                raise ConfigError(f"{toml_path}: setting {stray[0]!r} outside the [warden] table "
                                  "(settings go under [warden])")
        for key, value in section.items():
            values[key] = _coerce(key, value)
    if env.get("WARDEN_DATABASE_URL"):
        values["database_url"] = env["WARDEN_DATABASE_URL"]
    if "database_url" in values:
        values["database_url"] = checked_database_url(values["database_url"])
    if env.get("WARDEN_MEMORY_DIR"):
        values["memory_dir"] = Path(env["WARDEN_MEMORY_DIR"]).expanduser()
    if env.get("CLAUDE_CONFIG_DIR"):  # the environment beats the file (WARDEN_CLAUDE_HOME beats both)
        values["claude_home"] = claude_home
    for f in fields(Settings):
        key = f"WARDEN_{f.name.upper()}"
        if env.get(key) and f.name not in ("home", "database_url", "memory_dir", "pricing"):
            values[f.name] = _coerce(f.name, env[key])
    values.update({k: v for k, v in overrides.items() if v is not None})
    if "memory_dir" not in values and "claude_home" in values:  # the default follows claude_home
        values["memory_dir"] = Path(values["claude_home"]) / "agent-memory"
    return replace(settings, **values)
