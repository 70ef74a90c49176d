#!/usr/bin/env python3
"""Checks a torch_determinism.py result (stdin) against a reference run.

  build/ve-run -- python3 bench/gpu/torch_determinism.py soak | \
      python3 tests/soak/same_digests.py REFERENCE.json

REFERENCE.json is the same script's output from a native run. Exit 0 when
every workload's digests equal the reference's first digest (the results
are bitwise what the GPU gives alone), 1 otherwise, with the difference on
stderr. This is what a --cmd client of tests/soak/run uses to say "right".
"""
import json
import sys


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        ref = json.load(f)
    text = sys.stdin.read().strip().splitlines()
    if not text:
        print("same_digests: no result on stdin", file=sys.stderr)
        return 1
    got = json.loads(text[-1])
    bad = 0
    for name, want in ref.get("workloads", {}).items():
        if "digests" not in want:
            continue
        have = got.get("workloads", {}).get(name, {})
        ds = have.get("digests")
        if not ds:
            print("same_digests: %s: no digests (%s)" % (name, have.get("error")), file=sys.stderr)
            bad += 1
            continue
        wrong = [d for d in ds if d != want["digests"][0]]
        if wrong:
            print("same_digests: %s: %d of %d digests differ from the reference"
                  % (name, len(wrong), len(ds)), file=sys.stderr)
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
