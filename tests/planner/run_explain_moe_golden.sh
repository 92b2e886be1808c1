#!/bin/sh
# run_explain_moe_golden.sh MEGAPLAN GOLDEN — explain's memory lines name the
# MoE parts separately (routed experts' weights, grads and optimizer states,
# routed-token activations, capacity above the mean load) and the FP8 weight
# copies, compared with the golden file. MEGAPLAN_REGEN=1 rewrites it.
set -u
M=$1
G=$2
. "$(dirname "$0")/../lib.sh"
mem() { grep -E '^  (weights|of which|of the)' "$T/out"; }
{
    echo "# mixtral-8x7b, 64 x dgx-h100, ep 8, fp8 (delayed), moe.imbalance 1.2"
    "$M" explain --model mixtral-8x7b --gpus 64 --hw dgx-h100 --ep 8 --precision fp8 \
        --moe-imbalance 1.2 --dist-opt >"$T/out" || fail "explain mixtral exit"
    mem
    echo "# the same in bf16 with a capacity factor of 1.25 (from the model file)"
    "$M" models mixtral-8x7b --format yaml | sed 's/^  capacity_factor: 0$/  capacity_factor: 1.25/' \
        >"$T/m.yaml" || fail "models mixtral exit"
    "$M" explain --model "$T/m.yaml" --gpus 64 --hw dgx-h100 --ep 8 --dist-opt >"$T/out" ||
        fail "explain capacity exit"
    mem
    echo "# llama3-70b, 8 x dgx-h100, tp 8, fp8: no MoE parts, the FP8 copies"
    "$M" explain --model llama3-70b --gpus 8 --hw dgx-h100 --tp 8 --sp --precision fp8 \
        --dist-opt >"$T/out" || fail "explain llama exit"
    mem
} >"$T/got"
if [ "${MEGAPLAN_REGEN:-0}" = 1 ]; then
    cp "$T/got" "$G"
    exit 0
fi
diff -u "$G" "$T/got" || fail "explain's memory lines differ from $G (MEGAPLAN_REGEN=1 rewrites it)"
# the estimate's JSON names the same parts
"$M" estimate --model mixtral-8x7b --gpus 64 --hw dgx-h100 --ep 8 --precision fp8 \
    --moe-imbalance 1.2 --dist-opt --format json >"$T/j" || fail "estimate json exit"
for k in expert_weights expert_grads expert_optimizer routed_activations capacity_activations \
    fp8_weights; do
    grep -q "\"$k\"" "$T/j" || fail "estimate --format json lacks memory.$k"
done
echo ok
