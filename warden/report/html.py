"""``warden report --html``: one self-contained HTML file (inline styles and SVG charts, no
network fetches). Every piece of untrusted text goes through :func:`esc`."""

from __future__ import annotations

import html
from typing import Any

from warden import __version__
from warden.sanitize import strip_controls

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


def _n(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f}"


def _scale(values: list[float], lo: float, hi: float) -> tuple[float, float]:
    vmin, vmax = (min(values), max(values)) if values else (0.0, 1.0)
    if vmax == vmin:
        vmax = vmin + 1.0
    return vmin, (hi - lo) / (vmax - vmin)


def line_chart(points: list[tuple[str, float]], title: str, chart_id: str, width: int = 520, height: int = 200) -> str:
    """A small line chart of labelled points (the learning curve)."""
    pad = 40
    vals = [v for _, v in points]
    vmin, k = _scale([0.0] + vals, 0, height - 2 * pad)
    xs = [pad + i * (width - 2 * pad) / max(len(points) - 1, 1) for i in range(len(points))]
    ys = [height - pad - (v - vmin) * k for v in vals]
    path = " ".join(f"{'M' if i == 0 else 'L'}{x:.1f},{y:.1f}" for i, (x, y) in enumerate(zip(xs, ys)))
    dots = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="#2563eb"><title>{esc(label)}: {_n(v)}</title></circle>'
                   f'<text x="{x:.1f}" y="{height - pad + 16}" font-size="10" text-anchor="middle">{esc(label)}</text>'
                   for x, y, (label, v) in zip(xs, ys, points))
    labels = "".join(f'<text x="{x:.1f}" y="{y - 8:.1f}" font-size="10" text-anchor="middle">{_n(v)}</text>'
                     for x, y, (_, v) in zip(xs, ys, points))
    return (f'<svg id="{esc(chart_id)}" class="chart" role="img" aria-label="{esc(title)}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}"><text x="{pad}" y="18" font-size="12" font-weight="600">{esc(title)}</text>'
            f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#aab"/>'
            f'<path d="{path}" fill="none" stroke="#2563eb" stroke-width="2"/>{dots}{labels}</svg>')


def interval_chart(rows: list[dict[str, Any]], title: str, chart_id: str, width: int = 760) -> str:
    """Each rule's saving (point) with its interval (bar) against its margin (red tick)."""
    pad, row_h = 60, 26
    height = 40 + row_h * max(len(rows), 1) + 20
    vals = [v for r in rows for v in (r["lo"], r["hi"], r["margin"], r["estimate"], 0.0)]
    vmin, k = _scale(vals or [0.0, 1.0], pad, width - 20)
    x = lambda v: pad + (v - vmin) * k  # noqa: E731
    parts = [f'<svg id="{esc(chart_id)}" class="chart" role="img" aria-label="{esc(title)}" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}"><text x="10" y="18" font-size="12" '
             f'font-weight="600">{esc(title)}</text>'
             f'<line x1="{x(0):.1f}" y1="28" x2="{x(0):.1f}" y2="{height - 10}" stroke="#ccd" stroke-dasharray="3 3"/>']
    for i, r in enumerate(rows):
        y = 40 + i * row_h
        color = {"keep": "#1a7f37", "refute": "#b42318", "regression": "#b42318"}.get(r["verdict"], "#9a6700")
        parts.append(
            f'<g class="rule-bar"><title>rule {esc(r["rule_id"])}: {_n(r["estimate"])} [{_n(r["lo"])}, {_n(r["hi"])}] '
            f'margin {_n(r["margin"])}</title><text x="8" y="{y + 4}" font-size="11">#{esc(r["rule_id"])}</text>'
            f'<line x1="{x(r["lo"]):.1f}" y1="{y}" x2="{x(r["hi"]):.1f}" y2="{y}" stroke="{color}" stroke-width="4"/>'
            f'<circle cx="{x(r["estimate"]):.1f}" cy="{y}" r="4.5" fill="{color}"/>'
            f'<line x1="{x(r["margin"]):.1f}" y1="{y - 8}" x2="{x(r["margin"]):.1f}" y2="{y + 8}" stroke="#d00" '
            f'stroke-width="2"/></g>')
    parts.append("</svg>")
    return "".join(parts)


def bar_chart(points: list[tuple[str, float]], title: str, chart_id: str, width: int = 760, height: int = 200) -> str:
    pad = 40
    vmax = max([v for _, v in points] + [1.0])
    bw = (width - 2 * pad) / max(len(points), 1)
    bars = "".join(
        f'<rect x="{pad + i * bw + 2:.1f}" y="{height - pad - (v / vmax) * (height - 2 * pad):.1f}" width="{max(bw - 4, 1):.1f}" '
        f'height="{(v / vmax) * (height - 2 * pad):.1f}" fill="#7c3aed"><title>{esc(label)}: {_n(v)}</title></rect>'
        f'<text x="{pad + i * bw + bw / 2:.1f}" y="{height - pad + 14}" font-size="9" text-anchor="middle">{esc(label[5:])}</text>'
        for i, (label, v) in enumerate(points))
    return (f'<svg id="{esc(chart_id)}" class="chart" role="img" aria-label="{esc(title)}" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}"><text x="{pad}" y="18" font-size="12" font-weight="600">{esc(title)}</text>'
            f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="#aab"/>{bars}</svg>')


def _receipt_block(r: dict[str, Any]) -> str:
    rows = "".join(
        f'<tr><td class="t">{esc(task)}</td><td>{esc(r["n_per_side"].get(task))}</td>'
        f'<td>{esc(r["pass_counts"].get(task))}</td><td class="t">{esc([round(x) for x in diffs][:20])}</td></tr>'
        for task, diffs in sorted(r["paired_diffs"].items()))
    lo, hi = r["interval"]
    return (f'<details class="receipt"><summary>#{r["id"]} {esc(r["created_at"])} {esc(r["kind"])} → '
            f'<span class="{esc(r["verdict"])}">{esc(r["verdict"])}</span> (state {esc(r["state_after"])})</summary>'
            f'<p>saving {_n(r["estimate"])} per run, interval [{_n(lo)}, {_n(hi)}], margin {_n(r["margin"])} '
            f'(k={esc(r["k"])} × rent {esc(r["rent"])}); spent {_n(r["tokens_spent"])} weighted tokens; '
            f'{esc(r["backend"])}/{esc(r["model"])}; suite {esc(r["suite_hash"][:12])}; fixture '
            f'{esc(r["fixture_hash"][:12])}; warden {esc(r["warden_version"])}</p><p class="muted">{esc(r["reason"])}</p>'
            f'<table><tr><th class="t">task</th><th>n (ref, rule)</th><th>passes</th><th class="t">paired differences'
            f'</th></tr>{rows}</table></details>')


def render_report(data: dict[str, Any]) -> str:
    """The whole page from the data ``report.service.report_data`` gathers."""
    body: list[str] = [f"<h1>warden report</h1><p class=\"muted\">generated {esc(data['generated_at'])} by warden "
                       f"{esc(__version__)} · verdicts in cost-weighted tokens; dollars advisory</p>"]
    if data.get("sim_only"):
        body.append('<p class="note">Bench figures here were measured on the <b>sim</b> backend: a simulated '
                    'agent, not a model\'s result.</p>')
    for agent in data["agents"]:
        name = agent["agent"]
        curve = [(f"v{p['ruleset_version']}", p["mean_weighted_tokens"]) for p in agent["learning_curve"]]
        suite = agent["golden_suite"]
        body.append(f'<h2 id="agent-{esc(name)}">{esc(name)}</h2>')
        body.append(f"<p>rules: {esc(', '.join(f'{k} {v}' for k, v in agent['rules'].items()))} · pending "
                    f"candidates {agent['pending_candidates']} · bench this week {_n(agent['spend_this_week']['bench_weighted_tokens'])}"
                    f" vs real work {_n(agent['spend_this_week']['real_work_weighted_tokens'])}</p>")
        body.append(line_chart(curve or [("v0", 0.0)], f"{name}: real-work cost per session by ruleset version",
                               f"learning-{name}"))
        if suite["tasks"]:
            change = "" if suite["change"] is None else f" ({suite['change']:+.1%})"
            body.append(f"<p>golden suite: {_n(suite['now_total'])} now vs {_n(suite['run1_total'])} frozen first runs"
                        f"{esc(change)}</p>")
        bars = [{"rule_id": r["rule_id"], "estimate": r["estimate"], "lo": r["interval"][0], "hi": r["interval"][1],
                 "margin": r["margin"], "verdict": r["verdict"]} for r in agent["latest_receipts"]]
        body.append(interval_chart(bars, f"{name}: each rule's saving per run with its interval (red: margin)",
                                   f"savings-{name}"))
        cost_rows = "".join(
            f'<tr><td>{r["rule_id"]}</td><td class="t">{esc(r["body"])}</td><td>{esc(r["state"])}</td>'
            f'<td>{_n(r["saving_tokens_per_session"])}</td><td>{r["rent_tokens"]}</td><td>{_n(r["bench_tokens_spent"])}</td>'
            f'<td>{_n(r["break_even_sessions"])}</td></tr>' for r in agent["cost"]["rules"])
        body.append(f'<table class="cost"><tr><th>rule</th><th class="t">body</th><th>state</th><th>saving/session</th>'
                    f'<th>rent</th><th>bench spent</th><th>break-even sessions</th></tr>{cost_rows}</table>')
        body.append("<h3>Receipts</h3>")
        for rule in agent["rules_history"]:
            r = rule["rule"]
            body.append(f'<div class="rule" id="rule-{r["id"]}"><p><b>rule {r["id"]}</b> '
                        f'<span class="muted">{esc(r["state"])}{(" (" + esc(r["evict_reason"]) + ")") if r["evict_reason"] else ""}'
                        f'</span> — {esc(r["body"])}</p>'
                        + "".join(_receipt_block(x) for x in rule["receipts"]) + "</div>")
    spend = [(d["day"], d["weighted_tokens"]) for d in data["bench_spend_by_day"]]
    body.append("<h2>Bench spend over time</h2>")
    body.append(bar_chart(spend or [("0000-00-00", 0.0)], "bench weighted tokens per day", "bench-spend"))
    script = "<script>document.body.dataset.ready = String(document.querySelectorAll('svg.chart').length);</script>"
    return ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" "
            "content=\"width=device-width, initial-scale=1\"><title>warden report</title><style>"
            + STYLE + "</style></head><body>" + "".join(body) + script + "</body></html>\n")
