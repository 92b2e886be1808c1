#!/bin/sh
# usage: check_moe_param_gather.sh MEGAPLAN_VALIDATE MEGAPLAN DATA_DIR
# The 25.11 B200 MXFP8 Qwen3-235B-A22B row (measured 20.05 s) gathers its
# parameters after the optimizer step, as its recipe sets it (Megatron-Bridge
# v0.2.2 scripts/performance/configs/qwen3/qwen3_llm_pretrain.py,
# qwen3_235b_a22b_b200_config: overlap_param_gather = False under fp8_mx;
# megatron_bridge_moe.csv's param_gather_sync column): its prediction is
# `megaplan estimate`'s for the same configuration with
# --param-gather-overlap off, and not the one with it on (its loss Transformer
# Engine's fused cross entropy: the file's te_cross_entropy column).
set -e
validate=$1 megaplan=$2 data=$3
. "$(dirname "$0")/moe_row_check.sh"
row=$(row_of 20.047 20.049)
est() {
    step_of --model qwen3-235b-a22b --gpus 64 --hw b200 --seq 4096 \
        --global-batch 1024 --precision fp8 --fp8-recipe mxfp8 --tp 1 --pp 8 --vpp 2 \
        --micro-batch 1 --ep 8 --etp 1 --dispatcher alltoall --moe-a2a-overlap on --dist-opt \
        --fp8-param-gather on --grad-reduce-bf16 on --ddp-bucket-size 134217728 --te-cross-entropy on --p2p-overlap on \
        --param-gather-overlap "$1"
}
# the JSON prints six significant digits; the two estimates differ by about 1e-4
row_is "$row" "$(est off)" "$(est on)" param-gather-overlap-off 1e-5
