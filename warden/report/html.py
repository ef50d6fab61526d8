"""``warden report --html``: one self-contained HTML file (inline styles and SVG charts, no
network fetches). Every piece of untrusted text goes through :func:`esc`."""

from __future__ import annotations

import html
import math
from typing import Any

from warden import __version__
from warden.measured import measured_on
from warden.sanitize import compact_count, count_text, strip_controls
from warden.select.receipts import provenance_summary

STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;color:#1d232b}
h1{font-size:1.6rem}h2{margin-top:2.2rem;border-bottom:1px solid #d5dae0;padding-bottom:.3rem}
table{border-collapse:collapse;margin:.6rem 0;width:100%}td,th{border-bottom:1px solid #e6e9ed;padding:.25rem .5rem;text-align:right;vertical-align:top}
td.t,th.t{text-align:left}.muted{color:#69737d}.keep{color:#1a7f37}.refute,.regression{color:#b42318}.inconclusive{color:#9a6700}
svg{background:#fbfcfd;border:1px solid #e6e9ed;margin:.4rem 0}.note{background:#f4f6f8;padding:.5rem .8rem;border-radius:6px}
details{margin:.3rem 0}summary{cursor:pointer}
"""


def esc(value: object) -> str:
    return html.escape(strip_controls(str(value), keep_newlines=False), quote=True)


def _usd(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"${x:,.{digits}f}"


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round axis ticks covering [lo, hi] (1, 2 or 5 × a power of ten apart)."""
    span = hi - lo if hi > lo else max(abs(hi), 1.0)
    raw = span / max(count - 1, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.floor(lo / step) * step
    ticks, value = [], first
    while value < hi + step * 0.999:
        ticks.append(value)
        value += step
    return ticks if len(ticks) >= 2 else [first, first + step]


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _svg_open(chart_id: str, title: str, width: int, height: int, title_x: int) -> str:
    return (f'<svg id="{esc(chart_id)}" class="chart" role="img" aria-label="{esc(title)}" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}"><text x="{title_x}" y="18" font-size="12" '
            f'font-weight="600">{esc(title)}</text>')


def line_chart(points: list[tuple[str, float]], title: str, chart_id: str, width: int = 560, height: int = 230) -> str:
    """A small line chart of labelled points (the learning curve), y axis from zero."""
    left, right, top, bottom = 56, 30, 44, 36
    if not points:
        return (_svg_open(chart_id, title, width, 80, 10) + f'<text x="{left}" y="50" font-size="11" '
                'fill="#69737d">no real-work sessions collected yet</text></svg>')
    vals = [v for _, v in points]
    ticks = _ticks(0.0, max(vals + [1.0]), 4)
    top_value = ticks[-1]
    y = lambda v: height - bottom - (v / top_value) * (height - top - bottom)  # noqa: E731
    xs = [left + (i + 0.5) * (width - left - right) / max(len(points), 1) for i in range(len(points))]
    grid = "".join(f'<line x1="{left}" y1="{y(t):.1f}" x2="{width - right}" y2="{y(t):.1f}" stroke="#e3e7eb"/>'
                   f'<text x="{left - 6}" y="{y(t) + 3:.1f}" font-size="10" text-anchor="end" fill="#69737d">'
                   f'{compact_count(t)}</text>' for t in ticks)
    path = " ".join(f"{'M' if i == 0 else 'L'}{x:.1f},{y(v):.1f}" for i, (x, v) in enumerate(zip(xs, vals)))
    dots = "".join(f'<circle cx="{x:.1f}" cy="{y(v):.1f}" r="3.5" fill="#2563eb"><title>{esc(label)}: {count_text(v)}</title></circle>'
                   f'<text x="{x:.1f}" y="{height - bottom + 16}" font-size="10" text-anchor="middle">{esc(label)}</text>'
                   f'<text x="{x:.1f}" y="{y(v) - 8:.1f}" font-size="10" text-anchor="middle">{count_text(v)}</text>'
                   for x, (label, v) in zip(xs, points))
    return (_svg_open(chart_id, title, width, height, 10) + grid
            + f'<path d="{path}" fill="none" stroke="#2563eb" stroke-width="2"/>{dots}</svg>')


def interval_chart(rows: list[dict[str, Any]], title: str, chart_id: str, width: int = 860) -> str:
    """Each rule's saving (point) with its interval (bar) against its margin (red tick), on one
    labelled token axis; each row also states its figures in words."""
    left, right, top, row_h = 50, 250, 48, 26
    height = top + row_h * max(len(rows), 1) + 24
    # An interval still open (one pair: an infinite end) runs to the edge of the axis.
    vals = [v for r in rows for v in (r["lo"], r["hi"], r["margin"], r["estimate"]) if _finite(v)] + [0.0]
    ticks = _ticks(min(vals), max(vals), 6)
    lo_axis, hi_axis = ticks[0], ticks[-1]

    def x(v: float) -> float:
        v = min(max(v, lo_axis), hi_axis) if not math.isnan(v) else lo_axis
        return left + (v - lo_axis) / (hi_axis - lo_axis) * (width - left - right)

    axis_y = height - 20
    parts = [_svg_open(chart_id, title, width, height, 10),
             f'<text x="{width - right + 12}" y="34" font-size="10" fill="#69737d">saving/run [interval] · margin</text>']
    for t in ticks:
        stroke = 'stroke="#aab" stroke-dasharray="3 3"' if t == 0 else 'stroke="#eef0f3"'  # zero saving: dashed
        parts.append(f'<line x1="{x(t):.1f}" y1="{top - 12}" x2="{x(t):.1f}" y2="{axis_y}" {stroke}/>'
                     f'<text x="{x(t):.1f}" y="{axis_y + 13}" font-size="10" text-anchor="middle" fill="#69737d">'
                     f'{compact_count(t)}</text>')
    for i, r in enumerate(rows):
        y = top + i * row_h
        color = {"keep": "#1a7f37", "refute": "#b42318", "regression": "#b42318"}.get(r["verdict"], "#9a6700")
        parts.append(
            f'<g class="rule-bar"><title>rule {esc(r["rule_id"])}: {count_text(r["estimate"])} [{count_text(r["lo"])}, {count_text(r["hi"])}] '
            f'margin {count_text(r["margin"])}</title><text x="8" y="{y + 4}" font-size="11">#{esc(r["rule_id"])}</text>'
            f'<line x1="{x(r["lo"]):.1f}" y1="{y}" x2="{x(r["hi"]):.1f}" y2="{y}" stroke="{color}" stroke-width="4"/>'
            + (f'<circle cx="{x(r["estimate"]):.1f}" cy="{y}" r="4.5" fill="{color}"/>' if _finite(r["estimate"]) else "")
            + f'<line x1="{x(r["margin"]):.1f}" y1="{y - 8}" x2="{x(r["margin"]):.1f}" y2="{y + 8}" stroke="#d00" '
            f'stroke-width="2"/><text x="{width - right + 12}" y="{y + 4}" font-size="11">'
            f'{count_text(r["estimate"])} [{count_text(r["lo"])}, {count_text(r["hi"])}] · {count_text(r["margin"])} '
            f'<tspan fill="{color}">{esc(r["verdict"])}</tspan> · {esc(r["backend"])}</text></g>')
    if not rows:
        parts.append(f'<text x="{left}" y="{top + 4}" font-size="11" fill="#69737d">no decisions yet</text>')
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(points: list[tuple[str, float]], title: str, chart_id: str, width: int = 760, height: int = 220) -> str:
    """Bars per day with a labelled token axis; each bar carries its value."""
    left, right, top, bottom = 56, 20, 44, 36
    ticks = _ticks(0.0, max([v for _, v in points] + [1.0]), 4)
    top_value = ticks[-1]
    plot_h = height - top - bottom
    slot = (width - left - right) / max(len(points), 1)
    bw = min(max(slot - 6, 1.0), 60.0)  # one day's bar must not fill the whole chart
    grid = "".join(f'<line x1="{left}" y1="{height - bottom - t / top_value * plot_h:.1f}" x2="{width - right}" '
                   f'y2="{height - bottom - t / top_value * plot_h:.1f}" stroke="#e3e7eb"/><text x="{left - 6}" '
                   f'y="{height - bottom - t / top_value * plot_h + 3:.1f}" font-size="10" text-anchor="end" '
                   f'fill="#69737d">{compact_count(t)}</text>' for t in ticks)
    bars = []
    for i, (label, v) in enumerate(points):
        cx = left + (i + 0.5) * slot
        h = v / top_value * plot_h
        bars.append(f'<rect x="{cx - bw / 2:.1f}" y="{height - bottom - h:.1f}" width="{bw:.1f}" height="{h:.1f}" '
                    f'fill="#7c3aed"><title>{esc(label)}: {count_text(v)}</title></rect>'
                    f'<text x="{cx:.1f}" y="{height - bottom + 14}" font-size="9" text-anchor="middle">{esc(label[5:])}</text>'
                    + (f'<text x="{cx:.1f}" y="{height - bottom - h - 4:.1f}" font-size="9" text-anchor="middle">'
                       f'{compact_count(v)}</text>' if len(points) <= 31 else ""))
    return _svg_open(chart_id, title, width, height, 10) + grid + "".join(bars) + "</svg>"


def _measured(backends: Any, tag: str = "p") -> str:
    """Under a figure derived from bench runs: the backend(s) that measured it, per figure (one
    real-backend run elsewhere on the page must not lift the sim label off the sim's figures)."""
    where = measured_on(backends)
    return f'<{tag} class="measured muted">measured {esc(where)}</{tag}>' if where else ""


def _receipt_block(r: dict[str, Any]) -> str:
    rows = "".join(
        f'<tr><td class="t">{esc(task)}</td><td>{esc(r["n_per_side"].get(task))}</td>'
        f'<td>{esc(r["pass_counts"].get(task))}</td><td class="t">{esc([round(x) for x in diffs][:20])}</td></tr>'
        for task, diffs in sorted(r["paired_diffs"].items()))
    lo, hi = r["interval"]
    return (f'<details class="receipt"><summary>#{r["id"]} {esc(str(r["created_at"])[:19].replace("T", " "))} UTC {esc(r["kind"])} → '
            f'<span class="{esc(r["verdict"])}">{esc(r["verdict"])}</span> (state {esc(r["state_after"])}) · '
            f'on {esc(r["backend"])}</summary>'
            f'<p>saving {count_text(r["estimate"])} per run, interval [{count_text(lo)}, {count_text(hi)}], margin {count_text(r["margin"])} '
            f'(k={esc(r["k"])} × rent {esc(r["rent"])}); spent {count_text(r["tokens_spent"])} weighted tokens '
            f'({count_text(r["raw_tokens_spent"])} raw); '
            f'measured on {esc(r["measured_on"])}; suite {esc(r["suite_hash"][:12])}; fixture '
            f'{esc(r["fixture_hash"][:12])}; warden {esc(r["warden_version"])}</p><p class="muted">{esc(r["reason"])}</p>'
            f'<table><tr><th class="t">task</th><th>n (ref, rule)</th><th>passes</th><th class="t">paired differences'
            f'</th></tr>{rows}</table></details>')


def _claimed_block(claimed: dict[str, Any] | None) -> str:
    """An adopted rule's foreign evidence: shown for review, never used in a verdict."""
    if not claimed:
        return ""
    lines = "".join(
        f'<li>{esc(e.get("verdict"))}: saving {count_text(e.get("estimate"))} '
        f'[{count_text((e.get("interval") or [None, None])[0])}, {count_text((e.get("interval") or [None, None])[1])}], '
        f'margin {count_text(e.get("margin"))}, {esc(e.get("n_pairs"))} pairs on {esc(e.get("backend"))}/{esc(e.get("model"))}</li>'
        for e in (claimed.get("evidence") or [])[-5:] if isinstance(e, dict))
    return (f'<div class="claimed note"><b>claimed</b> by ledger {esc(claimed.get("ledger"))} '
            f'({esc(claimed.get("exported_by"))}, {esc(claimed.get("state"))}) — foreign evidence, shown for review, '
            f'never used in a verdict<ul>{lines}</ul></div>')


def render_report(data: dict[str, Any]) -> str:
    """The whole page from the data ``report.service.report_data`` gathers."""
    body: list[str] = [f"<h1>warden report</h1><p class=\"muted\">generated {esc(data['generated_at'])} by warden "
                       f"{esc(__version__)} · verdicts in cost-weighted tokens; dollars advisory</p>"]
    for agent in data["agents"]:
        name = agent["agent"]
        curve = [(f"v{p['ruleset_version']} · {p['sessions']} session{'' if p['sessions'] == 1 else 's'}"
                  + (f" ({p['runs']} runs)" if p.get("runs", p["sessions"]) != p["sessions"] else ""),
                  p["mean_weighted_tokens"]) for p in agent["learning_curve"]]
        suite = agent["golden_suite"]
        body.append(f'<h2 id="agent-{esc(name)}">{esc(name)}</h2>')
        week = agent["spend_this_week"]
        spent_on = _measured(week["bench_backends"], "span")
        body.append(f"<p>rules: {esc(', '.join(f'{k} {v}' for k, v in agent['rules'].items()))} · pending "
                    f"candidates {agent['pending_candidates']} · bench this week {count_text(week['bench_weighted_tokens'])}"
                    f"{' ' + spent_on if spent_on else ''} vs real work {count_text(week['real_work_weighted_tokens'])}</p>")
        body.append(line_chart(curve, f"{name}: real-work cost per session by ruleset version",
                               f"learning-{name}"))
        if suite["tasks"]:
            change = "" if suite["change"] is None else f" ({suite['change']:+.1%})"
            body.append(f"<p>golden suite: {count_text(suite['now_total'])} now vs {count_text(suite['run1_total'])} frozen first runs"
                        f"{esc(change)} {_measured(suite['backends'], 'span')}</p>")
        bars = [{"rule_id": r["rule_id"], "estimate": r["estimate"], "lo": r["interval"][0], "hi": r["interval"][1],
                 "margin": r["margin"], "verdict": r["verdict"], "backend": r["backend"]} for r in agent["latest_receipts"]]
        body.append(interval_chart(bars, f"{name}: each rule's saving per run with its interval (red: margin)",
                                   f"savings-{name}"))
        body.append(_measured(r["backend"] for r in agent["latest_receipts"]))
        cost_rows = "".join(
            f'<tr><td>{r["rule_id"]}</td><td class="t">{esc(r["body"])}</td><td>{esc(r["state"])}</td>'
            f'<td>{count_text(r["saving_tokens_per_session"])}</td><td>{_usd(r["saving_usd_per_session"], 4)}</td>'
            f'<td class="t backend">{esc(r["measured_on"] or "—")}</td>'
            f'<td>{r["rent_tokens"]}</td><td>{count_text(r["bench_tokens_spent"])}</td>'
            f'<td>{count_text(r["break_even_sessions"])}</td></tr>' for r in agent["cost"]["rules"])
        cost = agent["cost"]
        body.append(f'<p>{esc(cost["price_basis"])} · priced on '
                    f'{esc(cost["basis"])}: {count_text(cost["real_work_tokens_per_session"])} weighted tokens per session</p>')
        body.append(f'<table class="cost"><tr><th>rule</th><th class="t">body</th><th>state</th><th>saving/session</th>'
                    f'<th>$/session</th><th class="t">measured on</th><th>rent</th><th>bench spent</th>'
                    f'<th>break-even sessions</th></tr>{cost_rows}</table>'
                    + _measured(r["backend"] for r in cost["rules"]) if cost["rules"] else "")
        if not agent["cost"]["rules"]:
            body.append('<p class="muted">no active rules to price yet</p>')
        if agent.get("projection") and cost["real_work_tokens_per_session"]:  # no real work: nothing to scale
            p = agent["projection"]
            where = _measured(p.get("backends"), "span")
            body.append(f'<p class="projection">{p["weeks"]} weeks × {p["sessions_per_week"]:g} sessions: without warden '
                        f'{count_text(p["without_warden_tokens"])} ({_usd(p["without_warden_usd"])}), with warden '
                        f'{count_text(p["with_warden_tokens"])} ({_usd(p["with_warden_usd"])}, bench {count_text(p["bench_tokens"])} '
                        f'included) · {where + " · " if where else ""}<span class="muted">`warden cost --project` '
                        f'for other horizons</span></p>')
        body.append("<h3>Receipts</h3>")
        for rule in agent["rules_history"]:
            r = rule["rule"]
            body.append(f'<div class="rule" id="rule-{r["id"]}"><p><b>rule {r["id"]}</b> '
                        f'<span class="muted">{esc(r["state"])}{(" (" + esc(r["evict_reason"]) + ")") if r["evict_reason"] else ""}'
                        f'</span> — {"(when " + esc(r["scope"]) + ") " if r.get("scope") else ""}{esc(r["body"])}</p>'
                        + f'<p class="born-of muted">born of: {esc(provenance_summary(r["provenance_digest"]))}</p>'
                        + _claimed_block(r.get("claimed_evidence"))
                        + ("".join(_receipt_block(x) for x in rule["receipts"])
                           or '<p class="muted">no local decision yet</p>') + "</div>")
    spend = [(d["day"], d["weighted_tokens"]) for d in data["bench_spend_by_day"]]
    body.append("<h2>Bench spend over time</h2>")
    of = data.get("bench_spend_agents")
    body.append(bar_chart(spend or [("0000-00-00", 0.0)], "bench weighted tokens per day"
                          + (f" of {', '.join(of)}" if of else ""), "bench-spend"))
    body.append(_measured(b for d in data["bench_spend_by_day"] for b in d["backends"]))
    script = "<script>document.body.dataset.ready = String(document.querySelectorAll('svg.chart').length);</script>"
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" "
            "content=\"width=device-width, initial-scale=1\"><title>warden report</title><style>"
            + STYLE + "</style></head><body>" + "".join(body) + script + "</body></html>\n")
