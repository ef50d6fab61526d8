"""Figures for people who look: the learning curve, golden-suite cost vs frozen first runs, rules
by state, bench spend vs real work, and each rule's price (``warden status``, ``warden cost``,
``warden report``). Queries here; rendering in ``cli/report.py`` and ``report/html.py``.

Every verdict is in cost-weighted tokens; dollars are derived from them and are advisory: on real
work at its runs' dollars per weighted token (their cost ÷ their weighted tokens), before any at
the measuring model's input price.
"""

from __future__ import annotations

import math

from collections import defaultdict
from collections.abc import Collection
from datetime import datetime, timedelta
from statistics import median
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from warden.ingest.pricing import DEFAULT_TABLE, PriceTable
from warden.measured import backends_of, setup_of
from warden.store.models import Baseline, BenchRun, Receipt, Rule, RulesetVersion, SessionRun, utcnow

RULE_STATES = ("candidate", "active", "probation", "protected", "evicted")
WEEK = timedelta(days=7)


def agents_in_store(session: Session) -> list[str]:
    names: set[str] = set()
    for model in (Rule, BenchRun, Receipt):
        names.update(a for a in session.scalars(select(model.agent).distinct()) if a)
    names.update(a for a in session.scalars(select(SessionRun.agent).distinct()) if a and a != "main")
    return sorted(names)


def _version_at(versions: list[RulesetVersion], moment: datetime | None) -> int:
    """The ruleset version in force at ``moment`` (0 = before the first compile)."""
    current = 0
    for v in versions:
        if moment is not None and v.created_at <= moment:
            current = v.version
    return current


def _sessions_of(session: Session, agent: str, prices: PriceTable = DEFAULT_TABLE) -> list[dict[str, Any]]:
    """The agent's real-work runs grouped by session (``session_id``): per session its first run's
    start, the runs' summed weighted tokens and cost, and how many runs it had. A main session is
    one run; a session that ran a subagent type twice is one session of that agent, costing both.

    A run's cost is its stored ``cost_usd`` (priced when it was collected, as ``warden status``
    sums it); a row holding weighted tokens but no cost (never one ``collect`` writes: weighted
    tokens are cost ÷ input price) is priced at its first model's input price."""
    groups: dict[str, dict[str, Any]] = {}
    for sid, started, weighted, cost, models in session.execute(
            select(SessionRun.session_id, SessionRun.started_at, SessionRun.weighted_tokens, SessionRun.cost_usd,
                   SessionRun.models).where(SessionRun.agent == agent).order_by(SessionRun.id)):
        weighted = float(weighted or 0.0)
        cost = float(cost or 0.0)
        names = [str(m) for m in (models or []) if m]
        if cost <= 0.0 and weighted > 0.0:
            cost = weighted * prices.price(names[0] if names else "").input / 1e6
        g = groups.setdefault(sid, {"session_id": sid, "started_at": None, "runs": 0, "weighted": [], "cost": [],
                                    "model_cost": defaultdict(float)})
        if started is not None and (g["started_at"] is None or started < g["started_at"]):
            g["started_at"] = started
        g["runs"] += 1
        g["weighted"].append(weighted)
        g["cost"].append(cost)
        for name in dict.fromkeys(names):  # a run on several models counts toward each
            g["model_cost"][name] += cost
    return [{"session_id": g["session_id"], "started_at": g["started_at"], "runs": g["runs"],
             "weighted_tokens": math.fsum(g["weighted"]), "cost_usd": math.fsum(g["cost"]),
             "model_cost": dict(g["model_cost"])} for g in groups.values()]


def learning_curve(session: Session, agent: str) -> list[dict[str, Any]]:
    """Real-work cost per session for each ruleset version the agent's sessions ran under: a
    session is its runs of the agent (grouped by session id, cost summed), filed under the version
    in force when its first run started. ``sessions`` counts sessions, ``runs`` their runs."""
    versions = list(session.scalars(select(RulesetVersion).where(RulesetVersion.agent == agent)
                                    .order_by(RulesetVersion.version)))
    groups: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for one in _sessions_of(session, agent):
        groups[_version_at(versions, one["started_at"])].append(one)
    return [{"ruleset_version": v, "sessions": len(group), "runs": sum(g["runs"] for g in group),
             "mean_weighted_tokens": math.fsum(g["weighted_tokens"] for g in group) / len(group)}
            for v, group in sorted(groups.items())]


def golden_suite(session: Session, agent: str) -> dict[str, Any]:
    """Golden-suite cost now vs the frozen first runs. A task's "now" is the median of its completed
    runs with the rules in memory today (one run, or the latest run of an earlier ruleset, was
    whatever noise or a derailment made it); before any such run, the latest run of a compiled
    ruleset; before that, its first run.

    Only the current fixture's baselines and runs count — the fixture the agent was benched on
    last (the bench refuses any other than the one its manifest names): a new fixture version
    starts fresh baselines, and the old version's are set aside (counted in ``other_fixtures``)."""
    from warden.bench.scheduler import active_rule_ids, config_key

    in_memory = config_key(active_rule_ids(session, agent))
    stored = list(session.scalars(select(Baseline).where(Baseline.agent == agent)))
    fixture = current_fixture(session, agent, stored)
    baselines = [b for b in stored if b.fixture_hash == fixture]
    other_fixtures = len({b.fixture_hash for b in stored} - {fixture})
    # One measuring setup (backend, model) per total: two models' first runs summed would double
    # the suite. The setup benched last is shown; the others are named with their own totals.
    setups = sorted({(b.backend, b.model) for b in baselines})
    latest = session.execute(select(BenchRun.backend, BenchRun.model).where(BenchRun.agent == agent)
                             .order_by(BenchRun.id.desc()).limit(1)).first()
    chosen = tuple(latest) if latest is not None and tuple(latest) in setups else (setups[-1] if setups else None)
    others = [_setup_total(session, agent, in_memory, [b for b in baselines if (b.backend, b.model) == setup])
              for setup in setups if setup != chosen]
    shown = _setup_total(session, agent, in_memory, [b for b in baselines if (b.backend, b.model) == chosen])
    return {**shown, "other_setups": [{k: v for k, v in o.items() if k != "tasks"} | {"tasks": len(o["tasks"])}
                                      for o in others],
            "fixture_hash": fixture, "other_fixtures": other_fixtures}


def current_fixture(session: Session, agent: str, baselines: list[Baseline]) -> str | None:
    """The fixture version ``agent``'s golden-suite figures are read on: that of its latest bench
    run, else of the one of its ``baselines`` frozen last (None before any)."""
    latest = session.scalars(select(BenchRun.fixture_hash).where(BenchRun.agent == agent)
                             .order_by(BenchRun.id.desc()).limit(1)).first()
    if latest is None and baselines:
        latest = max(baselines, key=lambda b: b.id).fixture_hash
    return latest


def _setup_total(session: Session, agent: str, in_memory: str, baselines: list[Baseline]) -> dict[str, Any]:
    """:func:`golden_suite`'s figures over the baselines of one backend and model."""
    tasks = []
    for b in baselines:
        same_task = (BenchRun.agent == agent, BenchRun.task_id == b.task_id, BenchRun.backend == b.backend,
                     BenchRun.model == b.model, BenchRun.fixture_hash == b.fixture_hash,
                     BenchRun.outcome == "completed")
        current = [float(w) for w in session.scalars(select(BenchRun.weighted_tokens).where(
            *same_task, BenchRun.config_key == in_memory))]
        if current:
            now: float | None = float(median(current))
        else:
            latest = session.scalars(select(BenchRun).where(*same_task, BenchRun.ruleset_version.is_not(None))
                                     .order_by(BenchRun.id.desc()).limit(1)).first()
            now = float(latest.weighted_tokens) if latest else None
        tasks.append({"task_id": b.task_id, "backend": b.backend, "model": b.model, "run1": b.run1_weighted,
                      "best": b.best_weighted, "now": now, "now_runs": len(current)})
    run1 = sum(t["run1"] for t in tasks)
    now = sum(t["now"] if t["now"] is not None else t["run1"] for t in tasks)
    return {"tasks": sorted(tasks, key=lambda t: t["task_id"]), "run1_total": run1, "now_total": now,
            "change": (now - run1) / run1 if run1 else None, "backends": backends_of(t["backend"] for t in tasks),
            "backend": baselines[0].backend if baselines else None, "model": baselines[0].model if baselines else None}


def rules_by_state(session: Session, agent: str) -> dict[str, int]:
    counts = dict(session.execute(select(Rule.state, func.count()).where(Rule.agent == agent).group_by(Rule.state)).all())
    return {state: int(counts.get(state, 0)) for state in RULE_STATES}


def bench_spend_by_day(session: Session, agent: str | None = None,
                       agents: Collection[str] | None = None) -> list[dict[str, Any]]:
    """Bench weighted tokens per day, with the backends that spent them (a sim's are simulated):
    of ``agent``, or of the ``agents`` named, or (neither given) of every agent."""
    query = select(BenchRun.created_at, BenchRun.weighted_tokens, BenchRun.backend)
    if agent:
        query = query.where(BenchRun.agent == agent)
    if agents is not None:
        query = query.where(BenchRun.agent.in_(list(agents)))
    days: dict[str, float] = defaultdict(float)
    backends: dict[str, set[str]] = defaultdict(set)
    for created, weighted, backend in session.execute(query):
        day = created.date().isoformat()
        days[day] += float(weighted)
        backends[day].add(backend)
    return [{"day": d, "weighted_tokens": w, "backends": backends_of(backends[d])} for d, w in sorted(days.items())]


def spend_this_week(session: Session, agent: str | None = None, now: datetime | None = None) -> dict[str, float]:
    since = (now or utcnow()) - WEEK
    bench_q = select(func.coalesce(func.sum(BenchRun.weighted_tokens), 0.0)).where(BenchRun.created_at >= since)
    real_q = select(func.coalesce(func.sum(SessionRun.weighted_tokens), 0.0)).where(
        SessionRun.ended_at >= since, SessionRun.origin != "sim")
    sim_q = select(func.coalesce(func.sum(SessionRun.weighted_tokens), 0.0)).where(SessionRun.ended_at >= since)
    if agent:
        bench_q = bench_q.where(BenchRun.agent == agent)
        real_q = real_q.where(SessionRun.agent == agent)
        sim_q = sim_q.where(SessionRun.agent == agent)
    backends_q = select(BenchRun.backend).where(BenchRun.created_at >= since).distinct()
    if agent:
        backends_q = backends_q.where(BenchRun.agent == agent)
    bench = float(session.scalar(bench_q) or 0.0)
    real = float(session.scalar(real_q) or 0.0) or float(session.scalar(sim_q) or 0.0)
    return {"bench_weighted_tokens": bench, "bench_backends": backends_of(session.scalars(backends_q)),
            "real_work_weighted_tokens": real, "bench_share": bench / real if real else None}


def real_work(session: Session, agent: str, prices: PriceTable = DEFAULT_TABLE) -> dict[str, Any]:
    """The agent's real work as the dollar figures use it: sessions (runs grouped by session id),
    runs, their summed weighted tokens and real cost, the mean session, and the dollars per
    weighted token — Σ cost ÷ Σ weighted tokens over the same runs, so N sessions at the mean
    cost N × the mean real cost whatever mix of models ran them (one run's weighted tokens are
    its cost ÷ *its* model's input price, so a mean over several models mixes units that no one
    model's price converts). ``models``: the models the runs used, most cost first."""
    sessions = _sessions_of(session, agent, prices)
    weighted = math.fsum(s["weighted_tokens"] for s in sessions)
    cost = math.fsum(s["cost_usd"] for s in sessions)
    by_model: dict[str, float] = defaultdict(float)
    for one in sessions:
        for name, c in one["model_cost"].items():
            by_model[name] += c
    n = len(sessions)
    return {"sessions": n, "runs": sum(s["runs"] for s in sessions), "weighted_tokens": weighted, "cost_usd": cost,
            "weighted_tokens_per_session": weighted / n if n else None, "usd_per_session": cost / n if n else None,
            "usd_per_mtok_weighted": cost * 1e6 / weighted if weighted > 0 else None,
            "models": sorted(by_model, key=lambda m: (-by_model[m], m))}


def agent_model(session: Session, agent: str, prices: PriceTable = DEFAULT_TABLE) -> str:
    """The model most of the agent's real-work cost ran on, or (before any real work) the bench's."""
    models = real_work(session, agent, prices)["models"]
    if models:
        return models[0]
    model = session.scalar(select(BenchRun.model).where(BenchRun.agent == agent).limit(1))
    return str(model or "claude-sonnet-4-6")


def real_work_per_session(session: Session, agent: str) -> tuple[float | None, int]:
    """The agent's mean real-work session in weighted tokens (its runs of the agent summed) and
    the number of sessions (not runs: a session that ran a subagent twice is one)."""
    work = real_work(session, agent)
    return work["weighted_tokens_per_session"], int(work["sessions"])


def _relative(receipt: Receipt | None) -> float | None:
    """A decisive receipt's relative saving (None: the rule has none yet)."""
    return float((receipt.method or {}).get("relative_estimate", 0.0)) if receipt is not None else None


def _log_saving(relative: float | None) -> float:
    """−ln(1 − s): a relative saving as a log cost ratio (s < 1; a saving of all is capped)."""
    return -math.log1p(-min(relative or 0.0, 0.999))


def rule_costs(session: Session, agent: str, prices: PriceTable = DEFAULT_TABLE) -> dict[str, Any]:
    """Each in-memory rule priced from its receipts at the agent's real-work mix.

    The receipt's relative saving (a fraction of a bench run, already net of the rule's own
    in-session cost) is applied to the agent's mean real-work session (its runs of the agent in
    one session summed); without real-work sessions the bench's reference cost stands in (and
    says so). Dollars on real work are at its runs' dollars per weighted token
    (:func:`real_work`), stated in ``price_basis`` and ``input_price_per_mtok``.

    Attribution: the decision core's model is multiplicative — with rules i in memory a session
    costs Π(1 − sᵢ) of what it costs without them, sᵢ each rule's relative saving as measured
    on top of the others (a re-audit measures exactly that). The rules' combined saving
    1 − Π(1 − sᵢ) is what the savings add up to (never Σ sᵢ). It is split in proportion to each
    rule's own log saving Lᵢ = −ln(1 − sᵢ): rule i gets Lᵢ · (1 − e^(−ΣL)) / ΣL of a session. That
    depends on no order — which rule was decided or re-audited last moves nothing — only on the
    rules' estimates; a rule's share rises with its own estimate; one rule alone gets its sᵢ; a
    rule that costs (sᵢ < 0) gets a negative share. Protected rules stay outside the combined
    saving (the projection leaves them out): each is priced alone at sᵢ of a session. Without
    real-work sessions each rule's saving is sᵢ of the reference run it was measured against."""
    work = real_work(session, agent, prices)
    per_session, n_sessions = work["weighted_tokens_per_session"], work["sessions"]
    if per_session and work["usd_per_mtok_weighted"]:
        # the real runs' dollars per weighted token: N sessions at the mean cost N × their mean real cost
        model = work["models"][0] if work["models"] else agent_model(session, agent, prices)
        input_price = work["usd_per_mtok_weighted"]
        one_model = len(work["models"]) == 1 and math.isclose(input_price, prices.price(model).input, rel_tol=1e-9)
        price_basis = (f"real work{' on ' + _models_text(work['models']) if work['models'] else ''}: "
                       f"${work['cost_usd']:.2f} over "
                       f"{_plural(n_sessions, 'session')} ({_plural(work['runs'], 'run')}), "
                       f"${input_price:.4g} per M weighted tokens"
                       + (f" ({model}'s input price)" if one_model else " (their cost ÷ their weighted tokens)"))
    else:
        model = agent_model(session, agent, prices)
        input_price = prices.price(model).input
        price_basis = "no real work collected yet: each saving at the input price of the model that measured it"
    priced = []
    for rule in session.scalars(select(Rule).where(Rule.agent == agent,
                                                   Rule.state.in_(("active", "probation", "protected")))
                                .order_by(Rule.id)):
        receipts = list(session.scalars(select(Receipt).where(Receipt.rule_id == rule.id).order_by(Receipt.id)))
        decisive = [r for r in receipts if r.verdict in ("keep", "refute")]
        priced.append((rule, receipts, decisive[-1] if decisive else None))
    logs = {rule.id: _log_saving(_relative(latest)) for rule, _, latest in priced
            if latest is not None and rule.state != "protected"}
    total_log = sum(logs.values())
    # (1 − e^(−x)) / x: what turns the log shares into shares of the combined saving (1 at x = 0)
    scale = -math.expm1(-total_log) / total_log if abs(total_log) > 1e-12 else 1.0
    savings: dict[int, float | None] = {}
    for rule, _, latest in priced:
        relative = _relative(latest)
        if relative is None:
            savings[rule.id] = None
        elif not per_session:  # the reference run already had the other rules on
            reference_cost = float((latest.method or {}).get("reference_cost", 0.0)) if latest else 0.0
            savings[rule.id] = relative * reference_cost if reference_cost else None
        elif rule.id in logs:
            savings[rule.id] = logs[rule.id] * scale * per_session
        else:  # protected: outside the combined saving
            savings[rule.id] = relative * per_session
    rules_out = []
    for rule, receipts, latest in priced:
        spent = sum(r.tokens_spent for r in receipts)
        relative = _relative(latest)
        saving = savings[rule.id]
        net = saving  # a measured saving already includes the rule's rent
        # With real-work sessions the saving is a share of the agent's real-work tokens, so it is priced
        # at the real work's dollars per weighted token (as project() prices it: the rules' dollars add
        # up to the projection's); without them it is a share of the reference run the receipt's model
        # measured, priced at that model's input price. Each receipt's bench spend is at its own model's.
        rule_price = (prices.price(latest.model).input if latest is not None and not per_session
                      else input_price)
        rules_out.append({
            "rule_id": rule.id, "body": rule.body, "state": rule.state, "rent_tokens": rule.rent_tokens,
            "relative_saving": relative, "saving_tokens_per_session": saving,
            "saving_usd_per_session": saving * rule_price / 1e6 if saving is not None else None,
            "input_price_per_mtok": rule_price,
            "net_tokens_per_session": net, "bench_tokens_spent": spent,
            "bench_usd_spent": sum(r.tokens_spent * prices.price(r.model).input for r in receipts) / 1e6,
            # sessions until the rule has paid back its bench spend: a whole number, rounded up
            "break_even_sessions": math.ceil(spent / net) if net and net > 0 else None,
            "receipt_id": latest.id if latest else None,
            "backend": latest.backend if latest else None,  # what measured the saving: sim is no model
            "model": latest.model if latest else None,
            "measured_on": setup_of(latest.backend, latest.model) if latest else None,
            "interval_tokens": [latest.ci_low, latest.ci_high] if latest else None,
            "margin_tokens": latest.margin if latest else None})
    return {"agent": agent, "model": model, "models": work["models"], "input_price_per_mtok": input_price,
            "price_basis": price_basis,
            "real_work_sessions": n_sessions, "real_work_runs": work["runs"],
            "real_work_tokens_per_session": per_session,
            "real_work_cost_usd": work["cost_usd"], "real_work_usd_per_session": work["usd_per_session"],
            "basis": "real-work sessions" if per_session else "bench reference runs (no real-work sessions yet)",
            "rules": rules_out,
            "dollars": ("advisory: weighted tokens at the real-work runs' dollars per weighted token (their cost ÷ "
                        "their weighted tokens)" if per_session else
                        "advisory: weighted tokens at the measuring model's input price")}


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _models_text(models: list[str]) -> str:
    """The real work's models, most cost first: all of up to three, else the first and a count."""
    if len(models) <= 3:
        return ", ".join(models)
    return f"{models[0]} and {len(models) - 1} other models"


def project(cost: dict[str, Any], weeks: int, sessions_per_week: float, bench_tokens_per_week: float) -> dict[str, Any]:
    """Cost over a horizon with and without warden (weighted tokens; dollars advisory). Pure."""
    per_session = cost["real_work_tokens_per_session"] or 0.0
    saving = sum(r["net_tokens_per_session"] or 0.0 for r in cost["rules"] if r["state"] != "protected")
    sessions = weeks * sessions_per_week
    without = sessions * per_session
    with_warden = sessions * max(per_session - saving, 0.0) + weeks * bench_tokens_per_week
    price = cost["input_price_per_mtok"] / 1e6
    return {"backends": backends_of(r["backend"] for r in cost["rules"] if r["state"] != "protected"), "weeks": weeks, "sessions_per_week": sessions_per_week, "sessions": sessions,
            "without_warden_tokens": without, "with_warden_tokens": with_warden,
            "bench_tokens": weeks * bench_tokens_per_week, "saving_tokens": without - with_warden,
            "without_warden_usd": without * price, "with_warden_usd": with_warden * price,
            "saving_usd": (without - with_warden) * price}


def bench_tokens_per_week(session: Session, agent: str, now: datetime | None = None) -> float:
    """Recent bench spend rate: the last four weeks' bench tokens per week."""
    since = (now or utcnow()) - 4 * WEEK
    first = session.scalar(select(func.min(BenchRun.created_at)).where(BenchRun.agent == agent))
    total = float(session.scalar(select(func.coalesce(func.sum(BenchRun.weighted_tokens), 0.0))
                                 .where(BenchRun.agent == agent, BenchRun.created_at >= since)) or 0.0)
    if first is None:
        return 0.0
    span_weeks = max((((now or utcnow()) - max(first, since)).total_seconds() / WEEK.total_seconds()), 1.0)
    return total / span_weeks


def agent_overview(session: Session, agent: str) -> dict[str, Any]:
    return {"agent": agent, "learning_curve": learning_curve(session, agent),
            "golden_suite": golden_suite(session, agent), "rules": rules_by_state(session, agent),
            "pending_candidates": rules_by_state(session, agent)["candidate"],
            "spend_this_week": spend_this_week(session, agent)}


def learning_overview(session: Session, suite_agents: Collection[str]) -> list[dict[str, Any]]:
    """``warden status``'s second half: per agent, the learning curve and what warden is doing.
    ``suite_agents``: the agents with a golden suite — one without has nothing to bench, so none
    of its rules can be measured (said per agent, as ``has_golden_suite``)."""
    return [agent_overview(session, agent) | {"has_golden_suite": agent in suite_agents}
            for agent in agents_in_store(session)]
