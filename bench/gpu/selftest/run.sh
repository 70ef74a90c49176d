#!/usr/bin/env bash
# CPU-only self-test of the GPU orchestrators: bench/gpu/coloc and
# bench/gpu/mixed run end to end with stand-ins for the training job, the LLM
# server and the MPS control daemon, and with the real ve-run, ved and
# libve.so on the CPU fake driver (so ved registration is checked for real).
# Then both result files are checked against the documented schema and
# plotted. About 4 minutes; no GPU, no torch.
#   bench/gpu/selftest/run.sh [TMPDIR]
set -eu
cd "$(dirname "$0")/../../.."
T=${1:-$(mktemp -d /tmp/ve-bench-selftest.XXXXXX)}
mkdir -p "$T"
make -j"$(nproc)" build/ved build/ve-run build/libve.so build/fakecuda/libcuda.so.1 > "$T/build.log" 2>&1 ||
	{ tail -20 "$T/build.log"; exit 1; }
S=bench/gpu/selftest
export VE_BENCH_TRAIN=$S/fake_train.py VE_BENCH_SERVE=$S/fake_serve.py VE_BENCH_MPS_BIN=$PWD/$S/bin
FAKE="VE_LIBCUDA=$PWD/build/fakecuda/libcuda.so.1"
echo "== coloc (pairs a,b; all five modes; 1 run of 2 x 1 s windows)"
bench/gpu/coloc --pairs a,b --runs 1 --windows 2 --window-s 1 --lead-s 2 --ve-env "$FAKE" \
	--out "$T/coloc.json" --outdir "$T/coloc"
echo "== coloc --merge (pair c, mps only, --skip-solo is refused without hostphase in --out)"
if bench/gpu/coloc --pairs c --modes mps --merge --skip-solo --out "$T/coloc.json" --outdir "$T/coloc2" --dry-run 2>/dev/null; then
	echo "FAIL: --skip-solo accepted without solo figures"; exit 1
fi
bench/gpu/coloc --pairs c --modes mps,ve_tput@b16 --ve-env ve_tput@b16:VE_PIPE_BUDGET=16 --ve-env "$FAKE" \
	--quick --lead-s 2 --merge --out "$T/coloc.json" --outdir "$T/coloc2"
echo "== coloc stopping early (--stop-after-s): partial results written, exit status 4;"
echo "   no fake driver here, so the shim never starts and ve_verified must say false"
rc=0
bench/gpu/coloc --pairs a --modes timeslice,mps --windows 1 --window-s 1 --lead-s 2 --stop-after-s 30 \
	--out "$T/partial.json" --outdir "$T/partial" > "$T/partial.txt" 2>&1 || rc=$?
tail -3 "$T/partial.txt"
[ "$rc" = 4 ] && grep -q '"stopped": "stopped before round' "$T/partial.json" || { echo "FAIL: rc $rc"; exit 1; }
echo "== coloc --merge-from: the partial call's pair a merged into a copy, no GPU; a wrong file refused"
cp "$T/coloc.json" "$T/merged.json"
bench/gpu/coloc --merge-from "$T/partial.json" --out "$T/merged.json" --no-plot > "$T/merged.txt"
python3 - "$T/coloc.json" "$T/partial.json" "$T/merged.json" <<'PY'
import json, sys
base, part, merged = (json.load(open(f)) for f in sys.argv[1:4])
assert len(merged["calls"]) == len(base["calls"]) + len(part["calls"]), merged["calls"]
assert merged["calls"][-1]["merged_from"] == "partial.json", merged["calls"][-1]
a = next(p for p in merged["pairs"] if p["name"] == "big+small")
pa = next(p for p in part["pairs"] if p["name"] == "big+small")
for m in pa["modes"]:
    assert a["modes"][m]["runs"] == pa["modes"][m]["runs"], m
assert {p["name"] for p in merged["pairs"]} == {p["name"] for p in base["pairs"]}
PY
if bench/gpu/coloc --merge-from "$T/build.log" --out "$T/merged.json" 2>/dev/null; then
	echo "FAIL: --merge-from took a file that is not a coloc result"; exit 1
fi
echo "== mixed --quick, then a second call merged into it (rate and SLOs reused)"
bench/gpu/mixed --quick --duration 2 --best-by train_within_10pct --ve-env "$FAKE" --out "$T/mixed.json" --outdir "$T/mixed"
bench/gpu/mixed --quick --duration 2 --modes ve_whole --merge --out "$T/mixed.json" --outdir "$T/mixed2" \
	--ve-env "$FAKE" | tee "$T/mixed2.txt" | grep -E "reusing|plan:"
grep -q "VE_TPOT_MS = the TPOT SLO" "$T/mixed.json" || { echo "FAIL: ve_tpot step deadlines not recorded"; exit 1; }
grep -lq "tpot_ms=" "$T"/mixed/logs/*ve_tpot*ved.log 2>/dev/null ||
	grep -rq "tpot_ms=" "$T/mixed/logs" || { echo "FAIL: ved's tpot policy without tpot_ms"; exit 1; }
echo "== mixed with the server and the training pinned to CPU 0 (taskset in front of every command)"
bench/gpu/mixed --quick --duration 2 --modes ve_whole --server-cpus 0 --train-cpus 0 --runs 1 \
	--out "$T/mixed-pin.json" --outdir "$T/mixed-pin" --ve-env "$FAKE" >"$T/mixed-pin.txt" 2>&1 ||
	{ tail -20 "$T/mixed-pin.txt"; echo "FAIL: pinned mixed"; exit 1; }
grep -q "CPUs: server 0, training 0" "$T/mixed-pin.json" || { echo "FAIL: pinning not recorded"; exit 1; }
grep -rqs "taskset" "$T/mixed-pin" || { echo "FAIL: no taskset in the commands"; exit 1; }
python3 - "$T" <<'PY'
import json, sys
T = sys.argv[1]
c = json.load(open(f"{T}/coloc.json"))
assert set(c) >= {"date", "machine", "method", "pairs", "solo"}, c.keys()
names = [p["name"] for p in c["pairs"]]
assert names == ["big+small", "dense+dense", "hostphase+dense"], names
granted = []
for p in c["pairs"]:
    assert len(p["jobs"]) == 2
    for m, e in p["modes"].items():
        for k in ("aggregate", "runs", "jobs", "bitwise", "mps_verified", "sm_count_seen"):
            assert k in e, (p["name"], m, k)
        assert e["aggregate"] is not None and e["runs"], (p["name"], m, e["errors"])
        assert e["mps_verified"] is True, (p["name"], m, e["mps_detail"])
        if m.startswith("ve_"):
            assert e["ve_verified"] is True and e["ved_died"] is False, (p["name"], m, e)
            # ved's log line as each client left: the SMs it was granted
            # (the stand-ins launch nothing: a client is granted SMs only
            # while it is alone, so a pair whose two clients register
            # within one tick shows 0; some pair shows more, below)
            g = e["grant_sms_mean"]
            assert len(g) == 2 and all(x is not None and 0 <= x <= 132 for x in g), (p["name"], m, g)
            granted.append(max(g))
        assert e["bitwise"] is (m != "mps_split"), (p["name"], m, e["bitwise"])
        assert e["sm_count_seen"] == ([66] if m == "mps_split" else [132]), e["sm_count_seen"]
assert max(granted) > 0, granted
assert set(c["pairs"][2]["modes"]) == {"mps", "ve_tput@b16"}, c["pairs"][2]["modes"].keys()
assert c["pairs"][2]["modes"]["ve_tput@b16"]["ve_env"]["VE_PIPE_BUDGET"] == "16"
for j in ("big", "small", "dense", "hostphase"):
    e = c["solo"][j]
    for k in ("ve_vs_native", "native_steps_per_s", "ve_steps_per_s", "runs", "bitwise"):
        assert k in e and e[k] is not None, (j, k)
    assert e["bitwise"] and e["ve_verified"] and e["mps_verified"], (j, e)
m = json.load(open(f"{T}/mixed.json"))
assert set(m) >= {"date", "machine", "method", "solo", "modes"}
assert set(m["solo"]) >= {"infer_p50_ms", "infer_p99_ms", "ttft_p99_ms", "tpot_p99_ms"}
assert set(m["modes"]) == {"timeslice", "mps", "mps_split", "mps_priority", "ve_tput", "ve_tpot", "ve_whole"}, m["modes"].keys()
assert len(m["calls"]) == 2 and m["rate_rps"] == 1.4, (m["calls"], m["rate_rps"])
for k, e in m["modes"].items():
    for f in ("infer_p50_ms", "infer_p99_ms", "ttft_p99_ms", "tpot_p99_ms", "tpot_slo_violation",
              "ttft_slo_violation", "train_norm", "tokens_identical", "runs", "mps_verified"):
        assert f in e, (k, f)
    assert e["infer_p99_ms"] is not None and e["train_norm"] is not None, (k, e["runs"])
    assert e["mps_verified"] is True, (k, e["runs"])
    assert e["tokens_identical"] is (k != "mps_split"), (k, e["tokens_identical"])
    if k.startswith("ve_"):
        assert e.get("ve_verified") is True, (k, e["runs"])
assert len(m["mps_split_sweep"]) == 2 and len(m["ve_tpot_sweep"]) == 2
assert m["modes"]["mps_split"]["chosen"] in m["mps_split_sweep"]
p = json.load(open(f"{T}/partial.json"))
# That call ran without the fake driver: the shim never started, which the
# verification must report rather than pass.
assert p["solo"]["big"]["ve_verified"] is False, p["solo"]["big"]
assert p["calls"][-1]["rounds_not_run"] == ["r0-a-mps"], p["calls"]
print("schema and verification checks: ok")
PY
python3 bench/gpu/plot_coloc.py "$T/coloc.json" "$T/coloc-replot.svg"
python3 bench/gpu/plot_mixed.py "$T/mixed.json" "$T/mixed-replot.svg"
echo "selftest ok ($T)"
