#!/usr/bin/env bash
# Slurm Prolog (runs as root on each node before a job): MPS and one ved per
# GPU of the job, running and admitting clients (docs/operations.md, "Slurm").
# With the systemd units installed it only starts what is not running; without
# them it starts the daemons directly and leaves pid files in $VE_SOCKET_DIR.
# Never fails the job for Vitamin-E's sake: a missing ved means the job's
# processes coordinate themselves (embedded) or wait in safe mode.
set -u
export VE_SOCKET_DIR=${VE_SOCKET_DIR:-/run/vitamin-e}
export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}
export CUDA_MPS_LOG_DIRECTORY=${CUDA_MPS_LOG_DIRECTORY:-/var/log/nvidia-mps}
BINDIR=${VE_BINDIR:-/usr/local/bin}
CONF=${VE_CONF:-/etc/vitamin-e/ved.conf}
log() { logger -t vitamin-e-prolog -- "job ${SLURM_JOB_ID:-?}: $*" 2>/dev/null || echo "$*" >&2; }

# The job's GPUs as host indices: SLURM_JOB_GPUS ("0,2"), else none.
gpus=$(echo "${SLURM_JOB_GPUS:-}" | tr ',' ' ')
[ -n "$gpus" ] || exit 0

if command -v systemctl >/dev/null 2>&1 && systemctl cat ved@.service >/dev/null 2>&1; then
	systemctl start vitamin-e-mps.service || log "could not start vitamin-e-mps.service"
	for g in $gpus; do
		systemctl start "ved@$g.service" || log "could not start ved@$g"
	done
else
	mkdir -p "$VE_SOCKET_DIR" "$CUDA_MPS_LOG_DIRECTORY" && chmod 0711 "$VE_SOCKET_DIR"
	if ! pgrep -x nvidia-cuda-mps-control >/dev/null 2>&1; then
		nvidia-cuda-mps-control -d || log "could not start the MPS control daemon"
	fi
	for g in $gpus; do
		"$BINDIR/ve-ctl" --device "$g" status >/dev/null 2>&1 && continue
		setsid "$BINDIR/ved" --device "$g" --config "$CONF" \
			>>"$VE_SOCKET_DIR/ved-$g.log" 2>&1 </dev/null &
		echo $! >"$VE_SOCKET_DIR/ved-$g.pid"
	done
fi
# A GPU drained for maintenance that Slurm gives out again admits clients.
for g in $gpus; do
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		"$BINDIR/ve-ctl" --device "$g" resume >/dev/null 2>&1 && break
		sleep 0.2
	done
done
exit 0
