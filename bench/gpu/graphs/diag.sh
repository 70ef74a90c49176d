#!/usr/bin/env bash
# Diagnostics of CUDA graphs on one GPU, short (about 2-3 min):
#  1. tests/gpu/gpu_graph_ctx: where a graph's kernels run for each way of
#     giving its nodes a green context, and what a captured node holds;
#  2. tests/gpu/gpu_graph_where: the most SMs one graph replay uses against a
#     plain launch of the same kernel, natively and under ve-run (policy
#     fixed:leaves=4/12 keeps the process on 32 SMs; tput);
#  3. bench/gpu/graphs/run on some graph programs and PyTorch workloads
#     (GRAPH_PROGRAMS, GRAPH_TORCH) natively, under ve_tput and ve_chaos.
#   bench/gpu/graphs/diag.sh OUTDIR
# Writes OUTDIR/diag.txt (the short table), OUTDIR/graphs-diag.json and
# OUTDIR/diag-logs.tgz.
set -u
OUTDIR=${1:?usage: diag.sh OUTDIR}
W=$(mktemp -d)
mkdir -p "$OUTDIR"
trap '(cd "$W" && tar czf "$OUTDIR/diag-logs.tgz" --exclude="gpu_*" . ) 2>/dev/null; rm -rf "$W"' EXIT
export CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONUNBUFFERED=1
note() { echo "[$(date +%H:%M:%S)] $*"; }
{
make -j"$(nproc)" >"$W/build.log" 2>&1 || { tail -20 "$W/build.log"; exit 1; }
for p in gpu_graph_ctx gpu_graph_where; do
	[ -x build/gpu/$p ] || { JOBS=$(nproc) bash tests/gpu/build.sh build/gpu >"$W/gpu-build.log" 2>&1; break; }
done
note "graph node contexts (natively)"
timeout 60 build/gpu/gpu_graph_ctx >"$W/graph_ctx.txt" 2>&1; echo "rc=$?" >>"$W/graph_ctx.txt"
grep -E "GRAPH_CTX|FAIL|SUMMARY" "$W/graph_ctx.txt"
for m in native fixed:leaves=4/12 tput; do
	note "graph_where: $m"
	if [ $m = native ]; then
		timeout 60 build/gpu/gpu_graph_where >"$W/where-native.txt" 2>&1
	else
		timeout 60 env VE_LOG_LEVEL=info build/ve-run --policy "$m" -- build/gpu/gpu_graph_where \
			>"$W/where-${m%%:*}.txt" 2>&1
	fi
	grep -hE "WHERE|FAIL|SUMMARY|DIGEST|graph copies" "$W"/where-${m%%:*}.txt
done
note "graph programs and PyTorch workloads: native, ve_tput, ve_chaos"
timeout ${GRAPHS_TIMEOUT:-200} python3 bench/gpu/graphs/run \
	--programs "${GRAPH_PROGRAMS:-gpu_graph,gpu_graph_child,gpu_graph_update,gpu_graph_concurrent,gpu_graph_capture_to}" \
	--torch "${GRAPH_TORCH:-torch_graph_replay}" --modes native,ve_tput,ve_chaos \
	--skip-decode --skip-pair --skip-backend-check --budget-s ${GRAPHS_BUDGET:-170} --out "$W/graphs" \
	--json "$OUTDIR/graphs-diag.json" >"$W/graphs.txt" 2>&1
tail -12 "$W/graphs.txt"
grep -h "graph copies" "$W"/graphs/logs/*.log 2>/dev/null | sort | uniq -c | head
} 2>&1 | tee "$OUTDIR/diag.txt"
