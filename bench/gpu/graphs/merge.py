#!/usr/bin/env python3
"""Merges partial graphs/run results into a full one.

  python3 bench/gpu/graphs/merge.py FULL.json PART.json... -o OUT.json

FULL.json is a whole run (every program, every mode). Each PART.json is a
later run of a few programs or modes (--programs/--torch/--modes) or of the
decode replay only: a mode measured in a part replaces the same mode of the
same program (its native run comes along, so "bitwise" and "time_vs_native"
stay against the native run of the same call), and a part's decode replay
replaces the full run's. Every replaced entry and the decode replay name the
part's date and commit in "measured", and "merged_from" lists the inputs, so
a reader sees which figure came from which call. The summary is recomputed.
"""
import argparse
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def stamp(d):
    m = d.get("machine", {})
    return {"date": d.get("date"), "commit": m.get("commit")}


def summary(d):
    ps = d["programs"]
    bad = [p["name"] for p in ps
           if not all(v.get("pass") and v.get("bitwise")
                      for v in list(p["modes"].values()) + list(p.get("extra_modes", {}).values()))]
    conc = next((p for p in ps if "concurrent" in p["name"]), None)
    s = dict(d.get("summary", {}))
    s.update(programs=len(ps), all_pass_bitwise=len(ps) - len(bad), not_all_pass=bad)
    if conc:
        s["concurrent_time_vs_native"] = {m: v.get("time_vs_native") for m, v in conc["modes"].items()}
    return s


def merge(full, parts):
    out = json.loads(json.dumps(full))
    byname = {p["name"]: p for p in out["programs"]}
    for part in parts:
        st = stamp(part)
        for p in part.get("programs", []):
            base = byname.get(p["name"])
            if base is None:
                p = dict(p, measured=st)
                out["programs"].append(p)
                byname[p["name"]] = p
                continue
            changed = False
            for key in ("modes", "extra_modes"):
                for mode, v in p.get(key, {}).items():
                    base.setdefault(key, {})[mode] = v
                    changed = True
            if changed:
                base["native"] = p.get("native") or base.get("native")
                base["measured"] = st
        r = part.get("decode_replay")
        if r and r.get("ve_vs_native") is not None:
            out["decode_replay"] = dict(r, measured=st)
    out["summary"] = summary(out)
    out["merged_from"] = [stamp(full)] + [stamp(p) for p in parts]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("full")
    ap.add_argument("parts", nargs="+")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    try:
        full = load(a.full)
        parts = [load(p) for p in a.parts]
    except (OSError, ValueError) as e:
        print(f"merge: {e}", file=sys.stderr)
        return 2
    if "programs" not in full:
        print(f"merge: {a.full} has no programs (not a graphs/run result)", file=sys.stderr)
        return 2
    out = merge(full, parts)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    s = out["summary"]
    print(f"{s['programs']} programs, {s['all_pass_bitwise']} pass bitwise in every mode; "
          f"decode replay {out.get('decode_replay', {}).get('ve_vs_native')}x native, "
          f"pair {out.get('decode_replay', {}).get('pair_ve_vs_mps')}x MPS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
