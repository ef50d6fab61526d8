"""Agent backends: the harness (tool loop) and the models that play golden tasks.

``get_backend(name, settings, model=...)`` returns an object satisfying
:class:`warden.bench.results.AgentBackend` (``name``, ``model``, ``run(task, workdir,
system_prompt, seed, caps) -> RunResult``). A backend object is used by one worker thread at a
time; the scheduler calls the factory once per worker.

* ``sim`` — the simulated agent (offline default), see ``sim.py``.
* ``anthropic`` — the Messages API through the real SDK, see ``anthropic_backend.py``.
* ``claude-code`` — the ``claude`` CLI headless, see ``claude_code_backend.py``.
"""

from __future__ import annotations

from typing import Any, Callable

from warden.bench.results import AgentBackend
from warden.config import BACKEND_NAMES, Settings
from warden.errors import UsageError

BackendFactory = Callable[..., AgentBackend]


def _anthropic(settings: Settings, **options: Any) -> AgentBackend:
    from warden.bench.agents.anthropic_backend import AnthropicBackend

    return AnthropicBackend(settings, **options)


def _claude_code(settings: Settings, **options: Any) -> AgentBackend:
    from warden.bench.agents.claude_code_backend import ClaudeCodeBackend

    return ClaudeCodeBackend(settings, **options)


# Backend name → factory(settings, **options). Imports are lazy so that a backend's
# dependencies (and its errors, e.g. a missing API key) only matter when it is chosen.
# The ``sim`` backend registers itself here via ``register_backend("sim", ...)`` (sim.py /
# its transport module); see _ensure_sim below.
_FACTORIES: dict[str, BackendFactory] = {
    "anthropic": _anthropic,
    "claude-code": _claude_code,
}


def register_backend(name: str, factory: BackendFactory) -> None:
    _FACTORIES[name] = factory


def _ensure_sim() -> None:
    # SIM: importing the sim backend module registers the "sim" factory.
    if "sim" not in _FACTORIES:
        try:
            import warden.bench.agents.sim_backend  # noqa: F401
        except ImportError:
            pass


def get_backend(name: str, settings: Settings, **options: Any) -> AgentBackend:
    """The backend called ``name``; ``options`` (e.g. ``model``) go to its constructor.

    Raises :class:`UsageError` for an unknown name or a backend that cannot run here
    (missing API key, missing ``claude`` CLI) — one line for the user.
    """
    if name == "sim":
        _ensure_sim()
    factory = _FACTORIES.get(name)
    if factory is None:
        raise UsageError(f"unknown backend {name!r}; choose one of: {', '.join(BACKEND_NAMES)}")
    return factory(settings, **options)


def backend_model(name: str, settings: Settings, model: str | None = None) -> str:
    """The model id backend ``name`` runs when asked for ``model`` (None: its default), found
    without starting it (no API key or CLI needed): the sim's persona model, else
    :func:`~warden.bench.agents.anthropic_backend.resolve_model`'s choice (both real backends
    use it). Raises :class:`UsageError`, as :func:`get_backend` would, for an unknown backend or
    a model the backend does not know (a real model id on the sim)."""
    if name == "sim":
        _ensure_sim()
        if "sim" in _FACTORIES:
            from warden.bench.agents.sim_backend import persona_for_model

            return persona_for_model(model).model
    if name not in _FACTORIES:
        raise UsageError(f"unknown backend {name!r}; choose one of: {', '.join(BACKEND_NAMES)}")
    from warden.bench.agents.anthropic_backend import resolve_model

    return resolve_model(settings, model)
