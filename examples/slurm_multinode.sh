#!/bin/bash
# Data-parallel training on several machines under SLURM: one torchrun per node, which starts one
# rank per GPU; the ranks meet at a c10d rendezvous hosted by the first node of the allocation.
# (tests/test_train.py runs the same two-node rendezvous with two torchrun calls on one host.)
#
#   sbatch examples/slurm_multinode.sh                  # 4 nodes x 8 GPUs, the planner preset
#   sbatch --nodes 2 examples/slurm_multinode.sh --preset quick --total-steps 2000000
#
# What to set for your cluster:
#   * --nodes / --gpus-per-node below (GPUS_PER_NODE must match), the partition and the time limit;
#   * RDZV_PORT: a free TCP port on the first node, reachable from the others;
#   * NCCL_SOCKET_IFNAME: the network interface NCCL bootstraps over (`ip addr` on a node; e.g.
#     ib0 or eth0); NCCL_IB_DISABLE=1 when the nodes have no InfiniBand; NCCL_DEBUG=INFO to see
#     which transport NCCL chose when something hangs;
#   * OUT: a folder on a filesystem every node sees (every rank writes its checkpoint shard there).
# --total-steps counts agent steps over all ranks; --worlds is per rank. Resume with the same number
# of nodes and GPUs: add --resume "$OUT".
#SBATCH --job-name=terrazero
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=64
#SBATCH --time=24:00:00
set -euo pipefail

GPUS_PER_NODE=${GPUS_PER_NODE:-8}
RDZV_PORT=${RDZV_PORT:-29400}
OUT=${OUT:-runs/planner_${SLURM_JOB_ID}}
HEAD_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-eth0}
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
export OMP_NUM_THREADS=$(( SLURM_CPUS_PER_TASK / GPUS_PER_NODE ))

srun torchrun --nnodes "$SLURM_JOB_NUM_NODES" --nproc-per-node "$GPUS_PER_NODE" \
    --rdzv-backend c10d --rdzv-endpoint "$HEAD_NODE:$RDZV_PORT" --rdzv-id "$SLURM_JOB_ID" \
    -m terrazero_env.agents.launch --preset planner --device cuda --out "$OUT" --progress lines "$@"
