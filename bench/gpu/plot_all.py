#!/usr/bin/env python3
"""Every plot of a results folder, redrawn from its JSON/CSV in one command
(dependency-free, like each plot script it calls):

    bench/gpu/plot_all.py [bench/results] [--dry-run]

  sim-*.json         bench/plot_sim.py       (ve-sim results)
  *metrics*.csv      bench/gpu/plot_metrics.py (metrics_scrape)
  coloc.json         bench/gpu/plot_coloc.py  (what bench/gpu/coloc writes)
  mixed*.json        bench/gpu/plot_mixed.py
  decode*.json       bench/gpu/plot_decode.py
Each SVG goes next to its source, with the source's name. Subfolders too.
"""
import fnmatch
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
RULES = [("sim-*.json", os.path.join(BENCH, "plot_sim.py")),
         ("*metrics*.csv", os.path.join(HERE, "plot_metrics.py")),
         ("coloc.json", os.path.join(HERE, "plot_coloc.py")),
         ("mixed*.json", os.path.join(HERE, "plot_mixed.py")),
         ("decode*.json", os.path.join(HERE, "plot_decode.py"))]


def main(argv):
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    dry = "--dry-run" in argv
    args = [a for a in argv if a != "--dry-run"]
    root = args[0] if args else os.path.join(BENCH, "results")
    if not os.path.isdir(root):
        print(f"plot_all: {root} is not a folder", file=sys.stderr)
        return 2
    done = failed = 0
    for d, _, files in sorted(os.walk(root)):
        for f in sorted(files):
            for pat, script in RULES:
                if not fnmatch.fnmatch(f, pat):
                    continue
                src = os.path.join(d, f)
                dst = os.path.splitext(src)[0] + ".svg"
                if dry:
                    print(f"{os.path.relpath(script, BENCH)} {src} {dst}")
                    break
                r = subprocess.run([sys.executable, script, src, dst], capture_output=True,
                                   text=True, timeout=120)
                if r.returncode == 0:
                    done += 1
                    print(f"ok   {dst}")
                else:
                    failed += 1
                    print(f"FAIL {src}: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
                break
    if not dry:
        print(f"{done} plots drawn, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
