#!/usr/bin/env python3
"""plot-bench: draw msccl-bench results as an SVG line chart.

usage: scripts/plot-bench.py [-o OUT.svg] [--metric busbw|time] [--title T]
                             [--series REGEX] [--machine TEXT] FILE...

FILE is msccl-bench output, as printed (the table) or with --json, or a
log of scripts/gpu/perf.sh (one "== STEP: command" header per run; the
step names the series). Series drawn:
  * each run's plan rows (named by the perf.sh step, else by the plan);
  * its --reference rows ("reference NAME @ STEP": the reference runs on
    the plan's grid, so each run's reference is its own series);
  * --tune's summary: "tuned (fastest per size)" and "built-in table".
--series keeps the series whose name matches REGEX. Standard library only
(no matplotlib on the machines this runs on): the SVG is written by hand.
"""

import argparse
import json
import math
import re
import sys

ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s*$")
REF = re.compile(r"^#\s+reference (\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s+plan/reference ([\d.]+)")
TUNE = re.compile(
    r"^\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+(\S+ instances=\d+ threads=\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(.*?)\s*$")
STEP = re.compile(r"^== (\S+): (.*)$")
HEAD = re.compile(r"^# msccl-bench: plan (\S+)")


def parse(lines, default_name):
    """Returns {series name: [(bytes, time_us, busbw_gbps, note)]}."""
    series = {}
    name = default_name

    def add(s, b, t, bw, note=""):
        series.setdefault(s, []).append((int(b), float(t), float(bw), note))

    for line in lines:
        line = line.rstrip("\n")
        m = STEP.match(line)
        if m:
            name = m.group(1)
            continue
        m = HEAD.match(line)
        if m and name == default_name:
            name = m.group(1)
            continue
        if line.startswith("{"):
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("skipped"):
                continue
            add(r.get("plan", name), r["bytes"], r["time_us"], r["busbw_gbps"])
            ref = r.get("reference")
            if ref and not ref.get("skipped"):
                add("reference %s @ %s" % (ref["name"], r.get("plan", name)), r["bytes"], ref["time_us"], ref["busbw_gbps"])
            continue
        m = TUNE.match(line)
        if m:
            add("tuned (fastest per size)", m.group(1), m.group(2), m.group(3), m.group(4))
            if m.group(5) != "N/A":
                add("built-in table", m.group(1), m.group(5), m.group(6), m.group(8))
            continue
        m = ROW.match(line)
        if m:
            add(name, m.group(1), m.group(5), m.group(7))
            continue
        m = REF.match(line)
        if m and name in series:
            b = series[name][-1][0]
            add("reference %s @ %s" % (m.group(1), name), b, m.group(2), m.group(4))
    return series


def size_label(b):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= div and b % div == 0:
            return "%d%s" % (b // div, unit)
    return str(b)


def nice_ticks(lo, hi, n=6):
    if hi <= lo:
        hi = lo + 1
    step = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(step))
    for m in (1, 2, 2.5, 5, 10):
        if step <= m * mag:
            step = m * mag
            break
    start = math.floor(lo / step) * step
    ticks = []
    v = start
    while v <= hi + step * 0.5:
        ticks.append(v)
        v += step
    return ticks


COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def svg(series, metric, title, machine, xlabel="message size (bytes)", ylabel=None):
    W, H = 860, 500
    L, R, T, B = 70, 250, 50, 60
    pw, ph = W - L - R, H - T - B
    idx = 1 if metric == "time" else 2
    pts = [(p[0], p[idx]) for s in series.values() for p in s if p[idx] > 0]
    if not pts:
        raise SystemExit("plot-bench: no rows to plot")
    xs = [math.log2(b) for b, _ in pts]
    x0, x1 = math.floor(min(xs)), math.ceil(max(xs))
    if x1 == x0:
        x1 = x0 + 1
    logy = metric == "time"
    if logy:
        ys = [math.log10(v) for _, v in pts]
        y0, y1 = math.floor(min(ys)), math.ceil(max(ys))
        if y1 == y0:
            y1 = y0 + 1
        yt = list(range(y0, y1 + 1))
    else:
        yt = nice_ticks(0, max(v for _, v in pts) * 1.05)
        y0, y1 = yt[0], yt[-1]

    def X(b):
        return L + (math.log2(b) - x0) / (x1 - x0) * pw

    def Y(v):
        u = math.log10(v) if logy else v
        return T + ph - (u - y0) / (y1 - y0) * ph

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">' % (W, H, W, H),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>' % (L, esc(title))]
    if machine:
        out.append('<text x="%d" y="40" fill="#555">%s</text>' % (L, esc(machine)))
    step = 2 if x1 - x0 > 12 else 1
    for e in range(x0, x1 + 1, step):
        x = L + (e - x0) / (x1 - x0) * pw
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>' % (x, T, x, T + ph))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (x, T + ph + 16, size_label(1 << e)))
    for t in yt:
        y = T + ph - (t - y0) / (y1 - y0) * ph
        label = ("%g" % (10 ** t)) if logy else ("%g" % t)
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>' % (L, y, L + pw, y))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (L - 6, y + 4, label))
    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>' % (L, T, pw, ph))
    out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % (L + pw / 2, H - 18, esc(xlabel)))
    ylab = ylabel or ("time per collective (µs, log)" if logy else "bus bandwidth (GB/s)")
    out.append('<text transform="translate(18,%d) rotate(-90)" text-anchor="middle">%s</text>' % (T + ph / 2, ylab))
    # "reference NAME @ STEP" names which run's grid a reference ran on;
    # when each NAME ran beside one step only (a sweep), the step adds
    # nothing to the legend but length.
    refs = [n.split(" @ ")[0] for n in series if n.startswith("reference ")]
    short = len(refs) == len(set(refs))
    for i, (name, rows) in enumerate(series.items()):
        c = COLORS[i % len(COLORS)]
        label = name.split(" @ ")[0] if short and name.startswith("reference ") else name
        dash = ' stroke-dasharray="6,4"' if name.startswith("reference") or name == "built-in table" else ""
        rows = sorted((r for r in rows if r[idx] > 0), key=lambda r: r[0])
        path = " ".join("%.1f,%.1f" % (X(r[0]), Y(r[idx])) for r in rows)
        out.append('<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>' % (c, dash, path))
        for r in rows:
            tip = "%s: %s, %.2f us, %.2f GB/s%s" % (name, size_label(r[0]), r[1], r[2], (" (" + r[3] + ")") if r[3] else "")
            out.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"><title>%s</title></circle>' % (X(r[0]), Y(r[idx]), c, esc(tip)))
        ly = T + 10 + i * 18
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>' % (L + pw + 12, ly, L + pw + 36, ly, c, dash))
        out.append('<text x="%d" y="%d">%s</text>' % (L + pw + 42, ly + 4, esc(label[:34])))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("-o", "--out", default="-")
    ap.add_argument("--metric", choices=["busbw", "time"], default="busbw")
    ap.add_argument("--title", default="msccl-bench")
    ap.add_argument("--machine", default="")
    ap.add_argument("--series", default="")
    a = ap.parse_args(argv)
    series = {}
    for f in a.files:
        try:
            with open(f) as fh:
                got = parse(fh, f)
        except OSError as e:
            sys.exit("plot-bench: %s" % e)
        for k, v in got.items():
            series.setdefault(k, []).extend(v)
    if a.series:
        try:
            keep = re.compile(a.series)
        except re.error as e:
            sys.exit("plot-bench: --series %s: %s" % (a.series, e))
        series = {k: v for k, v in series.items() if keep.search(k)}
    if not series:
        sys.exit("plot-bench: no msccl-bench rows in %s" % ", ".join(a.files))
    text = svg(series, a.metric, a.title, a.machine)
    if a.out == "-":
        sys.stdout.write(text)
    else:
        with open(a.out, "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
