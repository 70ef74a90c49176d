#!/usr/bin/env bash
# Diagnostics of CUDA graphs on one GPU, short (about 3 min): where a graph's
# kernels run for each way of giving its nodes a green context
# (tests/gpu/gpu_graph_ctx), a PyTorch graph workload natively with a Python
# stack dump when it runs past DUMP_S (faulthandler on SIGABRT), and the
# multi-threaded cuSPARSE workload natively and under ve-run.
#   bench/gpu/graphs/diag.sh OUTDIR
# Writes OUTDIR/diag.txt (the short table) and OUTDIR/diag-logs.tgz.
set -u
OUTDIR=${1:?usage: diag.sh OUTDIR}
W=$(mktemp -d)
mkdir -p "$OUTDIR"
trap '(cd "$W" && tar czf "$OUTDIR/diag-logs.tgz" --exclude="gpu_*" . ) 2>/dev/null; rm -rf "$W"' EXIT
export CUBLAS_WORKSPACE_CONFIG=:4096:8 PYTHONUNBUFFERED=1
note() { echo "[$(date +%H:%M:%S)] $*"; }
make -j"$(nproc)" >"$W/build.log" 2>&1 || { tail -20 "$W/build.log"; exit 1; }
[ -x build/gpu/gpu_graph_ctx ] || JOBS=$(nproc) bash tests/gpu/build.sh build/gpu >"$W/gpu-build.log" 2>&1
note "graph node contexts"
timeout 60 build/gpu/gpu_graph_ctx >"$W/graph_ctx.txt" 2>&1; echo "rc=$?" >>"$W/graph_ctx.txt"
grep -E "GRAPH_CTX|FAIL|rc=" "$W/graph_ctx.txt"
for i in 1 2; do
	note "torch_graph_replay native, try $i"
	t=$(date +%s.%N)
	timeout -s ABRT ${DUMP_S:-40} python3 -X faulthandler bench/gpu/graphs/torch_graph_replay.py \
		>"$W/replay-native-$i.out" 2>"$W/replay-native-$i.err"
	echo "rc=$? wall=$(python3 -c "import time;print(round(time.time()-$t,1))")" | tee -a "$W/replay-native-$i.err"
	tail -c 300 "$W/replay-native-$i.out"; grep -A12 "most recent call first" "$W/replay-native-$i.err" | head -14
done
note "torch_sparse_threads: native, ve_tput, ve_chaos"
timeout 200 python3 bench/gpu/graphs/run --programs '' --torch torch_sparse_threads --modes native,ve_tput,ve_chaos \
	--skip-decode --skip-pair --skip-backend-check --budget-s 180 --out "$W/sparse" --json "$OUTDIR/sparse.json" \
	>"$W/sparse.txt" 2>&1
tail -5 "$W/sparse.txt"
