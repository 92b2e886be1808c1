#!/bin/sh
# usage: check_moe_tp_overlap.sh MEGAPLAN_VALIDATE MEGAPLAN DATA_DIR
# The 26.02.01 H100 Qwen3-235B-A22B row (measured 81.36 s) is predicted as
# `megaplan estimate` predicts its configuration with --tp-overlap off (its
# recipe: CommOverlapConfig(tp_comm_overlap=False)), not with it on; its DDP
# bucket is the recipe's 128 x 1024^2 parameters (the file's ddp_bucket_size) and
# its loss Transformer Engine's fused cross entropy (the file's te_cross_entropy).
set -e
validate=$1 megaplan=$2 data=$3
. "$(dirname "$0")/moe_row_check.sh"
row=$(moe_row 81.355 81.365)
[ -n "$row" ] || { echo "no 81.36 s row in moe"; exit 1; }
est() {
    step_of --model qwen3-235b-a22b --gpus 256 --hw dgx-h100 --seq 4096 \
        --global-batch 8192 --precision fp8 --fp8-recipe tensorwise --tp 2 --sp --pp 8 --vpp 4 \
        --micro-batch 1 --ep 32 --etp 1 --dispatcher alltoall --moe-a2a-overlap on --dist-opt \
        --fp8-param-gather on --grad-reduce-bf16 on --ddp-bucket-size 134217728 --te-cross-entropy on \
        --tp-overlap "$1"
}
row_is "$row" "$(est off)" "$(est on)" tp-overlap-off 1e-6
