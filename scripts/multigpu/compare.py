#!/usr/bin/env python3
"""Compare msccl-bench --json rows with nccl_bench.py rows (issue 5).

    python3 scripts/multigpu/compare.py --collective allreduce --dtype f16 --mode graph \
        --ours ours_allreduce_*.jsonl --nccl nccl.jsonl --md cmp.md --plot cmp.png

Reads JSON lines (anything else on a line, such as msccl-bench's table, is
ignored). Our rows are msccl-bench --json records (plan, ranks, bytes,
time_us, algbw_gbps, busbw_gbps, wrong, graph, skipped); their collective is
taken from a "collective" field if present, else from the plan name's
prefix (allreduce_ring -> allreduce). With several plans per size, the
fastest row wins and the table names it (that is what a tuned selection
would pick). NCCL rows are nccl_bench.py records (impl "nccl").

Prints a markdown table: size, ours µs (and plan), NCCL µs, speedup
(NCCL time / ours: above 1 means ours is faster), busbw of both; then the
issue-5 goals for that collective, each marked met / not met / n/a. Writes
the table to --md and, when matplotlib imports, a plot to --plot (time of
both and the speedup against size); without matplotlib it says so and
skips the plot.
"""

import argparse
import glob
import json
import sys

COLLS = ("allreduce", "allgather", "reducescatter", "alltoall")


def human(n):
    for unit, s in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= s and n % s == 0:
            return f"{n // s}{unit}"
    return f"{n}B" if n < 1024 else f"{n / 1024:.1f}K"


def read_rows(patterns):
    rows = []
    for pat in patterns:
        files = sorted(glob.glob(pat)) or [pat]
        for fn in files:
            try:
                fh = open(fn)
            except OSError as e:
                print(f"compare: {e}", file=sys.stderr)
                continue
            with fh:
                for ln in fh:
                    ln = ln.strip()
                    if not ln.startswith("{"):
                        continue
                    try:
                        r = json.loads(ln)
                    except json.JSONDecodeError:
                        continue
                    if isinstance(r, dict) and "bytes" in r:
                        r["_file"] = fn
                        rows.append(r)
    return rows


def collective_of(r):
    if r.get("collective"):
        return r["collective"]
    plan = str(r.get("plan", "")).lower()
    for c in COLLS:
        if plan.startswith(c):
            return c
    return None


def usable(r):
    return not r.get("skipped") and r.get("time_us", 0) > 0


def select(rows, coll, dtype, graph, ranks=None):
    out = []
    for r in rows:
        if collective_of(r) != coll or r.get("type") != dtype or bool(r.get("graph")) != graph:
            continue
        if ranks is not None and r.get("ranks") != ranks:
            continue
        out.append(r)
    return out


def best_per_size(rows):
    best = {}
    for r in rows:
        if not usable(r):
            continue
        b = best.get(r["bytes"])
        if b is None or r["time_us"] < b["time_us"]:
            best[r["bytes"]] = r
    return best


def goals(coll, ours, nccl, ranks):
    """Issue 5's goals (stated for 8 GPUs, no multicast on either side)."""
    res = []
    note = "" if ranks == 8 else f" (goal is stated for 8 GPUs; these rows have {ranks})"
    if coll == "allreduce":
        r = ours.get(1024)
        if r:
            ok = r["time_us"] <= 7.0
            res.append(("1 KiB allreduce <= 7 us", ok, f"{r['time_us']:.2f} us{note}"))
        else:
            res.append(("1 KiB allreduce <= 7 us", None, "no row"))
        sizes = [s for s in sorted(ours) if s <= 1 << 20 and s in nccl]
        if sizes:
            sp = {s: nccl[s]["time_us"] / ours[s]["time_us"] for s in sizes}
            worst = min(sp, key=sp.get)
            res.append(("speedup >= 1.5x NCCL up to 1 MiB", sp[worst] >= 1.5,
                        f"worst {sp[worst]:.2f}x at {human(worst)}{note}"))
        else:
            res.append(("speedup >= 1.5x NCCL up to 1 MiB", None, "no common sizes"))
    if coll in ("allreduce", "allgather"):
        sizes = [s for s in sorted(ours) if (256 << 20) <= s <= (1 << 30) and s in nccl]
        if sizes:
            d = {s: ours[s]["busbw_gbps"] / max(nccl[s]["busbw_gbps"], 1e-9) for s in sizes}
            worst = min(d, key=d.get)
            res.append((f"{coll} busbw >= NCCL at 256 MiB-1 GiB", d[worst] >= 1.0,
                        f"worst {ours[worst]['busbw_gbps']:.1f} vs {nccl[worst]['busbw_gbps']:.1f} GB/s at {human(worst)}{note}"))
        else:
            res.append((f"{coll} busbw >= NCCL at 256 MiB-1 GiB", None, "no common sizes"))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ours", nargs="+", required=True, help="msccl-bench --json files (globs allowed)")
    ap.add_argument("--nccl", nargs="+", required=True, help="nccl_bench.py --jsonl files (globs allowed)")
    ap.add_argument("--collective", default="allreduce", choices=COLLS)
    ap.add_argument("--dtype", default="f16")
    ap.add_argument("--mode", default="eager", choices=("eager", "graph"))
    ap.add_argument("--ranks", type=int, help="only rows with this many ranks (default: all)")
    ap.add_argument("--md", help="write the markdown here too")
    ap.add_argument("--plot", help="PNG to write (needs matplotlib)")
    ap.add_argument("--title", default="")
    a = ap.parse_args()

    graph = a.mode == "graph"
    ours_rows = [r for r in select(read_rows(a.ours), a.collective, a.dtype, graph, a.ranks) if r.get("impl") != "nccl"]
    nccl_rows = [r for r in select(read_rows(a.nccl), a.collective, a.dtype, graph, a.ranks) if r.get("impl") == "nccl"]
    ours, nccl = best_per_size(ours_rows), best_per_size(nccl_rows)
    wrong = [r for r in ours_rows if r.get("wrong", -1) > 0]
    ranks_o = sorted({r.get("ranks") for r in ours_rows})
    ranks_n = sorted({r.get("ranks") for r in nccl_rows})
    sizes = sorted(set(ours) | set(nccl))
    lines = []
    title = a.title or f"{a.collective} {a.dtype} {a.mode}"
    lines.append(f"### {title}")
    lines.append("")
    lines.append(f"ours: {len(ours_rows)} rows from {len({r['_file'] for r in ours_rows})} file(s), ranks {ranks_o}; "
                 f"NCCL: {len(nccl_rows)} rows, ranks {ranks_n}"
                 + (f", NCCL {nccl_rows[0].get('nccl_version')}" if nccl_rows else ""))
    if ranks_o and ranks_n and ranks_o != ranks_n:
        lines.append("")
        lines.append(f"**warning: rank counts differ (ours {ranks_o}, NCCL {ranks_n}); the ratio is not a comparison.**")
    if wrong:
        lines.append("")
        lines.append(f"**warning: {len(wrong)} of our rows report wrong elements, e.g. {wrong[0]['plan']} at {human(wrong[0]['bytes'])}.**")
    lines.append("")
    lines.append("| size | ours (µs) | plan | NCCL (µs) | speedup NCCL/ours | ours busbw (GB/s) | NCCL busbw (GB/s) |")
    lines.append("| ---: | ---: | --- | ---: | ---: | ---: | ---: |")
    for s in sizes:
        o, n = ours.get(s), nccl.get(s)
        ot = f"{o['time_us']:.2f}" if o else "—"
        nt = f"{n['time_us']:.2f}" if n else "—"
        ratio = f"{n['time_us'] / o['time_us']:.2f}×" if (o and n) else "—"
        ob = f"{o['busbw_gbps']:.1f}" if o else "—"
        nb = f"{n['busbw_gbps']:.1f}" if n else "—"
        plan = o.get("plan", "") if o else ""
        lines.append(f"| {human(s)} | {ot} | {plan} | {nt} | {ratio} | {ob} | {nb} |")
    if not sizes:
        lines.append("| (no rows) | | | | | | |")
    gl = goals(a.collective, ours, nccl, (ranks_o or [None])[0])
    if gl:
        lines.append("")
        lines.append("Issue-5 goals:")
        lines.append("")
        for name, ok, detail in gl:
            mark = "n/a" if ok is None else ("met" if ok else "NOT met")
            lines.append(f"- {name}: **{mark}** ({detail})")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.md:
        with open(a.md, "w") as fh:
            fh.write(text)
    if a.plot:
        plot(a.plot, title, sizes, ours, nccl)
    return 0


def plot(path, title, sizes, ours, nccl):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"compare: matplotlib is not importable ({e}); no plot written", file=sys.stderr)
        return
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 7), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
    so = [s for s in sizes if s in ours]
    sn = [s for s in sizes if s in nccl]
    ax1.plot(so, [ours[s]["time_us"] for s in so], "o-", label="msccl-go (best plan)")
    ax1.plot(sn, [nccl[s]["time_us"] for s in sn], "s-", label="NCCL")
    ax1.set_xscale("log", base=2)
    ax1.set_yscale("log")
    ax1.set_ylabel("time (µs)")
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend()
    ax1.set_title(title)
    both = [s for s in sizes if s in ours and s in nccl]
    ax2.plot(both, [nccl[s]["time_us"] / ours[s]["time_us"] for s in both], "d-", color="tab:green")
    ax2.axhline(1.0, color="gray", lw=0.8)
    ax2.set_xscale("log", base=2)
    ax2.set_ylabel("speedup (NCCL / ours)")
    ax2.set_xlabel("message size (bytes)")
    ax2.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"compare: plot written to {path}")


if __name__ == "__main__":
    sys.exit(main())
