#!/bin/sh
# usage: check_moe_te_cross_entropy.sh MEGAPLAN_VALIDATE MEGAPLAN DATA_DIR
# The 26.04.01 GPT-OSS-120B row on 64 B200 (measured 6.038 s) computes its loss
# with Transformer Engine's fused cross entropy, as its performance script sets
# it (Megatron-Bridge v0.4.2 scripts/performance/utils/overrides.py
# _set_common_perf_overrides: cross_entropy_fusion_impl = "te", over the GPT-OSS
# recipe's "native"; megatron_bridge_moe.csv's te_cross_entropy column): its
# prediction is `megaplan estimate`'s for the same configuration with
# --te-cross-entropy on, and not the one with it off. Its DDP bucket is
# Megatron-Core's default (the GPT-OSS recipe at v0.4.2 builds no
# CommOverlapConfig on B200, so no 128 x 1024^2 bucket: the file's
# ddp_bucket_size note).
set -e
validate=$1 megaplan=$2 data=$3
. "$(dirname "$0")/moe_row_check.sh"
row=$(row_of 6.037 6.039)
est() {
    step_of --model gpt-oss-120b --gpus 64 --hw b200 --seq 4096 --global-batch 1280 \
        --precision bf16 --tp 1 --pp 1 --micro-batch 4 --ep 8 --etp 1 --dispatcher alltoall \
        --moe-imbalance 1 --dist-opt --grad-reduce-bf16 on --recompute-modules layernorm,moe_act \
        --te-cross-entropy "$1"
}
row_is "$row" "$(est on)" "$(est off)" te-cross-entropy-on 1e-5
