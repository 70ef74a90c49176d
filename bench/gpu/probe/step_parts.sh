#!/usr/bin/env bash
# bench/gpu/probe/step_parts.c natively and under ve-run, alternating, ROUNDS
# rounds (default 3); VARIANTS adds ve-run runs with settings, as
# "name=VE_X=v,VE_Y=w ...". Prints every run's JSON line, then the medians.
#   bench/gpu/probe/step_parts.sh OUTDIR
set -u
OUT=${1:-/tmp/step-parts}; mkdir -p "$OUT"
make -j"$(nproc)" >"$OUT/build.log" 2>&1 || { tail -5 "$OUT/build.log"; exit 1; }
gcc -O2 -std=c11 -I/usr/local/cuda/include bench/gpu/probe/step_parts.c \
	-L/usr/local/cuda/lib64/stubs -lcuda -o "$OUT/step_parts" >>"$OUT/build.log" 2>&1 || { tail -5 "$OUT/build.log"; exit 1; }
for r in $(seq "${ROUNDS:-3}"); do
	timeout 120 "$OUT/step_parts" native >>"$OUT/runs.jsonl" 2>>"$OUT/err.log"
	timeout 120 build/ve-run --policy tput -- "$OUT/step_parts" ve >>"$OUT/runs.jsonl" 2>>"$OUT/err.log"
	for v in ${VARIANTS:-}; do
		env $(echo "${v#*=}" | tr ',' ' ') timeout 120 build/ve-run --policy tput -- "$OUT/step_parts" "${v%%=*}" \
			>>"$OUT/runs.jsonl" 2>>"$OUT/err.log"
	done
done
python3 - "$OUT/runs.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
labels = []
for r in runs:
    if r["label"] not in labels:
        labels.append(r["label"])
keys = [k for k in runs[0] if k.endswith("_us")]
print("label " + " ".join(keys))
for lb in labels:
    rs = [r for r in runs if r["label"] == lb]
    print(lb + " " + " ".join(f"{statistics.median(r[k] for r in rs if k in r):.2f}" for k in keys))
PY
