#!/bin/sh
# run_moe_formats.sh MEGAPLAN — an MoE plan's expert settings in the framework
# files. The DeepSpeed and torchtitan files dropped ep (and etp, the
# dispatcher and the MoE overlaps) in silence: `estimate --model mixtral-8x7b
# --gpus 64 --zero 3 --ep 8 --format torchtitan` wrote a job file of ep 1, a
# plan other than the one estimated. Now torchtitan's file says them in its
# own keys (v0.2.2's config/job_config.py, Parallelism) or the export refuses
# with one line (exit 2, stdout empty), by torchtitan's rules
# (distributed/parallel_dims.py: etp is 1 or tp, etp*ep divides
# dp_shard*cp*tp; DeepEP needs ep > 1 and etp 1; the EP overlap is DualPipeV's
# and runs without activation checkpointing); DeepSpeed's JSON, whose MoE
# takes ep_size in the model code (deepspeed.moe.layer.MoE), refuses ep > 1
# and every MoE setting it cannot carry; search refuses a fixed one before
# searching. Megatron's flags say all of them.
set -u
. "$(dirname "$0")/../lib.sh"
bin=$(abs_path "$1")
cd "$T" || exit 1

mx="--model mixtral-8x7b --gpus 64"

# tt NAME WANT ARGS...: estimate ARGS --format torchtitan; WANT is a Python
# expression over p, the [parallelism] table, and ac, [activation_checkpoint]
tt() {
    name=$1 want=$2
    shift 2
    if ! "$bin" estimate "$@" --format torchtitan >tt.toml 2>err.txt; then
        bad "torchtitan $name: $(cat err.txt)"
        return
    fi
    python3 - tt.toml "$want" <<'PY' && ok || bad "torchtitan $name: $(grep -i expert tt.toml | tr '\n' ' ')"
import sys, tomllib
d = tomllib.load(open(sys.argv[1], "rb"))
p, ac = d["parallelism"], d["activation_checkpoint"]
sys.exit(0 if eval("(" + sys.argv[2] + ")") else 1)
PY
}

# refuse NAME REGEX VERB ARGS...: exit 2, one line on stderr matching REGEX, nothing on stdout
refuse() {
    name=$1 re=$2
    shift 2
    "$bin" "$@" >out.txt 2>err.txt
    rc=$?
    if [ $rc -ne 2 ]; then
        bad "$name: exit $rc, not 2 ($(head -c 300 err.txt))"
    elif [ "$(wc -l <err.txt)" -ne 1 ] || [ -s out.txt ]; then
        bad "$name: not one line on stderr and nothing on stdout: $(head -c 300 err.txt)"
    elif ! grep -Eq -- "$re" err.txt; then
        bad "$name: $(cat err.txt)"
    else
        ok
    fi
}

# --- torchtitan: the degrees written -------------------------------------------
# the brief's case: ep 8 borrowing from FSDP's 64 (tp 1, so etp 1)
tt ep8 'p["expert_parallel_degree"] == 8 and p["expert_tensor_parallel_degree"] == 1 and
        p["expert_parallel_comm_backend"] == "standard" and p["data_parallel_shard_degree"] == 64' \
    $mx --zero 3 --ep 8
# ZeRO-2 (FSDP2 without resharding) says it too
tt ep8-zero2 'p["expert_parallel_degree"] == 8 and p["fsdp_reshard_after_forward"] == "never"' \
    $mx --zero 2 --ep 8
# etp defaults to tp (Megatron's default): [partial dp -> ep] etp = tp
tt etp-tp 'p["tensor_parallel_degree"] == 2 and p["expert_parallel_degree"] == 8 and
           p["expert_tensor_parallel_degree"] == 2' $mx --zero 3 --tp 2 --sp --ep 8
# etp 1: [partial dp + all tp -> ep]
tt etp1 'p["expert_parallel_degree"] == 8 and p["expert_tensor_parallel_degree"] == 1' \
    $mx --zero 3 --tp 2 --sp --ep 8 --etp 1
# ep 1: said as 1 (torchtitan's default, but the reader sees it); etp has no effect there
tt ep1 'p["expert_parallel_degree"] == 1 and "expert_tensor_parallel_degree" not in p' \
    $mx --zero 3
# the flex dispatcher on one-node NVLink: DeepEP, torchtitan's "deepep"
tt flex 'p["expert_parallel_comm_backend"] == "deepep"' $mx --hw dgx-h100 --zero 3 --ep 8 \
    --dispatcher flex
# DualPipeV: the EP/PP overlap (on by default in torchtitan) said either way
tt dualpipev-off 'p["pipeline_parallel_expert_parallel_overlap"] is False and
                  p["pipeline_parallel_schedule"] == "DualPipeV"' \
    $mx --zero 3 --zero-runtime fsdp2 --ep 8 --pp 2 --vpp 2 --schedule dualpipev
tt dualpipev-on 'p["pipeline_parallel_expert_parallel_overlap"] is True and ac["mode"] == "none"' \
    $mx --zero 3 --zero-runtime fsdp2 --ep 8 --pp 2 --vpp 2 --schedule dualpipev \
    --moe-a2a-overlap on
# a dense model's file has no expert keys
if "$bin" estimate --model llama3-8b --gpus 8 --zero 3 --format torchtitan >dense.toml 2>err.txt; then
    lacks dense.toml "expert"
else
    bad "dense torchtitan: $(cat err.txt)"
fi

# --- torchtitan: what its rules cannot say -------------------------------------
E="^megaplan estimate: --format: "
refuse tt-etp-between "${E}etp=2: torchtitan's expert tensor parallelism is 1 or tp \\(4\\)$" \
    estimate $mx --zero 3 --tp 4 --sp --ep 2 --etp 2 --format torchtitan
refuse tt-etp-ep1 "${E}etp=1 with ep=1: torchtitan splits the experts over the whole tensor-parallel group \\(tp=2\\) when ep is 1$" \
    estimate $mx --zero 3 --tp 2 --sp --etp 1 --format torchtitan
refuse tt-allgather "${E}dispatcher allgather \\(torchtitan dispatches by all-to-all or DeepEP\\): the torchtitan file written here has no key for it" \
    estimate $mx --zero 3 --ep 8 --dispatcher allgather --format torchtitan
refuse tt-flex-etp "${E}the flex dispatcher with ep=8 etp=2: torchtitan's DeepEP needs ep > 1 and etp = 1$" \
    estimate $mx --hw dgx-h100 --zero 3 --tp 2 --sp --ep 8 --dispatcher flex --format torchtitan
refuse tt-flex-hybridep "${E}the flex dispatcher runs HybridEP here \\(flex_backend, or on gb200-nvl72 by default\\), which torchtitan lacks" \
    estimate --model mixtral-8x7b --gpus 72 --global-batch 576 --hw gb200-nvl72 --zero 3 --ep 8 \
    --dispatcher flex --format torchtitan
# the plan's own backend: HybridEP named on an H100 refused, DeepEP named on GB200 written
refuse tt-flex-hybridep-named "${E}the flex dispatcher runs HybridEP here" \
    estimate $mx --hw dgx-h100 --zero 3 --ep 8 --dispatcher flex --flex-backend hybridep --format torchtitan
refuse tt-flex-sms "${E}flex_sms \\(the SMs of the flex dispatcher's kernels\\): the torchtitan file written here has no key for it" \
    estimate $mx --hw dgx-h100 --zero 3 --ep 8 --dispatcher flex --flex-sms 24 --format torchtitan
tt flex-deepep-named 'p["expert_parallel_comm_backend"] == "deepep"' \
    --model mixtral-8x7b --gpus 72 --global-batch 576 --hw gb200-nvl72 --zero 3 --ep 8 \
    --dispatcher flex --flex-backend deepep
refuse tt-a2a-overlap-1f1b "${E}moe_a2a_overlap \\(the EP all-to-all overlap\\) under 1f1b with pp=1: torchtitan overlaps EP only in DualPipeV" \
    estimate $mx --zero 3 --ep 8 --moe-a2a-overlap on --format torchtitan
refuse tt-a2a-overlap-ac "${E}moe_a2a_overlap with recompute selective: torchtitan's DualPipeV EP overlap runs without activation checkpointing$" \
    estimate $mx --zero 3 --zero-runtime fsdp2 --ep 8 --pp 2 --vpp 2 --schedule dualpipev \
    --moe-a2a-overlap on --recompute selective --format torchtitan
refuse tt-shared-overlap "${E}shared_expert_overlap \\(the shared experts under the dispatch\\): the torchtitan file written here has no key for it" \
    estimate --model deepseek-v3 --gpus 1024 --zero 3 --ep 8 --shared-expert-overlap on --format torchtitan

# the model's token capacity: neither file has a key (torchtitan's MoE drops no
# tokens; DeepSpeed's takes capacity_factor in the model code)
cat >cf.yaml <<'EOF'
name: cf-moe
arch: llama
layers: 8
hidden: 1024
heads: 16
ffn_hidden: 4096
vocab: 32000
seq: 2048
activation: swiglu
norm: rmsnorm
position: rope
moe: {experts: 8, top_k: 2, expert_ffn: 2048, capacity_factor: 1.25}
EOF
for f in deepspeed:DeepSpeed:2 torchtitan:torchtitan:3; do
    fmt=${f%%:*} rest=${f#*:}
    fw=${rest%%:*} zero=${rest#*:}
    refuse "$fmt-capacity" "${E}moe.capacity_factor \\(the experts' token capacity\\): the $fw file written here has no key for it" \
        estimate --model cf.yaml --gpus 8 --global-batch 64 --zero "$zero" --format "$fmt"
done

# --- DeepSpeed: ep lives in the model code, not the JSON ------------------------
refuse ds-ep8 "${E}ep=8 \\(expert parallelism\\): the DeepSpeed file written here has no key for it \\(DeepSpeed takes it in the model code, deepspeed.moe.layer.MoE\\(ep_size=...\\); --format torchtitan writes it, or leave it out\\)$" \
    estimate $mx --zero 2 --ep 8 --format deepspeed
refuse ds-ep8-zero3 "${E}ep=8 \\(expert parallelism\\): the DeepSpeed file" \
    estimate $mx --zero 3 --ep 8 --format deepspeed
refuse ds-etp "${E}etp=1: the DeepSpeed file written here has no key for an expert tensor-parallel degree other than tp \\(2\\)$" \
    estimate $mx --zero 2 --tp 2 --sp --etp 1 --format deepspeed
refuse ds-flex "${E}dispatcher flex \\(DeepEP / HybridEP\\): the DeepSpeed file written here has no key for it" \
    estimate $mx --zero 2 --tp 2 --sp --dispatcher flex --format deepspeed
refuse ds-allgather "${E}dispatcher allgather: the DeepSpeed file written here has no key for it" \
    estimate $mx --zero 2 --tp 2 --sp --dispatcher allgather --format deepspeed
# ep 1, the default dispatcher, etp = tp: written (AutoTP splits the experts' layers too)
if "$bin" estimate $mx --zero 2 --tp 2 --sp --format deepspeed >ds.json 2>err.txt; then
    python3 -c "import json; d = json.load(open('ds.json')); assert d['tensor_parallel']['autotp_size'] == 2 and d['zero_optimization']['stage'] == 2" &&
        ok || bad "ds ep1: $(cat ds.json)"
else
    bad "ds ep1: $(cat err.txt)"
fi

# --- search: a fixed ep DeepSpeed cannot say is refused before searching --------
S="^megaplan search: --format: "
refuse search-ds-ep "${S}ep=8 \\(expert parallelism\\): the DeepSpeed file written here has no key for it" \
    search $mx --zero 2 --ep 8 --format deepspeed
refuse search-ds-fix-ep "${S}ep=8 \\(expert parallelism\\): the DeepSpeed file written here" \
    search $mx --zero 2 --fix ep=8 --format deepspeed
refuse search-tt-allgather "${S}dispatcher allgather \\(torchtitan dispatches by all-to-all or DeepEP\\)" \
    search $mx --zero 3 --dispatcher allgather --format torchtitan
# (no count line: refused before the search, not after it)
lacks err.txt "best plan found"
# ep free: the winner (ep 8 on this job) is refused after the search, by name
refuse search-ds-winner "${S}the best plan found \\(.*\\) cannot be written so: ep=8 \\(expert parallelism\\)" \
    search $mx --zero 2 --format deepspeed
# and the table's winner lines say so rather than "runs under DeepSpeed (--format deepspeed)"
if "$bin" search $mx --zero 2 >tab.txt 2>err.txt; then
    contains tab.txt "would run under DeepSpeed, but --format deepspeed refuses it: ep=8 (expert parallelism)"
else
    bad "search table: $(cat err.txt)"
fi
# and torchtitan writes that winner's ep
if "$bin" search $mx --zero 3 --format torchtitan >st.toml 2>err.txt; then
    python3 -c "
import tomllib
p = tomllib.load(open('st.toml', 'rb'))['parallelism']
assert p['expert_parallel_degree'] > 1 and 'expert_tensor_parallel_degree' in p, p" &&
        ok || bad "search torchtitan: no ep in $(grep expert st.toml | tr '\n' ' ')"
else
    bad "search torchtitan: $(cat err.txt)"
fi

# --- Megatron-LM's flags say every expert setting --------------------------------
if "$bin" estimate $mx --hw dgx-h100 --tp 2 --sp --ep 8 --etp 1 --dist-opt --dispatcher flex \
    --format megatron >mg.txt 2>err.txt; then
    contains mg.txt "--expert-model-parallel-size 8 \\"
    contains mg.txt "--expert-tensor-parallel-size 1 \\"
    contains mg.txt "--moe-token-dispatcher-type flex \\"
    contains mg.txt "--moe-flex-dispatcher-backend deepep \\"
else
    bad "megatron flags: $(cat err.txt)"
fi
if "$bin" estimate --model deepseek-v3 --gpus 1024 --ep 8 --dist-opt --shared-expert-overlap on \
    --format megatron >mg2.txt 2>err.txt; then
    contains mg2.txt "--moe-shared-expert-overlap \\"
    contains mg2.txt "--moe-token-dispatcher-type alltoall \\"
else
    bad "megatron flags, shared-expert overlap: $(cat err.txt)"
fi

# --- NeMo AutoModel's own settings: no file megaplan writes carries them ---------
# (the exports ran the model's router and torchtitan's once-per-flush FSDP sync
# in silence, another plan than the one estimated)
printf 'megaplan_plan: 1\nmodel: {name: m, arch: llama, layers: 2, hidden: 32, heads: 4, ffn_hidden: 64, vocab: 64, seq: 16,\n  moe: {experts: 4, top_k: 2, expert_ffn: 32, fake_balanced_gate: true}}\nhw: dgx-a100\ntraining: {gpus: 1, global_batch: 1}\n' >gate.yaml
refuse gate-megatron 'model\.moe\.fake_balanced_gate: NeMo AutoModel.s benchmark gate has no Megatron-LM flag' \
    estimate gate.yaml --format megatron
refuse gate-torchtitan '--format: moe\.fake_balanced_gate \(NeMo AutoModel.s benchmark gate\): the torchtitan file' \
    estimate gate.yaml --format torchtitan
refuse gate-deepspeed '--format: moe\.fake_balanced_gate .*: the DeepSpeed file written here has no key' \
    estimate gate.yaml --format deepspeed
printf 'megaplan_plan: 1\nmodel: llama3-8b\nhw: dgx-h100\ntraining: {gpus: 16, global_batch: 64}\nparallel: {tp: 1, pp: 2, dp: 8, zero: 3, dist_opt: true, zero_runtime: fsdp2, fsdp_microbatch_sync: true}\n' >sync.yaml
refuse sync-torchtitan '--format: fsdp_microbatch_sync \(FSDP2 syncing every micro-batch' \
    estimate sync.yaml --format torchtitan
# Megatron's flags pointed to --format torchtitan, which refuses it: the line
# says so and why (leave it out), and without it torchtitan's file is written
refuse sync-megatron '--format: Megatron-LM cannot run ZeRO-3 .*--format torchtitan, whose framework runs it, refuses it too: fsdp_microbatch_sync .*leave it out$' \
    estimate sync.yaml --format megatron
sed 's/, fsdp_microbatch_sync: true//' sync.yaml >nosync.yaml
refuse nosync-megatron '--format: Megatron-LM cannot run ZeRO-3 .*: this plan runs under torchtitan \(FSDP2\) \(--format torchtitan\)$' \
    estimate nosync.yaml --format megatron
if "$bin" estimate nosync.yaml --format torchtitan >nosync.toml 2>err.txt; then ok; else
    bad "nosync torchtitan: $(cat err.txt)"; fi

finish
