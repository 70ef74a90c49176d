#!/bin/sh
# Slurm TaskProlog: lines "export NAME=value" printed here enter every task's
# environment. The job's processes find ved of their GPU (VE_SOCKET_DIR; Slurm's
# CUDA_VISIBLE_DEVICES is mapped back to host indices) and the MPS server.
echo "export VE_SOCKET_DIR=${VE_SOCKET_DIR:-/run/vitamin-e}"
echo "export CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}"
