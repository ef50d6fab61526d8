"""Gathering the report's data (one read of the store) for the HTML page and ``--json``."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from warden.ingest.pricing import PriceTable
from warden.report.figures import (agent_overview, agents_in_store, bench_spend_by_day, bench_tokens_per_week,
                                   project, rule_costs)
from warden.select.receipts import latest_receipts, rule_history
from warden.store.models import Rule, iso_utc, utcnow

PROJECTION_WEEKS = 12
PROJECTION_SESSIONS_PER_WEEK = 50.0


def report_data(session: Session, prices: PriceTable, agents: list[str] | None = None) -> dict[str, Any]:
    out = []
    for agent in agents or agents_in_store(session):
        overview = agent_overview(session, agent)
        overview["cost"] = rule_costs(session, agent, prices)
        # The same horizon `warden cost --project` uses by default, so the page and the CLI agree.
        overview["projection"] = project(overview["cost"], PROJECTION_WEEKS, PROJECTION_SESSIONS_PER_WEEK,
                                         bench_tokens_per_week(session, agent))
        overview["latest_receipts"] = latest_receipts(session, agent)
        overview["rules_history"] = [rule_history(session, rid) for rid in
                                     session.scalars(select(Rule.id).where(Rule.agent == agent).order_by(Rule.id))]
        out.append(overview)
    # A report on named agents shows their bench spend only; on every agent, all of it.
    return {"generated_at": iso_utc(utcnow(), "seconds"), "agents": out,
            "bench_spend_by_day": bench_spend_by_day(session, agents=agents or None),
            "bench_spend_agents": list(agents) if agents else None}
