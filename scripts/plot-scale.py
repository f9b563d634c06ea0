#!/usr/bin/env python3
"""plot-scale: draw a proof-scaling table (docs/BENCHMARKS.md) as an SVG.

usage: scripts/plot-scale.py -o OUT.svg [--title T] [--machine TEXT] FILE[=LABEL]...

Each FILE holds one row per measurement, whitespace separated:
    RANKS CPU_SECONDS PEAK_RSS_MB
(lines starting with # are skipped). Both columns of every file are drawn
against the rank count on log axes, with the chart code of plot-bench.py;
LABEL (default: none) names the file's two lines in the legend, so that
two builds measured side by side can share one chart.
"""

import argparse
import importlib.util
import os
import sys


def load_plot_bench():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plot-bench.py")
    spec = importlib.util.spec_from_file_location("plot_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", required=True)
    ap.add_argument("--title", default="ring allreduce proof against rank count")
    ap.add_argument("--machine", default="")
    ap.add_argument("file", nargs="+")
    a = ap.parse_args(argv)
    series = {}
    for arg in a.file:
        path, _, label = arg.partition("=")
        suffix = ", " + label if label else ""
        cpu, rss = [], []
        for line in open(path):
            f = line.split()
            if not f or f[0].startswith("#"):
                continue
            n, sec, mb = int(f[0]), float(f[1]), float(f[2])
            # plot-bench rows are (x, time, bandwidth, note); "time"
            # draws the second field on a log axis.
            cpu.append((n, sec, 0.0, ""))
            rss.append((n, mb / 1024, 0.0, ""))
        series["CPU time (s)" + suffix] = cpu
        series["peak RSS (GB)" + suffix] = rss
    pb = load_plot_bench()
    out = pb.svg(series, "time", a.title, a.machine,
                 xlabel="ranks", ylabel="CPU seconds / peak RSS GB (log)")
    with open(a.o, "w") as w:
        w.write(out)


if __name__ == "__main__":
    main(sys.argv[1:])
