#!/usr/bin/env bash
# Slurm Epilog (root, each node, after a job). Other jobs may still share the
# GPUs, so by default ved and MPS keep running. On exclusive nodes where the
# prolog started the daemons directly, VE_SLURM_STOP=1 drains each GPU of the
# job (its clients are gone already), stops its ved and, when no ved is left,
# MPS. With the systemd units, stop them with systemctl instead.
set -u
[ "${VE_SLURM_STOP:-0}" = 1 ] || exit 0
export VE_SOCKET_DIR=${VE_SOCKET_DIR:-/run/vitamin-e}
export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}
BINDIR=${VE_BINDIR:-/usr/local/bin}
for g in $(echo "${SLURM_JOB_GPUS:-}" | tr ',' ' '); do
	pidf=$VE_SOCKET_DIR/ved-$g.pid
	[ -f "$pidf" ] || continue
	"$BINDIR/ve-ctl" --device "$g" drain --wait --timeout 30 >/dev/null 2>&1
	kill -TERM "$(cat "$pidf")" 2>/dev/null
	rm -f "$pidf"
done
if ! ls "$VE_SOCKET_DIR"/ved-*.pid >/dev/null 2>&1; then
	echo quit | nvidia-cuda-mps-control >/dev/null 2>&1
fi
exit 0
