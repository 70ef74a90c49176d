#!/usr/bin/env bash
# One machine call for the decode pair of the graphs check: an A/B of server
# settings in the pair against MPS (every round: MPS, tput, then each
# candidate; step stamps on, so every pair's result has its "phase"), then,
# if a candidate beat tput's ratio in at least 2 of 3 rounds (bitwise), the
# check's recipe (decode alone and 3 rounds of pairs, as check-pass.sh
# decpair runs it) with that candidate's settings for the servers, written to
# OUT/graphs-decode.json ("ve_env" in it names them).
#   bench/gpu/probe/pair_pick.sh OUT "tput+VE_X=1,tput+VE_Y=1+VE_Z=2"
# Knobs: AB_BUDGET (220 s), PICK_BUDGET (230 s). Files in OUT: ab.json,
# ab.txt, and with a winner pick.txt and graphs-decode.json.
set -u
OUT=${1:?OUT}
CAND=${2:?candidates}
mkdir -p "$OUT"
make -j"$(nproc)" >/tmp/pair-pick-build.log 2>&1 || { tail -20 /tmp/pair-pick-build.log; exit 1; }
python3 bench/gpu/graphs/run --programs= --torch= --skip-backend-check --skip-alone --pair-stamps \
	--decode-seconds 6 --pair-rounds 3 --pair-policies "$CAND" --budget-s "${AB_BUDGET:-220}" \
	--out /tmp/pair-pick-ab --json "$OUT/ab.json" >"$OUT/ab.txt" 2>&1
grep -h "decode" "$OUT/ab.txt" | cut -c1-330
WIN=$(python3 - "$OUT/ab.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))["decode_replay"]
except (OSError, ValueError, KeyError):
    print("")
    raise SystemExit(0)
base = (d.get("pair_rounds") or {}).get("ratios") or []
best = None
for pol, e in (d.get("pair_policies") or {}).items():
    r = e.get("ratios") or []
    wins = sum(1 for a, b in zip(r, base) if a > b)
    if len(r) >= 3 and wins >= 2 and e.get("bitwise") and (best is None or e["vs_mps"] > best[1]):
        best = (pol, e["vs_mps"])
print(best[0] if best else "")
PY
)
echo "winner: ${WIN:-none}"
[ -n "$WIN" ] || exit 0
ARGS=()
IFS=+ read -ra parts <<<"$WIN"
for kv in "${parts[@]:1}"; do
	ARGS+=(--ve-env "pair:$kv" --ve-env "decode:$kv")
done
python3 bench/gpu/graphs/run --programs= --torch= --skip-backend-check --pair-rounds 3 \
	--budget-s "${PICK_BUDGET:-230}" --out /tmp/pair-pick "${ARGS[@]}" \
	--json "$OUT/graphs-decode.json" >"$OUT/pick.txt" 2>&1
tail -12 "$OUT/pick.txt"
