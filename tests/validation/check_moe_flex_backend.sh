#!/bin/sh
# The flex rows name the backend their recipe ran (megatron_bridge_moe.csv and
# megatron_bridge_ep_overlap_ab.csv, dispatcher column flex:BACKEND:SMS), and
# the prediction follows it rather than megaplan's guess:
# - the HybridEP EP-overlap row of the A/B pairs (16 H100, flex:hybridep:32) is
#   `megaplan estimate`'s with --flex-backend hybridep --flex-sms 32, not the
#   one that guesses DeepEP's 20 SMs on a one-node NVLink domain;
# - the 26.02 Qwen3-30B-A3B H100 row (v0.3.0's QWEN3_30B_A3B_PRETRAIN_CONFIG_
#   H100_FP8_CS_V1: deepep, FP8) pays DeepEP's FP8 row padding: its prediction
#   is estimate's with --flex-backend deepep, not the one with HybridEP's
#   aligned counts (no padding charged).
set -e
validate=$1 megaplan=$2 data=$3
. "$(dirname "$0")/moe_row_check.sh"
# Qwen3-30B-A3B has no preset: the shape tools/refdata_moe.c builds from the
# 235B preset (48 layers, hidden 2048, 32/4 heads of 128, 128 experts of 768)
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$megaplan" models --format yaml qwen3-235b-a22b |
    sed -e 's/^name: .*/name: qwen3-30b-a3b/' -e 's/^layers: .*/layers: 48/' \
        -e 's/^hidden: .*/hidden: 2048/' -e 's/^heads: .*/heads: 32/' \
        -e 's/^ffn_hidden: .*/ffn_hidden: 6144/' -e 's/^  expert_ffn: .*/  expert_ffn: 768/' \
        >"$T/qwen3-30b-a3b.yaml"
ab=$("$validate" "$data" --rows-tsv --only moe-ab |
    awk -F'\t' '$4 > 20.9 && $4 < 21.1 { print $5 }')
[ -n "$ab" ] || { echo "no A/B row measured at 20.99 s" >&2; exit 1; }
est_ab() {
    step_of --model "$T/qwen3-30b-a3b.yaml" --gpus 16 --hw dgx-h100 --seq 4096 --global-batch 1024 \
        --precision bf16 --tp 1 --pp 1 --micro-batch 1 --ep 16 --etp 1 --dispatcher flex \
        --moe-a2a-overlap on --moe-imbalance 1 --dist-opt --grad-reduce-bf16 on \
        --cuda-graph-scope moe_router,moe_preprocess --te-cross-entropy on \
        --ddp-bucket-size 134217728 "$@"
}
row_is "$ab" "$(est_ab --flex-backend hybridep --flex-sms 32)" "$(est_ab)" hybridep-32 1e-5
row=$(row_of 51.2 51.3)
est_h100() {
    step_of --model "$T/qwen3-30b-a3b.yaml" --gpus 16 --hw dgx-h100 --seq 4096 --global-batch 1024 \
        --precision fp8 --fp8-recipe tensorwise --fp8-param-gather on --tp 1 --pp 2 --vpp 12 \
        --micro-batch 1 --ep 8 --etp 1 --dispatcher flex --moe-a2a-overlap on \
        --p2p-overlap on --param-gather-with-optimizer on --dist-opt --grad-reduce-bf16 on \
        --te-cross-entropy on --ddp-bucket-size 134217728 "$@"
}
row_is "$row" "$(est_h100 --flex-backend deepep --flex-sms 20)" "$(est_h100 --flex-backend hybridep --flex-sms 20)" deepep-padding 1e-5
# auto on a one-node NVLink domain is DeepEP everywhere: the padding, the SM
# share and the export ask one rule (mp_flex_backend_of)
row_is "$row" "$(est_h100)" "$(est_h100 --flex-backend hybridep --flex-sms 20)" auto-is-deepep 1e-5
