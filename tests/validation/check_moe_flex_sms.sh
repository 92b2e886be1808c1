#!/bin/sh
# The 26.04 GPT-OSS-120B row on 64 GB200 runs HybridEP on 32 SMs, as its
# performance script sets it (Megatron-Bridge v0.4.0: gpt_oss_llm_pretrain.py
# applies the hybridep backend before utils/overrides.py
# _set_common_perf_overrides sets moe_hybridep_num_sms = 32), with the EP
# all-to-all overlap: megatron_bridge_moe.csv's dispatcher column
# "flex:hybridep:32" (before the backend was named, "flex:32": the guess, also
# HybridEP on NVL72).
# Its prediction is `megaplan estimate`'s with --flex-sms 32, not the one with
# Megatron-Core's default 16 (the kernels hold more SMs while the overlapped
# compute runs).
set -e
validate=$1 megaplan=$2 data=$3
. "$(dirname "$0")/moe_row_check.sh"
row=$(row_of 5.139 5.141)
est() {
    step_of --model gpt-oss-120b --gpus 64 --hw gb200-nvl72 --seq 4096 --global-batch 1280 \
        --precision bf16 --tp 1 --pp 1 --micro-batch 4 --ep 64 --etp 1 --dispatcher flex \
        --moe-a2a-overlap on --moe-imbalance 1 --dist-opt --grad-reduce-bf16 on \
        --recompute-modules layernorm,moe_act --te-cross-entropy on --ddp-bucket-size 134217728 "$@"
}
row_is "$row" "$(est --flex-sms 32)" "$(est)" flex-sms-32 1e-5
