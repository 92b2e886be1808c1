#!/bin/sh
# usage: check_moe_tp_overlap.sh MEGAPLAN_VALIDATE MEGAPLAN DATA_DIR
# The 26.02.01 H100 Qwen3-235B-A22B row (measured 81.36 s) is predicted as
# `megaplan estimate` predicts its configuration with --tp-overlap off (its
# recipe: CommOverlapConfig(tp_comm_overlap=False)), not with it on; its DDP
# bucket is the recipe's 128 x 1024^2 parameters (the file's ddp_bucket_size).
set -e
validate=$1 megaplan=$2 data=$3
row=$("$validate" "$data" --rows-tsv --only moe | awk -F'\t' '$4 > 81.355 && $4 < 81.365 { print $5 }')
[ -n "$row" ] || { echo "no 81.36 s row in moe"; exit 1; }
est() {
    "$megaplan" estimate --model qwen3-235b-a22b --gpus 256 --hw dgx-h100 --seq 4096 \
        --global-batch 8192 --precision fp8 --fp8-recipe tensorwise --tp 2 --sp --pp 8 --vpp 4 \
        --micro-batch 1 --ep 32 --etp 1 --dispatcher alltoall --moe-a2a-overlap on --dist-opt \
        --fp8-param-gather on --grad-reduce-bf16 on --ddp-bucket-size 134217728 --tp-overlap "$1" \
        --format json |
        awk -F: '/"step":/ { gsub(/[ ,\t]/, "", $2); print $2; exit }'
}
off=$(est off) on=$(est on)
awk -v r="$row" -v off="$off" -v on="$on" 'BEGIN {
    if ((r - off) ^ 2 > (1e-6 * off) ^ 2) { print "row " r " is not the tp-overlap-off estimate " off; exit 1 }
    if ((r - on) ^ 2 <= (1e-6 * on) ^ 2) { print "row " r " equals the tp-overlap-on estimate " on; exit 1 }
}'
