"""The benchmark's figures across targets (guest/backlog_bench): a table
for the terminal and an SVG plot of the on/off ratios with their range.

Only ratios measured in one boot mean something under emulation; the
absolute figures are printed for context, not compared across targets.
"""
import html
import math
import re

from .common import format_table
from .results import figures


def _drain_size(fig):
    """The largest drain size that held segments, or None."""
    sizes = sorted({int(m.group(1)) for k in fig for m in [re.match(r"drain_(\d+)_segments$", k)]
                    if m}, reverse=True)
    for n in sizes:
        if fig.get(f"drain_{n}_segments", (0,))[0] > 0:
            return n
    return None


def summary(jobs):
    """One dict per job that carries figures, in job order."""
    out = []
    for j in jobs:
        fig = figures(j.get("cases", []))
        if not fig:
            continue
        n = _drain_size(fig)
        g = lambda k: fig.get(k, (None,))[0]  # noqa: E731
        row = {
            "target": j["target"], "variant": j["variant"],
            "bulk_on": g("bulk_on_goodput"), "bulk_off": g("bulk_off_goodput"),
            "bulk_ratio": (g("bulk_ratio"), g("bulk_ratio_min"), g("bulk_ratio_max")),
            "bulk_iqr": (g("bulk_ratio_q1"), g("bulk_ratio_q3")), "bulk_pairs": g("bulk_pairs"),
            "bulk_merges": g("bulk_on_merges"),
            "bulk_drops": (g("bulk_on_backlog_drops"), g("bulk_off_backlog_drops")),
            # the receiver's CPU (busy %, ms per MB) and the sender's (idle %)
            "bulk_busy": (g("bulk_on_receiver_busy"), g("bulk_off_receiver_busy")),
            "bulk_cpu": (g("bulk_on_receiver_cpu"), g("bulk_off_receiver_cpu")),
            "bulk_idle": (g("bulk_on_sender_idle"), g("bulk_off_sender_idle")),
            "drain_n": n, "drain_segs": None, "drain_on": None, "drain_off": None,
            "drain_ratio": (None, None, None), "drain_merges": None, "drain_drops": (None, None),
            "release": g("drain_0_on_time"),
        }
        if n is not None:
            row.update({
                "drain_segs": g(f"drain_{n}_segments"),
                "drain_on": g(f"drain_{n}_on_time"), "drain_off": g(f"drain_{n}_off_time"),
                "drain_ratio": (g(f"drain_{n}_ratio"), g(f"drain_{n}_ratio_min"),
                                g(f"drain_{n}_ratio_max")),
                "drain_merges": g(f"drain_{n}_on_merges"),
                "drain_drops": (g(f"drain_{n}_on_backlog_drops"), g(f"drain_{n}_off_backlog_drops")),
            })
        out.append(row)
    return out


def _f(v, fmt="{:.1f}"):
    return "-" if v is None else fmt.format(v)


def _ratio(r):
    return "-" if r[0] is None else f"{r[0]:.2f}x {_span(r)}"


def _span(r):
    """'(min-max)' of a (median, min, max); '-' for a part not reported
    (a benchmark cut off after its median)."""
    return "-" if None in r else f"({r[1]:.2f}-{r[2]:.2f})"


def _pair(p, fmt="{:.0f}"):
    return "/".join(_f(v, fmt) for v in p)


def _iqr(r):
    """'1.25x [1.10-1.40] 9' : the median on/off, its interquartile
    range and the pairs it came from."""
    if r["bulk_ratio"][0] is None:
        return "-"
    q1, q3 = r["bulk_iqr"]
    iqr = f" [{q1:.2f}-{q3:.2f}]" if q1 is not None and q3 is not None else ""
    pairs = f" {r['bulk_pairs']:.0f}" if r["bulk_pairs"] is not None else ""
    return f"{r['bulk_ratio'][0]:.2f}x{iqr}{pairs}"


def table(jobs):
    """The figures as text, or '' when no job measured any."""
    rows = summary(jobs)
    if not rows:
        return ""
    name = lambda r: r["target"] if r["variant"] == "fixed" else f"{r['target']}/{r['variant']}"  # noqa: E731
    bulk = [[name(r), _f(r["bulk_on"]), _f(r["bulk_off"]), _iqr(r), _span(r["bulk_ratio"]),
             _f(r["bulk_merges"], "{:.0f}"), _pair(r["bulk_drops"]), _pair(r["bulk_busy"]),
             _pair(r["bulk_cpu"], "{:.1f}"), _pair(r["bulk_idle"])] for r in rows]
    drain = [[name(r), _f(r["drain_segs"], "{:.0f}"), _f(r["drain_on"]), _f(r["drain_off"]),
              _ratio(r["drain_ratio"]), _f(r["drain_merges"], "{:.0f}"), _pair(r["drain_drops"]),
              _f(r["release"])] for r in rows]
    notes = ["bulk: receive goodput, the receive path steered by RPS to the reader's CPU (the "
             "sender on the other): medians of runs alternating coalescing on and off; on/off "
             "per pair of runs: median [interquartile range] pairs, and (min-max).",
             "rcv busy: the reader's CPU busy, % of the run; ms/MB: its CPU time per MB; "
             "snd idle: the sender's CPU idle, %; each on/off.",
             "a bulk merges of 0 (with coalescing on) means the backlog was never used, "
             "as on one CPU: that row's bulk ratio says nothing.",
             "drain: time from releasing a held socket to recv() returning with N segments "
             "in the backlog (release_sock()); off/on per pair; release: the same with an "
             "empty backlog."]
    return "\n".join([
        format_table(["target", "bulk on MB/s", "off MB/s", "on/off [IQR] pairs", "(range)",
                      "merges", "drops on/off", "rcv busy %", "rcv ms/MB", "snd idle %"],
                      bulk, rule=True), "",
        format_table(["target", "drain segs", "on us", "off us", "off/on (range)", "merges",
                      "drops on/off", "release us"], drain, rule=True)] + notes)


def svg(jobs, title="TCP backlog coalescing, on against off"):
    """A self-contained SVG: two panels of horizontal bars (median) with
    whiskers (min-max) per target, a dashed line at 1x; a bar is blue
    when every pair of runs was better, red when every pair was worse,
    pale when they disagree, grey when the path was not exercised. None
    if no figures."""
    rows = summary(jobs)
    if not rows:
        return None
    # (title, key, label suffix, whether the path was not exercised)
    panels = [("bulk goodput, on/off", "bulk_ratio",
               lambda r: " (backlog unused)" if r["bulk_merges"] == 0 else "",
               lambda r: r["bulk_merges"] == 0),
              ("backlog drain time, off/on", "drain_ratio",
               lambda r: f" ({r['drain_segs']:.0f} segs)" if r["drain_segs"] else "",
               lambda r: not r["drain_merges"])]
    label_w, panel_w, pad, bar_h, gap, top = 130, 300, 150, 18, 8, 56
    height = top + len(rows) * (bar_h + gap) + 40
    width = label_w + 2 * (panel_w + pad)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="10" y="20" font-size="15" font-weight="bold">{html.escape(title)}</text>']
    for p, (ptitle, key, extra, unused) in enumerate(panels):
        x0 = label_w + p * (panel_w + pad)
        vals = [v for r in rows for v in r[key] if v is not None]
        vmax = max(vals + [1.0]) * 1.1
        sx = lambda v: x0 + v / vmax * panel_w  # noqa: E731,B023
        out.append(f'<text x="{x0}" y="42" font-weight="bold">{html.escape(ptitle)}</text>')
        out.append(f'<line x1="{x0}" y1="{top - 6}" x2="{x0}" y2="{height - 34}" stroke="black"/>')
        one = sx(1.0)
        out.append(f'<line x1="{one:.1f}" y1="{top - 6}" x2="{one:.1f}" y2="{height - 34}" '
                   'stroke="#888" stroke-dasharray="4 3"/>')
        for tick in _ticks(vmax):
            tx = sx(tick)
            out.append(f'<text x="{tx:.1f}" y="{height - 20}" text-anchor="middle">{tick:g}x</text>')
        for i, r in enumerate(rows):
            y = top + i * (bar_h + gap)
            if p == 0:
                name = r["target"] if r["variant"] == "fixed" else f"{r['target']}/{r['variant']}"
                out.append(f'<text x="10" y="{y + bar_h - 5}">{html.escape(name)}</text>')
            m, lo, hi = r[key]
            if m is None:
                out.append(f'<text x="{x0 + 4}" y="{y + bar_h - 5}" fill="#666">not measured</text>')
                continue
            # Blue: better in every pair; red: worse in every pair;
            # pale: the pairs disagree (no difference beyond the spread).
            colour = ("#2b7bba" if lo is not None and lo > 1.0 else
                      "#c0392b" if hi is not None and hi < 1.0 else "#9db7cf")
            if unused(r):
                colour = "#999999"  # not exercised: no meaning either way
            out.append(f'<rect x="{x0}" y="{y}" width="{sx(m) - x0:.1f}" height="{bar_h}" '
                       f'fill="{colour}" fill-opacity="0.75"><title>{m:.2f}x</title></rect>')
            if lo is not None and hi is not None:
                cy = y + bar_h / 2
                out.append(f'<line x1="{sx(lo):.1f}" y1="{cy}" x2="{sx(hi):.1f}" y2="{cy}" stroke="black"/>')
                for v in (lo, hi):
                    out.append(f'<line x1="{sx(v):.1f}" y1="{y + 3}" x2="{sx(v):.1f}" '
                               f'y2="{y + bar_h - 3}" stroke="black"/>')
            label = f"{m:.2f}x{extra(r)}"
            out.append(f'<text x="{max(sx(hi or m), sx(m)) + 4:.1f}" y="{y + bar_h - 5}">'
                       f'{html.escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _ticks(vmax):
    raw = vmax / 4
    mag = 10 ** math.floor(math.log10(raw))
    step = mag * (1 if raw / mag < 2 else 2 if raw / mag < 5 else 5)
    t, out = 0.0, []
    while t <= vmax:
        out.append(t)
        t += step
    return out
