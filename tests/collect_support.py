"""Builders of Claude Code transcript lines for the collect-stage tests (format as written by
Claude Code 2.x: one JSON object per line, one line per content block of an API response)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SESSION = "11111111-2222-3333-4444-555555555555"


def usage(inp: int = 3, out: int = 10, cw: int = 0, cr: int = 0, *, w5: int | None = None,
          w1: int | None = None) -> dict[str, Any]:
    u: dict[str, Any] = {"input_tokens": inp, "output_tokens": out, "cache_creation_input_tokens": cw,
                         "cache_read_input_tokens": cr}
    if w5 is not None or w1 is not None:
        u["cache_creation"] = {"ephemeral_5m_input_tokens": w5 or 0, "ephemeral_1h_input_tokens": w1 or 0}
    return u


def assistant(msg_id: str, req_id: str | None, u: dict[str, Any], content: list[dict[str, Any]] | None = None, *,
              model: str = "claude-sonnet-4-5-20250929", session: str = SESSION, ts: str = "2026-01-01T10:00:00.000Z",
              agent_id: str | None = None, cwd: str = "/proj", stop_reason: str | None = None) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "parentUuid": None, "isSidechain": agent_id is not None, "userType": "external", "cwd": cwd,
        "sessionId": session, "version": "2.0.50", "type": "assistant", "timestamp": ts,
        "uuid": f"u-{msg_id}-{len(json.dumps(content or []))}",
        "message": {"model": model, "id": msg_id, "type": "message", "role": "assistant",
                    "content": content if content is not None else [{"type": "text", "text": "ok"}],
                    "stop_reason": stop_reason, "usage": u},
    }
    if req_id is not None:
        rec["requestId"] = req_id
    if agent_id is not None:
        rec["agentId"] = agent_id
    return rec


def tool_use(tool_id: str, name: str, **inp: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": name, "input": inp}


def tool_result(tool_id: str, content: str = "ok", *, is_error: bool = False, session: str = SESSION,
                agent_id: str | None = None, tool_use_result: Any = None, ts: str = "2026-01-01T10:00:01.000Z") -> dict[str, Any]:
    rec: dict[str, Any] = {
        "parentUuid": None, "isSidechain": agent_id is not None, "type": "user", "sessionId": session,
        "cwd": "/proj", "timestamp": ts, "uuid": f"r-{tool_id}",
        "message": {"role": "user", "content": [{"tool_use_id": tool_id, "type": "tool_result",
                                                  "content": content, "is_error": is_error}]},
    }
    if agent_id is not None:
        rec["agentId"] = agent_id
    if tool_use_result is not None:
        rec["toolUseResult"] = tool_use_result
    return rec


def prompt(text: str, *, session: str = SESSION, ts: str = "2026-01-01T09:59:59.000Z") -> dict[str, Any]:
    return {"parentUuid": None, "isSidechain": False, "type": "user", "sessionId": session, "cwd": "/proj",
            "timestamp": ts, "uuid": f"p-{abs(hash(text))}", "message": {"role": "user", "content": text}}


def progress(agent_id: str, msg_id: str, req_id: str, u: dict[str, Any], *, session: str = SESSION,
             parent_tool: str = "toolu_task", model: str = "claude-haiku-4-5-20251001") -> dict[str, Any]:
    """A 2.1.x ``agent_progress`` line embedding one of a running subagent's API messages."""
    return {
        "parentUuid": None, "isSidechain": False, "type": "progress", "sessionId": session, "cwd": "/proj",
        "timestamp": "2026-01-01T10:00:05.000Z", "uuid": f"g-{msg_id}", "toolUseID": f"agent_msg_{msg_id}",
        "parentToolUseID": parent_tool,
        "data": {"type": "agent_progress", "agentId": agent_id, "prompt": "look around",
                 "message": {"type": "assistant", "requestId": req_id, "uuid": f"e-{msg_id}",
                             "timestamp": "2026-01-01T10:00:05.000Z",
                             "message": {"model": model, "id": msg_id, "type": "message", "role": "assistant",
                                         "content": [{"type": "text", "text": "looking"}], "usage": u}}},
    }


def jsonl(records: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(jsonl(records))
    return path


def append(path: Path, records: list[dict[str, Any]]) -> None:
    with open(path, "ab") as fh:
        fh.write(jsonl(records))


def assert_runs_own_their_usage(store: Any) -> None:
    """The ledger's rule its writer sums new runs' totals by: a usage row's owner always has a
    session_runs row, and a run's token totals are the sums of the usage rows it owns."""
    from sqlalchemy import func, select

    from warden.store.models import SessionRun, UsageMessage

    u = UsageMessage
    with store.session() as db:
        runs = {r.run_key: (r.input_tokens, r.output_tokens, r.cache_write_5m_tokens, r.cache_write_1h_tokens,
                            r.cache_read_tokens) for r in db.scalars(select(SessionRun))}
        owned = {key: tuple(int(v) for v in sums) for key, *sums in db.execute(
            select(u.run_key, func.sum(u.input_tokens), func.sum(u.output_tokens), func.sum(u.cache_write_5m_tokens),
                   func.sum(u.cache_write_1h_tokens), func.sum(u.cache_read_tokens)).group_by(u.run_key))}
    assert set(owned) <= set(runs), f"usage rows owned by no run: {sorted(set(owned) - set(runs))[:5]}"
    assert {key: owned.get(key, (0, 0, 0, 0, 0)) for key in runs} == runs


def ledger_values() -> tuple[dict[str, tuple], dict[str, tuple], dict[str, tuple]]:
    """The settings' database's runs, usage rows and offsets, as values (no ids or wall-clock
    times): what two collects of the same files must both have stored."""
    from sqlalchemy import select

    from warden.config import load_settings
    from warden.store.db import open_store
    from warden.store.models import IngestOffset, SessionRun, UsageMessage

    store = open_store(load_settings())
    try:
        with store.session() as db:
            runs = {r.run_key: (r.input_tokens, r.output_tokens, r.cache_write_5m_tokens, r.cache_read_tokens,
                                r.cost_usd, r.tool_calls, r.agent, r.models, r.trace_digest, r.line_stats)
                    for r in db.scalars(select(SessionRun))}
            rows = {u.message_key: (u.run_key, u.model, u.timestamp, u.input_tokens, u.output_tokens)
                    for u in db.scalars(select(UsageMessage))}
            offsets = {o.path: (o.run_key, o.offset, o.size, o.head_sha256, o.parser_state)
                       for o in db.scalars(select(IngestOffset))}
        return runs, rows, offsets
    finally:
        store.engine.dispose()
