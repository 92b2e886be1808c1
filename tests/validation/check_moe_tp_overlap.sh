#!/bin/sh
# usage: check_moe_tp_overlap.sh MEGAPLAN_VALIDATE MEGAPLAN DATA_DIR [tp|p2p|pgo]
# The 26.02.01 H100 Qwen3-235B-A22B row (measured 81.36 s) is predicted as
# `megaplan estimate` predicts its configuration with --tp-overlap off (its
# recipe: CommOverlapConfig(tp_comm_overlap=False)), not with it on; its DDP
# bucket is the recipe's 128 x 1024^2 parameters (the file's ddp_bucket_size) and
# its loss Transformer Engine's fused cross entropy (the file's te_cross_entropy).
# With p2p: the same row overlaps its pipeline transfers, as its recipe's
# CommOverlapConfig sets overlap_p2p_comm for an interleaved pipeline
# (Megatron-Bridge src/megatron/bridge/training/comm_overlap.py,
# _get_model_comm_overlap_cfgs; the file's p2p_overlap column): its prediction
# is the estimate's with --p2p-overlap on, not off. With pgo: its first chunk's
# parameter all-gather starts in the optimizer step, as its performance script
# sets overlap_param_gather_with_optimizer_step for an FP8-CS interleaved run
# (Megatron-Bridge v0.3.1 scripts/performance/utils/overrides.py
# set_post_overrides; the file's param_gather_with_optimizer column).
set -e
validate=$1 megaplan=$2 data=$3 what=${4:-tp}
. "$(dirname "$0")/moe_row_check.sh"
row=$(row_of 81.355 81.365)
est() {
    step_of --model qwen3-235b-a22b --gpus 256 --hw dgx-h100 --seq 4096 \
        --global-batch 8192 --precision fp8 --fp8-recipe tensorwise --tp 2 --sp --pp 8 --vpp 4 \
        --micro-batch 1 --ep 32 --etp 1 --dispatcher alltoall --moe-a2a-overlap on --dist-opt \
        --fp8-param-gather on --grad-reduce-bf16 on --ddp-bucket-size 134217728 --te-cross-entropy on \
        --tp-overlap "$1" --p2p-overlap "$2" --param-gather-with-optimizer "${3:-on}"
}
if [ "$what" = pgo ]; then
    row_is "$row" "$(est off on on)" "$(est off on off)" param-gather-with-optimizer-on 1e-6
elif [ "$what" = p2p ]; then
    row_is "$row" "$(est off on)" "$(est off off)" p2p-overlap-on 1e-6
else
    row_is "$row" "$(est off on)" "$(est on on)" tp-overlap-off 1e-6
fi
