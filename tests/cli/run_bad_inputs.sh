#!/bin/sh
# run_bad_inputs.sh MEGAPLAN [GROUP] — every kind of bad input must give exit
# status 2, nothing on stdout, and exactly ONE line on stderr of the form
#   megaplan <verb>: file:line:col: field: message     (file inputs)
#   megaplan <verb>: field: message                    (options, names)
# and never a crash (run the binary built with the sanitizers too).
# GROUP: core (models/hw verbs: model, profile and config.json files),
# estimate (the shared options through `megaplan estimate`), plan (plan files
# through `megaplan simulate`), hardening (repeated options, absurd hardware
# numbers, fixed search settings that conflict, iterations too large to
# simulate). A group whose verb is not built yet is skipped (exit 77).
set -u
bin=$1
group=${2:-core}
. "$(dirname "$0")/../lib.sh"
bin=$(abs_path "$bin")
cd "$T" || exit 1

# check NAME REGEX CMD... : runs CMD, expects exit 2, empty stdout, one
# stderr line matching REGEX (extended regex).
check() {
    name=$1
    want=$2
    shift 2
    "$@" >out.txt 2>err.txt
    rc=$?
    lines=$(wc -l <err.txt)
    why=""
    if [ "$rc" -ne 2 ]; then
        why="exit status $rc, expected 2"
    elif [ "$lines" -ne 1 ]; then
        why="$lines lines on stderr, expected 1"
    elif [ -s out.txt ]; then
        why="output on stdout"
    elif ! grep -Eq -- "$want" err.txt; then
        why="stderr does not match /$want/"
    fi
    if [ -n "$why" ]; then
        bad "$name: $why"
        echo "  command: $*"
        sed 's/^/  stderr: /' err.txt | head -5
    else
        ok
    fi
}

# file NAME CONTENT: writes CONTENT (printf format) to NAME
file() {
    printf -- "$2" >"$1"
}

# file_check NAME FILE CONTENT REGEX VERB...: writes CONTENT to FILE, then
# check NAME REGEX "$bin" VERB... FILE (a bad file given last on the line)
file_check() {
    fc_name=$1
    fc_file=$2
    fc_want=$4
    file "$fc_file" "$3"
    shift 4
    check "$fc_name" "$fc_want" "$bin" "$@" "$fc_file"
}

M="^megaplan models: "
H="^megaplan hw: "
GOOD_MODEL='name: m\narch: gpt\nlayers: 12\nhidden: 768\nheads: 12\nvocab: 50257\nseq: 1024\n'
GOOD_HW='name: t\nmemory: 16 GiB\nhbm_bw: 1 TB/s\npeak_flops: {bf16: 100 TFLOP/s}\ngemm_efficiency: [[1e9, 0.5], [1e12, 0.8]]\nmemory_efficiency: 0.7\nattention_efficiency: 0.5\ngpus_per_node: 8\nscale_up: {gpus_per_domain: 8, bw_per_gpu: 300 GB/s, latency: 2 us, efficiency: 0.8}\nscale_out: {gpus_per_domain: 0, bw_per_gpu: 200 Gb/s, latency: 10 us, efficiency: 0.8}\nruntime_reserve: 2 GiB\nkernel_overhead: 5 us\n'

core() {
    # the good files really are good (so the bad ones fail for their reason)
    file good.yaml "$GOOD_MODEL"
    file goodhw.yaml "$GOOD_HW"
    if ! "$bin" models good.yaml >/dev/null 2>&1 || ! "$bin" hw goodhw.yaml >/dev/null 2>&1; then
        bad "the good model/profile files are refused"
    fi

    # --- model files: malformed, truncated, unknown keys, wrong types ---
    file_check malformed malformed.yaml 'name: m\narch: gpt\nlayers: 12\nhidden: [768\nheads: 12\n' "${M}malformed\.yaml:5:6: hidden: YAML syntax error" models
    file_check truncated truncated.yaml 'name: m\narch: gpt\nlayers: 12\nhidden: 768\nheads: {a' "${M}truncated\.yaml:[56]:[0-9]+: heads(\.a)?: YAML syntax error" models
    file_check truncated-key truncated2.yaml 'name: m\narch: gpt\nlayers: 12\nhid' "${M}truncated2\.yaml:[45]:[0-9]+: YAML syntax error" models
    file_check truncated-key2 truncated2b.yaml 'name: m\narch: gpt\nlayers: 12\nhid:' "${M}truncated2b\.yaml:4:1: hid: unknown key \(did you mean 'hidden'\?\)" models
    file_check truncated-at-line truncated3.yaml 'name: m\narch: gpt\nlayers: 12\nhidden: 768\n' "${M}truncated3\.yaml:1:1: heads: missing" models
    file_check unterminated unterminated.yaml 'name: "m\narch: gpt\n' "${M}unterminated\.yaml:3:1: name: YAML syntax error" models
    file_check unknown-key unknown.yaml "${GOOD_MODEL}dropout: 0.1\n" "${M}unknown\.yaml:8:1: dropout: unknown key" models
    file_check wrong-type type.yaml 'name: m\narch: gpt\nlayers: twelve\nhidden: 768\nheads: 12\nvocab: 5\nseq: 5\n' "${M}type\.yaml:3:9: layers: expected an integer" models
    file_check wrong-type-map type2.yaml 'name: m\narch: gpt\nlayers: 12\nhidden: {a: 1}\nheads: 12\nvocab: 5\nseq: 5\n' "${M}type2\.yaml:4:9: hidden: expected an integer, got a mapping" models
    file_check wrong-type-bool type3.yaml "${GOOD_MODEL}tied_embeddings: 2\n" "${M}type3\.yaml:8:18: tied_embeddings: expected true or false" models
    file_check qk-norm-bool qk.yaml "${GOOD_MODEL}attn: {qk_norm: yes please}\n" "${M}qk\\.yaml:8:[0-9]+: attn\\.qk_norm: expected true or false" models
    file_check qk-norm-arch qk2.yaml "${GOOD_MODEL}attn: {qk_norm: true}\n" "${M}qk2\\.yaml:8:[0-9]+: attn\\.qk_norm: QK-norm \\(Qwen3\\) is modelled for arch llama only" models
    # the norm epsilon: positive, below 1, a number
    file_check norm-eps-zero eps0.yaml "${GOOD_MODEL}norm_eps: 0\n" "${M}eps0\\.yaml:8:11: norm_eps: must be positive \\(got 0\\)" models
    file_check norm-eps-one eps1.yaml "${GOOD_MODEL}norm_eps: 1\n" "${M}eps1\\.yaml:8:11: norm_eps: too large: must be less than 1 \\(got 1\\)" models
    file_check norm-eps-negative eps2.yaml "${GOOD_MODEL}norm_eps: -1e-5\n" "${M}eps2\\.yaml:8:11: norm_eps: must be positive" models
    file_check norm-eps-word eps3.yaml "${GOOD_MODEL}norm_eps: tiny\n" "${M}eps3\\.yaml:8:11: norm_eps: expected a number" models
    file_check norm-eps-nan eps4.yaml "${GOOD_MODEL}norm_eps: .nan\n" "${M}eps4\\.yaml:8:11: norm_eps: " models
    # the dropouts: probabilities, 0 (none) up to but not 1
    file_check hidden-dropout-one drop1.yaml "${GOOD_MODEL}hidden_dropout: 1\n" "${M}drop1\\.yaml:8:17: hidden_dropout: too large: must be less than 1 \\(got 1\\)" models
    file_check hidden-dropout-negative drop2.yaml "${GOOD_MODEL}hidden_dropout: -0.1\n" "${M}drop2\\.yaml:8:17: hidden_dropout: must be at least 0 \\(got -0\\.1\\)" models
    file_check attention-dropout-word drop3.yaml "${GOOD_MODEL}attention_dropout: off\n" "${M}drop3\\.yaml:8:20: attention_dropout: expected a number" models
    file_check attention-dropout-list drop4.yaml "${GOOD_MODEL}attention_dropout: [0.1]\n" "${M}drop4\\.yaml:8:20: attention_dropout: expected a number, got a list" models
    file_check attention-dropout-percent drop5.yaml "${GOOD_MODEL}attention_dropout: 10\n" "${M}drop5\\.yaml:8:20: attention_dropout: too large: must be less than 1 " models
    # a written moe.layer_freq of 0 is i mod 0 (it was read as 1, every block; config.json's 0 is refused)
    file_check moe-layer-freq-zero lf.yaml 'name: m\narch: llama\nlayers: 4\nhidden: 512\nheads: 8\nffn_hidden: 1024\nvocab: 1000\nseq: 256\nmoe: {experts: 8, top_k: 2, expert_ffn: 64, layer_freq: 0}\n' "${M}lf\\.yaml:9:57: moe\\.layer_freq: must be at least 1 .*: got 0$" models
    file_check fractional type4.yaml 'name: m\narch: gpt\nlayers: 1.5\nhidden: 768\nheads: 12\nvocab: 5\nseq: 5\n' "${M}type4\.yaml:3:9: layers: expected an integer" models
    # a leading zero: 8 to YAML 1.1 readers (PyYAML), 10 to YAML 1.2; it was read as 10
    file_check leading-zero lz.yaml 'name: m\narch: gpt\nlayers: 012\nhidden: 768\nheads: 12\nvocab: 5\nseq: 5\n' "${M}lz\\.yaml:3:9: layers: '012' has a leading zero, which YAML 1.1 readers take as octal: write the number without it$" models
    file_check unknown-arch enum.yaml 'name: m\narch: gpt4\nlayers: 12\n' "${M}enum\.yaml:2:7: arch: expected one of gpt\|bert\|t5\|llama" models
    file_check negative negative.yaml 'name: m\narch: gpt\nlayers: -12\nhidden: 768\nheads: 12\nvocab: 5\nseq: 5\n' "${M}negative\.yaml:3:9: layers: must be at least 1" models
    file_check zero zero.yaml 'name: m\narch: gpt\nlayers: 12\nhidden: 0\nheads: 12\nvocab: 5\nseq: 5\n' "${M}zero\.yaml:4:9: hidden: must be at least 1" models
    file_check zero-vocab zero2.yaml 'name: m\narch: gpt\nlayers: 12\nhidden: 768\nheads: 12\nvocab: 0\nseq: 5\n' "${M}zero2\.yaml:6:8: vocab: must be at least 1" models
    file_check overflow overflow.yaml 'name: m\narch: gpt\nlayers: 12\nhidden: 99999999999999999999999\nheads: 12\nvocab: 5\nseq: 5\n' "${M}overflow\.yaml:4:9: hidden: too large: .* overflows" models
    file_check absurd-layers absurd.yaml 'name: m\narch: gpt\nlayers: 100000\nhidden: 768\nheads: 12\nvocab: 5\nseq: 5\n' "${M}absurd\.yaml:3:9: layers: too large" models
    file_check absurd-params absurd2.yaml 'name: m\narch: gpt\nlayers: 2048\nhidden: 1048576\nheads: 16\nvocab: 16777216\nseq: 4194304\n' "${M}absurd2\.yaml:4:9: hidden: absurd model" models
    file_check heads-divide-hidden divide.yaml 'name: m\narch: gpt\nlayers: 12\nhidden: 768\nheads: 7\nvocab: 5\nseq: 5\n' "${M}divide\.yaml:5:8: heads: must divide hidden" models
    file_check kv-heads-divide gqa.yaml 'name: m\narch: llama\nlayers: 2\nhidden: 768\nheads: 12\nkv_heads: 5\nvocab: 5\nseq: 5\n' "${M}gqa\.yaml:6:11: kv_heads: must divide heads" models
    # derived sizes meet the limits of stated ones (head_dim = hidden/heads)
    file_check derived-head-dim wide.yaml 'name: m\narch: gpt\nlayers: 2\nhidden: 99999\nheads: 1\nvocab: 1000\nseq: 128\n' "${M}wide\.yaml:5:8: heads: hidden/heads = 99999/1 gives head_dim too large: at most 65536 \(got 99999\)" models
    # rotary embeddings turn pairs of a head's dimensions: an odd head_dim cannot run (was accepted; exec refused it)
    file_check rope-odd-head-dim rope.yaml 'name: m\narch: llama\nlayers: 2\nhidden: 254\nheads: 2\nvocab: 100\nseq: 128\n' "${M}rope\.yaml:5:8: heads: rotary embeddings turn pairs of dimensions: head_dim must be even \(got 127\)" models
    file_check hf-rope-odd-head-dim hf16.json '{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,\n "num_attention_heads": 4, "intermediate_size": 10, "vocab_size": 10,\n "head_dim": 15}' "${M}hf16\.json:3:2: head_dim: rotary embeddings turn pairs" models
    # latent attention's head_dim is qk_nope_head_dim + qk_rope_head_dim: an overlarge sum names
    # them (a model file said "heads: hidden/heads = 512/8 gives head_dim too large ... (got 131072)";
    # a config.json "head_dim: too large" at no line, a key it does not have)
    file_check mla-head-dim mla.yaml 'name: m\narch: llama\nlayers: 4\nhidden: 512\nheads: 8\nffn_hidden: 1024\nvocab: 1000\nseq: 256\nmla: {kv_lora_rank: 64, qk_rope_head_dim: 65536, qk_nope_head_dim: 65536, v_head_dim: 64}\n' "${M}mla\\.yaml:9:68: mla\\.qk_nope_head_dim: qk_nope_head_dim \\+ qk_rope_head_dim = 65536 \\+ 65536 gives head_dim too large: at most 65536 \\(got 131072\\)" models
    file_check hf-mla-head-dim hfmla.json '{"model_type": "deepseek_v3", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,\n "intermediate_size": 10, "vocab_size": 10, "kv_lora_rank": 16, "q_lora_rank": 16,\n "qk_rope_head_dim": 40000, "qk_nope_head_dim": 40000, "v_head_dim": 16,\n "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 8}' "${M}hfmla\\.json:3:29: qk_nope_head_dim: qk_nope_head_dim \\+ qk_rope_head_dim = 40000 \\+ 40000 gives head_dim too large" models
    file_check integer-in-full seq.yaml 'name: m\narch: gpt\nlayers: 2\nhidden: 64\nheads: 1\nvocab: 1000\nseq: 5644901\n' "${M}seq\.yaml:7:6: seq: too large: at most 4194304 \(got 5644901\)" models
    # the wrong kind of input says what it is and what to give instead
    mkdir -p nocfg
    check folder-without-config "^megaplan estimate: --model: no config\.json in nocfg " "$bin" estimate --model nocfg --gpus 8
    check size-did-you-mean "did you mean llama2-70b or llama3-70b\?" "$bin" estimate --model 70B --gpus 8
    file_check model-given-to-simulate model-as-plan.yaml "$GOOD_MODEL" "^megaplan simulate: model-as-plan\.yaml:1:1: this is a model file, not a plan: give it as --model FILE" simulate
    # each reader names a file of another kind (they said "megaplan_plan: unknown key", "arch: unknown key")
    file_check plan-given-as-model kind1.yaml 'megaplan_plan: 1\nmodel: gpt3-125m\nhw: dgx-a100\n' "${M}kind1\\.yaml:1:1: this is a plan, not a model: give it as the first argument" models
    file_check model-given-as-hw kind2.yaml "$GOOD_MODEL" "${H}kind2\\.yaml:1:1: this is a model file, not a hardware profile: give it as --model FILE \\(estimate, explain, search, simulate\\)$" hw
    file_check hw-given-as-model kind3.yaml "$GOOD_HW" "${M}kind3\\.yaml:1:1: this is a hardware profile, not a model: give it as --hw FILE \\(estimate, explain, search, simulate\\) or as exec's --compare FILE$" models
    file_check hf-given-as-hw kind4.json '{"model_type": "gpt2", "n_layer": 1, "n_embd": 8, "n_head": 2, "vocab_size": 9}' "^megaplan estimate: kind4\\.json:1:1: this is a HuggingFace config\\.json, not a hardware profile: give it as --model FILE \\(estimate, explain, search, simulate\\)$" estimate --model 125M --gpus 8 --hw
    file_check hf-given-as-plan kind5.json '{"model_type": "gpt2", "n_layer": 1, "n_embd": 8, "n_head": 2, "vocab_size": 9}' "^megaplan simulate: kind5\\.json:1:1: this is a HuggingFace config\\.json, not a plan: give it as --model FILE with --gpus N \\(estimate, explain, search, simulate\\)$" simulate
    file_check t5-needs-decoder t5.yaml 'name: m\narch: t5\nencoder_layers: 2\nhidden: 64\nheads: 4\nvocab: 5\nseq: 5\n' "${M}t5\.yaml:1:1: decoder_layers: t5 needs at least 1 decoder layer" models
    # a .yaml file that is one flow mapping is YAML (it was read as JSON: "JSON syntax error")
    file_check flow-mapping flow.yaml '{name: m, arch: gpt, layers: 0, hidden: 768, heads: 12, vocab: 5, seq: 5}\n' "${M}flow\.yaml:1:30: layers: must be at least 1" models
    file_check duplicate-key dup.yaml "${GOOD_MODEL}heads: 12\n" "${M}dup\.yaml:8:1: heads: duplicate key" models
    file_check alias alias.yaml 'name: &n m\narch: *n\n' "${M}alias\.yaml:2:7: arch: YAML aliases" models
    # a tag was dropped: "seq: !!str 1024" read as the number, "arch: !!binary Z3B0" as its text
    file_check tag tag.yaml "$(printf "$GOOD_MODEL" | sed 's/seq: /seq: !!str /')\n" "${M}tag\\.yaml:7:6: seq: YAML tags \\(!!str, !name\\) are not supported" models
    file_check not-a-mapping list.yaml '- 1\n- 2\n' "${M}list\.yaml:1:1: .*expected a mapping" models
    file_check empty empty.yaml '' "${M}empty\.yaml:1:1: .*empty" models
    file_check binary binary.yaml 'arch: gpt\nlayers: \001\377\376\n' "${M}binary\.yaml:2:9: YAML syntax error: control characters" models
    check missing-file "${M}nothere\.yaml: cannot read" "$bin" models nothere.yaml
    mkdir -p adir
    check directory "${M}model: no config\.json in adir/ " "$bin" models adir/
    check unknown-preset "${M}model: unknown model 'gpt3-176b' \(did you mean 'gpt3-175b'" "$bin" models gpt3-176b
    check unknown-alias "${M}model: unknown model '176B'" "$bin" models 176B

    # --- HuggingFace config.json ---
    file_check hf-wrong-type hf.json '{\n  "model_type": "llama",\n  "num_hidden_layers": 32,\n  "hidden_size": "4096"\n}\n' "${M}hf\.json:4:3: hidden_size: expected an integer" models
    file_check hf-truncated hf2.json '{\n  "model_type": "gpt2",\n  "n_layer": 12,\n  "n_embd": 768,' "${M}hf2\.json:[45]:[0-9]+: .*JSON syntax error" models
    file_check hf-unknown-family hf3.json '{"model_type": "mamba"}' "${M}hf3\.json:1:2: model_type: unsupported" models
    file_check hf-negative hf4.json '{"model_type": "gpt2", "n_layer": -1, "n_embd": 8, "n_head": 2, "vocab_size": 9}' "${M}hf4\.json:1:24: n_layer: out of range" models

    file_check hf-divisibility hf5.json '{\n "model_type": "llama",\n "num_hidden_layers": 2, "hidden_size": 64,\n "num_attention_heads": 4,\n "num_key_value_heads": 3, "intermediate_size": 10, "vocab_size": 10}\n' "${M}hf5\.json:5:2: num_key_value_heads: must divide heads" models
    file_check hf-norm-eps hf7.json '{\n "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,\n "num_attention_heads": 4, "intermediate_size": 10, "vocab_size": 10,\n "rms_norm_eps": 0}\n' "${M}hf7\\.json:4:2: rms_norm_eps: expected a number above 0 and below 1" models
    file_check hf-norm-eps-type hf8.json '{"model_type": "bert", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 10, "layer_norm_eps": "1e-12"}' "${M}hf8\\.json:1:[0-9]+: layer_norm_eps: expected a number above 0" models
    # rope_theta: one accepted range in the message (-1 said "[0, 1e+12]", then 0 "above 1")
    for th in -1 0 1 2e12; do
        file_check hf-rope-theta-$th hf7b.json "{\n \"model_type\": \"llama\", \"num_hidden_layers\": 2, \"hidden_size\": 64,\n \"num_attention_heads\": 4, \"intermediate_size\": 10, \"vocab_size\": 10,\n \"rope_theta\": $th}\n" "${M}hf7b\\.json:4:2: rope_theta: expected a rotary base in \\(1, 1e\\+12\\]\$" models
    done
    # quoted numbers with spaces around them, in a model and a profile (a tab too; a curve's point)
    file_check spaced-model sp.yaml 'name: m\narch: gpt\nlayers: "12\t"\nhidden: 768\nheads: 12\nvocab: 5\nseq: 5\n' "${M}sp\\.yaml:3:9: layers: '12\\?' has spaces around it: give the value alone\$" models
    file_check spaced-hw sp.yaml "$(printf "$GOOD_HW" | sed 's/memory_efficiency: 0.7/memory_efficiency: " 0.7"/')\n" "${H}sp\\.yaml:6:20: memory_efficiency: ' 0\\.7' has spaces around it" hw
    file_check spaced-hw-unit sp.yaml "$(printf "$GOOD_HW" | sed 's/memory: 16 GiB/memory: "16 GiB "/')\n" "${H}sp\\.yaml:2:9: memory: '16 GiB ' has spaces around it" hw
    file_check spaced-hw-curve sp.yaml "$(printf "$GOOD_HW" | sed 's/\[1e12, 0.8\]/[1e12, " 0.8"]/')\n" "${H}sp\\.yaml:5:38: gemm_efficiency: ' 0\\.8' has spaces around it" hw
    # a model file's attn.rope_theta: 0 (the default 10000) or (1, 1e12], all named in one message
    # (0.5 was told "must exceed 1", -1 "must be at least 0", 1e13 "at most 1e+12"; 0.99999999 read "got 1")
    for th in 0.5:0.5 1:1 -1:-1 1e13:1e.13 0.99999999:0.99999999; do
        file_check rope-theta-${th%%:*} rt.yaml "name: m\\narch: llama\\nlayers: 2\\nhidden: 64\\nheads: 4\\nvocab: 10\\nseq: 8\\nattn: {rope_theta: ${th%%:*}}\\n" "${M}rt\\.yaml:8:20: attn\\.rope_theta: the rotary base must be in \\(1, 1e\\+12\\], or 0 for the default 10000 \\(got ${th#*:}\\)\$" models
    done
    file rt0.yaml 'name: m\narch: llama\nlayers: 2\nhidden: 64\nheads: 4\nvocab: 10\nseq: 8\nattn: {rope_theta: 0}\n'
    "$bin" models rt0.yaml >/dev/null 2>&1 || bad "attn.rope_theta: 0 (the default) is refused"
    # config.json's dropouts: a key the family's transformers code does not apply is refused unless 0
    file_check hf-dropout-unread hf9.json '{\n "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,\n "num_attention_heads": 4, "intermediate_size": 10, "vocab_size": 10,\n "hidden_dropout": 0.1}\n' "${M}hf9\\.json:4:2: hidden_dropout: a dropout that transformers does not apply for llama: it would be dropped" models
    file_check hf-dropout-split hf10.json '{"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 10,\n "resid_pdrop": 0.1, "embd_pdrop": 0.0}' "${M}hf10\\.json:2:[0-9]+: embd_pdrop: 0 differs from resid_pdrop \\(0\\.1\\): megaplan has one hidden dropout" models
    # values that differ past %g's six digits are written so (it said "0.1 differs from resid_pdrop (0.1)")
    file_check hf-dropout-split-close hf10b.json '{"model_type": "gpt2", "n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 10,\n "resid_pdrop": 0.1, "embd_pdrop": 0.1000000001}' "${M}hf10b\\.json:2:[0-9]+: embd_pdrop: 0\\.1000000001 differs from resid_pdrop \\(0\\.1\\)" models
    file_check hf-dropout-range hf11.json '{"model_type": "bert", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "vocab_size": 10,\n "attention_probs_dropout_prob": 1.0}' "${M}hf11\\.json:2:2: attention_probs_dropout_prob: expected a dropout probability" models
    # issue #14: the activation changes the math; one megaplan does not compute is refused
    file_check hf-activation hf9.json '{\n "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,\n "num_attention_heads": 4, "intermediate_size": 10, "vocab_size": 10,\n "hidden_act": "gelu"}\n' "${M}hf9\\.json:4:2: hidden_act: \"gelu\" changes the math and is not what megaplan computes for llama \\(SwiGLU: silu or swish\\)" models
    # T5: dense_act_fn / is_gated_act held to feed_forward_proj (gated-gelu is gelu_new)
    file_check hf-t5-dense-act hf10.json '{\n "model_type": "t5", "num_layers": 2, "d_model": 64, "num_heads": 4,\n "d_kv": 16, "d_ff": 32, "vocab_size": 10, "feed_forward_proj": "gated-gelu",\n "dense_act_fn": "gelu"}\n' "${M}hf10\\.json:4:2: dense_act_fn: \"gelu\" contradicts feed_forward_proj \"gated-gelu\", which transformers reads as gelu_new" models
    file_check hf-t5-gated hf11.json '{\n "model_type": "t5", "num_layers": 2, "d_model": 64, "num_heads": 4,\n "d_kv": 16, "d_ff": 32, "vocab_size": 10, "feed_forward_proj": "gated-gelu",\n "is_gated_act": false}\n' "${M}hf11\\.json:4:2: is_gated_act: false contradicts feed_forward_proj" models
    # JSON keeps duplicate keys, and cJSON reads the first where transformers (Python's json)
    # reads the last: refused at the second, as the YAML readers refuse them (both were read as llama)
    file_check hf-duplicate hf12.json '{\n "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,\n "num_attention_heads": 4, "intermediate_size": 10, "vocab_size": 10,\n "model_type": "gpt2"}\n' "${M}hf12\\.json:4:2: model_type: duplicate key" models
    file_check hf-duplicate-nested hf13.json '{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,\n "num_attention_heads": 4, "intermediate_size": 10, "vocab_size": 10,\n "rope_scaling": {"rope_type": "yarn", "factor": 4, "factor": 8}}' "${M}hf13\\.json:3:53: factor: duplicate key" models
    # a NUL ended cJSON's text: what came before it was read as the whole file
    file_check hf-nul hf14.json '{"model_type": "gpt2", "n_layer": 1, "n_embd": 8, "n_head": 2, "vocab_size": 9}\n\000\377garbage' "${M}hf14\\.json:2:1: JSON syntax error: control character 0x00" models
    file_check hf-escaped-nul hf15.json '{"model_type": "gpt2\\u0000x", "n_layer": 1, "n_embd": 8, "n_head": 2, "vocab_size": 9}' "${M}hf15\\.json:1:21: JSON string with \\\\u0000" models
    # transformers turns head_dim x partial_rotary_factor dims whatever the rope_type: it was read only with yarn
    file_check hf-partial-rotary hf17.json '{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64,\n "num_attention_heads": 4, "intermediate_size": 10, "vocab_size": 10,\n "partial_rotary_factor": 0.5}' "${M}hf17\\.json:3:2: partial_rotary_factor: only 1 \\(every head dim turned\\) is modelled" models
    # past cJSON's nesting limit: said so (it was "JSON syntax error (or truncated file)")
    { printf '{"model_type": "gpt2", "x": '; printf '%.0s[' $(seq 1001); printf '%.0s]' $(seq 1001); printf '}'; } >hfdeep.json
    check hf-deep "${M}hfdeep\\.json:1:1028: nested deeper than 1000 levels: refused$" "$bin" models hfdeep.json
    file_check hf-trailing hf6.json '{"model_type": "gpt2", "n_layer": 1, "n_embd": 8, "n_head": 2, "vocab_size": 9} x' "${M}hf6\.json:1:[0-9]+: JSON syntax error" models
    # Qwen3-MoE builds no shared expert (transformers' Qwen3MoeSparseMoeBlock): Qwen2-MoE's key was
    # read as one there, costing a model that does not run; 0 is what qwen3_moe means
    QWEN3='{"model_type": "qwen3_moe", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4,\n "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128, "vocab_size": 100,\n "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32'
    file_check hf-qwen3-shared hfq3.json "$QWEN3, \"shared_expert_intermediate_size\": 32}" "${M}hfq3\\.json:3:[0-9]+: shared_expert_intermediate_size: Qwen2-MoE's shared expert: transformers builds none for qwen3_moe" models
    file hfq3.json "$QWEN3, \"shared_expert_intermediate_size\": 0}"
    "$bin" models hfq3.json >/dev/null 2>&1 || bad "qwen3_moe with shared_expert_intermediate_size 0 is refused"
    # a range of config.json's in full (it said "expected a number in [1, 8.38861e+06]")
    file_check hf-range-full hfr.json '{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,\n "intermediate_size": 10, "vocab_size": 10, "rope_scaling": {"rope_type": "yarn", "factor": 4,\n "original_max_position_embeddings": 0}}' "${M}hfr\\.json:3:[0-9]+: original_max_position_embeddings: expected a number in \\[1, 8388608\\]$" models
    # a value just outside a model's range, exact (%%g said "must be >= 1, got 1" of 0.9999999)
    file_check moe-imbalance-exact mi.yaml 'name: m\narch: llama\nlayers: 4\nhidden: 512\nheads: 8\nffn_hidden: 1024\nvocab: 1000\nseq: 256\nmoe: {experts: 8, top_k: 2, expert_ffn: 64, imbalance: 0.9999999}\n' "${M}mi\\.yaml:9:[0-9]+: moe\\.imbalance: the busiest rank carries at least the mean: must be >= 1, got 0\\.9999999$" models
    # names hold UTF-8 text without the characters that end a YAML line: U+0085 and U+2028 were
    # taken, and the model file megaplan wrote ("# a<NEL>b: ... parameters") did not read back
    file_check name-nel nel.yaml "name: \"a\\\\u0085b\"\n$(printf "$GOOD_MODEL" | sed 1d)\n" "${M}nel\\.yaml:1:7: name: contains a control character or line break \\(U\\+0085\\)$" models
    file_check name-line-separator ls.yaml "name: \"a\\\\u2028b\"\n$(printf "$GOOD_MODEL" | sed 1d)\n" "${M}ls\\.yaml:1:7: name: contains a control character or line break \\(U\\+2028\\)$" models
    file utf8.yaml "name: \"\\\\u00e9\\\\u4e2d\"\n$(printf "$GOOD_MODEL" | sed 1d)\n"
    "$bin" models utf8.yaml >utf8-out.yaml 2>/dev/null && "$bin" models utf8-out.yaml >/dev/null 2>&1 ||
        bad "a UTF-8 name (e with acute, a CJK character) is refused, or its written file does not read back"
    # a name taken from a folder or file name: what a name may not hold becomes _ (a folder
    # "m<newline>x" wrote "# m" and "x: ... parameters" on two lines; a byte not UTF-8 in it
    # gave a plan (search -o) that megaplan refused to read back)
    nldir=$(printf 'm\nx'); mkdir -p "$nldir"
    printf '{"model_type": "gpt2", "n_layer": 1, "n_embd": 8, "n_head": 2, "vocab_size": 9}' >"$nldir/config.json"
    if ! "$bin" models "$nldir" >nl-out.yaml 2>err.txt || ! grep -q '^name: m_x$' nl-out.yaml ||
       ! "$bin" models nl-out.yaml >/dev/null 2>&1; then
        bad "a model named after folder 'm<newline>x': $(head -2 nl-out.yaml | tr '\n' '|') $(head -1 err.txt)"
    else
        ok
    fi

    # --- hardware profiles ---
    file_check hw-unknown-nested hw1.yaml "$(printf "$GOOD_HW" | sed 's/bw_per_gpu: 300 GB\/s/bw_per_gpux: 300 GB\/s/')\n" "${H}hw1\.yaml:9:[0-9]+: scale_up\.bw_per_gpux: unknown key" hw
    file_check hw-bad-unit hw2.yaml "$(printf "$GOOD_HW" | sed 's/latency: 2 us/latency: 2 parsecs/')\n" "${H}hw2\.yaml:9:[0-9]+: scale_up\.latency: expected a time" hw
    file_check hw-efficiency hw3.yaml "$(printf "$GOOD_HW" | sed 's/memory_efficiency: 0.7/memory_efficiency: 1.7/')\n" "${H}hw3\.yaml:6:20: memory_efficiency: too large" hw
    file_check hw-negative hw4.yaml "$(printf "$GOOD_HW" | sed 's/memory: 16 GiB/memory: -16 GiB/')\n" "${H}hw4\.yaml:2:9: memory: must be positive" hw
    file_check hw-curve-order hw5.yaml "$(printf "$GOOD_HW" | sed 's/\[\[1e9, 0.5\], \[1e12, 0.8\]\]/[[1e12, 0.5], [1e9, 0.8]]/')\n" "${H}hw5\.yaml:5:[0-9]+: gemm_efficiency: point 2: x values must increase" hw
    file_check hw-reserve hw6.yaml "$(printf "$GOOD_HW" | sed 's/runtime_reserve: 2 GiB/runtime_reserve: 20 GiB/')\n" "${H}hw6\.yaml:11:18: runtime_reserve: must be less than memory" hw
    file_check hw-zero hw7.yaml "$(printf "$GOOD_HW" | sed 's/gpus_per_node: 8/gpus_per_node: 0/')\n" "${H}hw7\.yaml:8:16: gpus_per_node: must be at least 1" hw
    file_check hw-truncated hw8.yaml 'name: t\nmemory: 16 GiB\nscale_up: {gpus_per_domain: 8, bw_per_gpu: 3' "${H}hw8\.yaml:[34]:[0-9]+: scale_up(\.bw_per_gpu)?: YAML syntax error" hw
    file_check hw-overflow hw9.yaml "$(printf "$GOOD_HW" | sed 's/hbm_bw: 1 TB\/s/hbm_bw: 1e400 TB\/s/')\n" "${H}hw9\.yaml:3:9: hbm_bw: expected a bandwidth" hw
    file_check hw-missing hw10.yaml "$(printf "$GOOD_HW" | grep -v kernel_overhead)\n" "${H}hw10\.yaml:1:1: kernel_overhead: missing" hw
    # counts in full (it said "got 1e+04 of 132 SMs" for 10000)
    file_check hw-nccl-ctas hw11.yaml "${GOOD_HW}sm_count: 132\nnccl_ctas: 10000\n" "${H}hw11\\.yaml:14:12: nccl_ctas: needs sm_count, and must be less than it \\(got 10000 of 132 SMs\\)" hw
    check hw-unknown-profile "${H}hw: unknown hardware profile 'dgx-a1000'" "$bin" hw dgx-a1000
    # a profile's text fields too, and --hw-set's: UTF-8 without line-ending characters
    check hw-set-name-not-utf8 "^megaplan estimate: --hw-set name: is not UTF-8 text \(byte 2, 0x85\)$" "$bin" estimate --model 125M --gpus 8 --hw-set "name=$(printf 'a\205b')"
    check hw-set-name-nel "^megaplan estimate: --hw-set name: contains a control character or line break \(U\+0085\)$" "$bin" estimate --model 125M --gpus 8 --hw-set "name=$(printf 'a\302\205b')"
    file_check hw-description-ls hwls.yaml "${GOOD_HW}description: \"x\\\\u2029y\"\n" "${H}hwls\\.yaml:13:14: description: contains a control character or line break \\(U\\+2029\\)$" hw
    # price_date is the month the price was read, as the profiles write it ("yesterday" was shown)
    file_check hw-price-date hwpd.yaml "${GOOD_HW}price_date: 2026-13\n" "${H}hwpd\\.yaml:13:13: price_date: expected the month the price was read, YYYY-MM \\(got '2026-13'\\)$" hw
    check hw-bad-format "${H}--format: expected" "$bin" hw --format xml
    check models-bad-option "${M}--frobnicate: unknown option" "$bin" models --frobnicate
}

estimate() {
    if "$bin" estimate --model 175B --gpus 8 2>&1 | grep -q PENDING; then
        echo "SKIP estimate: the verb is not built yet"
        exit 77
    fi
    E="^megaplan estimate: "
    file bad.yaml 'name: m\narch: gpt\nlayers: 12\nhidden: 768\nheads: 7\nvocab: 5\nseq: 5\n'
    check est-model-file "${E}bad\.yaml:5:8: heads: must divide hidden" "$bin" estimate --model bad.yaml --gpus 8
    file trunc.yaml 'name: m\narch: gpt\nlayers: [12'
    check est-model-truncated "${E}trunc\.yaml:[34]:[0-9]+: layers: YAML syntax error" "$bin" estimate --model trunc.yaml --gpus 8
    file_check est-hw-file hw.yaml 'name: t\nmemory: 16 GiB\nhbm_bw: 1 TB/z\n' "${E}hw\.yaml:3:9: hbm_bw: expected a bandwidth" estimate --model 175B --gpus 8 --hw
    check est-unknown-model "${E}--model: unknown model '176B'" "$bin" estimate --model 176B --gpus 8
    check est-unknown-hw "${E}--hw: unknown hardware profile" "$bin" estimate --model 175B --gpus 8 --hw tpu
    # a gated GELU MLP has no Megatron-LM flags: refused, not exported as another model
    file geglu.yaml 'name: g\narch: t5\nencoder_layers: 2\ndecoder_layers: 2\nhidden: 64\nheads: 4\nffn_hidden: 128\nvocab: 100\nencoder_seq: 64\ndecoder_seq: 16\nactivation: geglu\n'
    check est-megatron-geglu "${E}model\.activation: geglu: Megatron-LM has no flag for a gated GELU MLP" "$bin" estimate --model geglu.yaml --gpus 8 --format megatron
    check est-tp-heads "${E}--tp: tp=7 does not divide the 96 attention heads" "$bin" estimate --model 175B --gpus 56 --tp 7
    # Megatron splits the MLP width over tp and stops where it does not divide (was accepted)
    file ffn.yaml 'name: f\narch: gpt\nlayers: 4\nhidden: 768\nheads: 12\nffn_hidden: 1001\nvocab: 50257\nseq: 1024\n'
    check est-tp-ffn "${E}--tp: tp=4 does not divide the FFN size 1001$" "$bin" estimate --model ffn.yaml --gpus 8 --tp 4
    check est-gpus-multiple "${E}--gpus: 100 GPUs is not a multiple of tp\*pp\*cp" "$bin" estimate --model 175B --gpus 100 --tp 8
    check est-recompute-module-unknown "${E}--recompute-modules: unknown module 'attn'" "$bin" estimate --model 175B --gpus 8 --recompute-modules core_attn,attn
    check est-recompute-module-absent "${E}--recompute-modules: moe_act needs MoE layers" "$bin" estimate --model 175B --gpus 8 --recompute-modules moe_act
    check est-recompute-module-full "${E}--recompute-modules: needs --recompute selective" "$bin" estimate --model 175B --gpus 8 --recompute full --recompute-modules mlp
    check est-cuda-graph-unknown "${E}--cuda-graph-scope: unknown scope 'full_iteration'" "$bin" estimate --model 175B --gpus 8 --cuda-graph-scope attn,full_iteration
    check est-cuda-graph-dense "${E}--cuda-graph-scope: the moe scopes need a model with experts" "$bin" estimate --model 175B --gpus 8 --cuda-graph-scope moe_router
    check est-cuda-graph-preprocess "${E}--cuda-graph-scope: moe_preprocess needs moe_router" "$bin" estimate --model mixtral-8x7b --gpus 8 --ep 8 --cuda-graph-scope moe_preprocess
    check est-batch "${E}--global-batch: 100 is not a multiple of micro_batch\*dp" "$bin" estimate --model 175B --gpus 64 --global-batch 100
    check est-layers "${E}--pp: the 96 layers cannot be split over pp\*vpp = 128\*1" "$bin" estimate --model 175B --gpus 128 --pp 128
    check est-zero "${E}--tp: must be at least 1" "$bin" estimate --model 175B --gpus 8 --tp 0
    check est-negative "${E}--gpus: must be at least 1" "$bin" estimate --model 175B --gpus -8
    check est-overflow "${E}--gpus: too large" "$bin" estimate --model 175B --gpus 99999999999999999999999
    check est-absurd "${E}--gpus: absurdly large" "$bin" estimate --model 175B --gpus 100000000000
    # a fraction of one token is no run (0.5 was planned as half a token: "days 0.00")
    check est-tokens-fraction "${E}--tokens: must be a whole count of tokens from 1 to 1e18, got '0.5'$" "$bin" estimate --model 175B --gpus 8 --tokens 0.5
    # nor is a token and a half (1.5 was taken while 0.5 was refused); 1.5T is a whole count
    check est-tokens-half "${E}--tokens: must be a whole count of tokens from 1 to 1e18, got '1\.5'$" "$bin" estimate --model 175B --gpus 8 --tokens 1.5
    # spaces around a value are refused by every option alike ("--gpus '3 '" was read as 3,
    # "--moe-imbalance '1.1 '" refused, "--tokens ' 3e11'" read); the verbs' own options too
    check est-space-count "${E}--gpus: '3 ' has spaces around it: give the value alone$" "$bin" estimate --model 175B --gpus "3 "
    check est-space-eq "${E}--gpus: ' 8' has spaces around it" "$bin" estimate --model 175B "--gpus= 8"
    check est-space-real "${E}--moe-imbalance: ' 1\.1' has spaces around it" "$bin" estimate --model 175B --gpus 8 --moe-imbalance " 1.1"
    check est-space-tokens "${E}--tokens: '3e11 ' has spaces around it" "$bin" estimate --model 175B --gpus 8 --tokens "3e11 "
    check sim-space-count "^megaplan simulate: --micro-batches: '2 ' has spaces around it" "$bin" simulate --micro-batches "2 " --model 175B --gpus 8
    check search-space-top "^megaplan search: --top: ' 3' has spaces around it" "$bin" search --model 175B --gpus 8 --top " 3"
    check est-word "${E}--micro-batch: expected a whole number" "$bin" estimate --model 175B --gpus 8 --micro-batch two
    check est-hw-set "${E}--hw-set memory: expected a size" "$bin" estimate --model 175B --gpus 8 --hw-set memory=lots
    check est-hw-set-key "${E}--hw-set scale_up\.bw: unknown field" "$bin" estimate --model 175B --gpus 8 --hw-set scale_up.bw=1
    # a range names the base unit it is in (it said "at most 1e+15 (got 1.073741824e+39)")
    check est-hw-set-bytes "${E}--hw-set memory: too large: at most 1e\+15 bytes \(got 1\.073741824e\+39 bytes\)$" "$bin" estimate --model 175B --gpus 8 --hw-set memory=1e30GiB
    check est-hw-set-time "${E}--hw-set kernel_overhead: too large: at most 1 s \(got 10 s\)$" "$bin" estimate --model 175B --gpus 8 --hw-set kernel_overhead=10s
    # one flag at pp 2: the rank left is the last, not a middle one (it said "0 layers left for 1 middle ranks")
    check est-first-stage-all "${E}--first-stage-layers: the first rank's 12 layers leave none of the model's 12 for the other rank \(Megatron: every rank holds layers\)$" "$bin" estimate --model 125M --gpus 8 --pp 2 --first-stage-layers 12
    check est-stage-flags-pp2 "${E}--first-stage-layers: the first and last ranks' 4 \+ 4 layers leave 4 of the model's 12 with no rank to hold them \(pp=2 has no middle ranks\)$" "$bin" estimate --model 125M --gpus 8 --pp 2 --first-stage-layers 4 --last-stage-layers 4
    # a bad word read an unset bool (UBSan: "load of value 249 ... _Bool")
    check est-param-gather-word "${E}--param-gather-overlap: expected on or off, got 'maybe'$" "$bin" estimate --model 175B --gpus 8 --param-gather-overlap maybe
    check est-sp "${E}--sp: sequence parallelism needs tp > 1" "$bin" estimate --model 175B --gpus 8 --sp
    check est-no-model "${E}--model: required" "$bin" estimate --gpus 8
    check est-a2a-overlap-vpp "${E}--moe-a2a-overlap: the EP all-to-all overlap needs a virtual pipeline" "$bin" estimate --model mixtral-8x7b --gpus 64 --ep 8 --pp 2 --moe-a2a-overlap on
    check est-a2a-overlap-dense "${E}--moe-a2a-overlap: an MoE overlap needs a model with experts" "$bin" estimate --model llama3-8b --gpus 8 --moe-a2a-overlap on
    # moe.imbalance had no ceiling: 64 on ep 8 with top-2 was estimated, though the busiest EP rank
    # carries at most ep*min(top_k, experts/ep)/top_k = 4 times the mean (config_moe.c)
    check est-imbalance-ceiling "${E}--moe-imbalance: the busiest of ep=8 ranks carries at most ep\*min\(top_k, experts/ep\)/top_k = 4 times the mean .*: got 64$" "$bin" estimate --model mixtral-8x7b --gpus 64 --ep 8 --moe-imbalance 64
    check est-imbalance-ep1 "${E}--moe-imbalance: the busiest of ep=1 ranks carries at most .* = 1 times the mean .*: got 1\.5$" "$bin" estimate --model mixtral-8x7b --gpus 64 --moe-imbalance 1.5
    file mi.yaml 'name: m\narch: llama\nlayers: 4\nhidden: 512\nheads: 8\nffn_hidden: 1024\nvocab: 1000\nseq: 256\nmoe: {experts: 8, top_k: 2, expert_ffn: 64, imbalance: 3}\n'
    check est-imbalance-model-file "${E}mi\.yaml:9:[0-9]+: moe\.imbalance: the busiest of ep=2 ranks carries at most .* = 2 times the mean .*: got 3$" "$bin" estimate --model mi.yaml --gpus 8 --ep 2
    check est-shared-overlap "${E}--shared-expert-overlap: shared-expert overlap needs shared experts" "$bin" estimate --model mixtral-8x7b --gpus 64 --ep 8 --shared-expert-overlap on
    check est-dispatcher "${E}--dispatcher: expected alltoall, allgather or flex, got 'deepep'" "$bin" estimate --model mixtral-8x7b --gpus 64 --dispatcher deepep
    # the flex kernels' SMs need the flex dispatcher, and a count a GPU can hold
    check est-flex-sms "${E}--flex-sms: the flex dispatcher's SMs need the flex dispatcher$" "$bin" estimate --model mixtral-8x7b --gpus 64 --ep 8 --flex-sms 32
    check est-flex-sms-zero "${E}--flex-sms" "$bin" estimate --model mixtral-8x7b --gpus 64 --ep 8 --dispatcher flex --flex-sms 0
    # at most the GPU's SMs less one (500 on a 132-SM GPU was taken, the SM share capped at all)
    check est-flex-sms-gpu "${E}--flex-sms: 108 SMs for the dispatch kernels: dgx-a100 has 108 SMs a GPU, .*\(at most 107\)$" "$bin" estimate --model mixtral-8x7b --gpus 64 --ep 8 --dispatcher flex --flex-sms 108
    file fsms.yaml 'megaplan_plan: 1\nmodel: mixtral-8x7b\nhw: dgx-h100\ntraining: {gpus: 64, global_batch: 64}\nparallel: {dp: 64, ep: 8, dispatcher: flex, flex_sms: 500}\n'
    check plan-flex-sms-gpu "${E}fsms\.yaml:5:[0-9]+: parallel\.flex_sms: 500 SMs for the dispatch kernels: dgx-h100 has 132 SMs" "$bin" estimate fsms.yaml
    check search-flex-sms-gpu "^megaplan search: --flex-sms: 999 SMs for the dispatch kernels: dgx-a100 has 108" "$bin" search --model mixtral-8x7b --gpus 64 --dispatcher flex --flex-sms 999
    # the flex backend: one of Megatron-Core's names, and only with the flex dispatcher
    check est-flex-backend "${E}--flex-backend: expected auto, deepep or hybridep, got 'ncclep'$" "$bin" estimate --model mixtral-8x7b --gpus 64 --ep 8 --dispatcher flex --flex-backend ncclep
    check est-flex-backend-alltoall "${E}--flex-backend: hybridep is a backend of the flex dispatcher: it needs dispatcher flex$" "$bin" estimate --model mixtral-8x7b --gpus 64 --ep 8 --flex-backend hybridep
    # the option named is the one given (it used to name --etp)
    check est-dispatcher-dense "${E}--dispatcher: a token dispatcher needs a model with experts \(llama3-8b has none\)$" "$bin" estimate --model llama3-8b --gpus 8 --dispatcher flex
    check est-ep-dense "${E}--ep: expert parallelism needs a model with experts \(llama3-8b has none\)$" "$bin" estimate --model llama3-8b --gpus 8 --ep 2
    # --cp-comm-type: parallel.cp_comm_type's rules, named as the option
    check est-cp-comm-unknown "${E}--cp-comm-type: expected p2p, all_gather or a2a, got 'ring'$" "$bin" estimate --model llama3-8b --hw dgx-h100 --gpus 8 --cp 2 --cp-comm-type ring
    check est-cp-comm-hier "${E}--cp-comm-type: a2a\+p2p \(hierarchical context parallelism.*is not modelled" "$bin" estimate --model llama3-8b --hw dgx-h100 --gpus 8 --cp 2 --cp-comm-type a2a+p2p
    check est-cp-comm-no-cp "${E}--cp-comm-type: all_gather is how context parallelism exchanges K/V: it needs cp > 1$" "$bin" estimate --model llama3-8b --hw dgx-h100 --gpus 8 --cp-comm-type all_gather
    check est-cp-comm-heads "${E}--cp-comm-type: a2a gives each CP rank heads/\(tp\*cp\) heads: 32 query and 8 key/value heads do not split over tp\*cp = 16$" "$bin" estimate --model llama3-8b --hw dgx-h100 --gpus 16 --tp 4 --cp 4 --cp-comm-type a2a
    check est-cp-comm-mla "${E}--cp-comm-type: a2a is not modelled for latent attention \(MLA\): give p2p$" "$bin" estimate --model deepseek-v3 --hw dgx-h100 --gpus 1024 --cp 2 --cp-comm-type a2a
    # a plan that names its attention kernel: only Megatron-LM's flags carry it
    cat > attn-flash.yaml <<'YAML'
megaplan_plan: 1
model: llama3-8b
hw: dgx-h100
training: {gpus: 8, seq: 8192, global_batch: 64, precision: bf16, attention_backend: flash}
parallel: {tp: 1, pp: 1, dp: 8, micro_batch: 1, zero: 3, dist_opt: true}
YAML
    check est-attn-backend-torchtitan "${E}--format: attention_backend \(Transformer Engine's attention kernel\): the torchtitan file written here has no key for it \(--format megatron writes it, or leave it out\)$" "$bin" estimate attn-flash.yaml --format torchtitan
    check est-attn-backend-deepspeed "${E}--format: attention_backend \(Transformer Engine's attention kernel\): the DeepSpeed file written here has no key for it" "$bin" estimate attn-flash.yaml --format deepspeed
    check est-cp-comm-torchtitan "${E}--format: the all_gather context-parallel exchange is Transformer Engine's, written for Megatron-LM only \(--format megatron\)$" "$bin" estimate --model llama3-8b --hw dgx-h100 --gpus 16 --cp 2 --zero 3 --cp-comm-type all_gather --format torchtitan
}

plan() {
    if "$bin" simulate 2>&1 | grep -q PENDING; then
        echo "SKIP plan: megaplan simulate is not built yet"
        exit 77
    fi
    S="^megaplan simulate: "
    HEAD='megaplan_plan: 1\nmodel: gpt3-125m\nhw: dgx-a100\n'
    file_check plan-unknown-key p1.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nparalel: {tp: 2}\n" "${S}p1\.yaml:5:1: paralel: unknown key" simulate
    file_check plan-tp-heads p2.yaml "${HEAD}training: {gpus: 8, global_batch: 8}\nparallel: {tp: 8}\n" "${S}p2\.yaml:5:16: parallel\.tp: tp=8 does not divide" simulate
    file_check plan-stages p3.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nstages: [[0, 7], [7, 14]]\n" "${S}p3\.yaml:5:9: stages: 2 ranges given" simulate
    # layer_recompute: recomputation is of the blocks; selective/full on the embedding (item 0)
    # or the head (item 13 of gpt3-125m's 12 blocks) was taken and meant nothing
    file_check plan-lrc-embedding p3b.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nlayer_recompute: [full, none, none, none, none, none, none, none, none, none, none, none, none, none]\n" "${S}p3b\.yaml:5:19: layer_recompute: item 0 is the embedding: only none \(recomputation is of the blocks\)$" simulate
    file_check plan-lrc-head p3b.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nlayer_recompute: [none, full, full, full, full, full, full, full, full, full, full, full, full, selective]\n" "${S}p3b\.yaml:5:[0-9]+: layer_recompute: item 13 is the head: only none" simulate
    # a stage bound past the model's items gave the format's range ([0, 2050]), not the model's
    file_check plan-stages-range p3c.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nparallel: {pp: 2, dp: 2}\nstages: [[0, 7], [7, 3000]]\n" "${S}p3c\.yaml:6:22: stages: out of range \[0, 14\]: the model has 14 layer items \(layers \+ 2\) \(got 3000\)$" simulate
    file_check plan-stages-negative p3c.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nparallel: {pp: 2, dp: 2}\nstages: [[-1, 7], [7, 14]]\n" "${S}p3c\.yaml:6:11: stages: out of range \[0, 14\]: .*\(got -1\)$" simulate
    # an empty layout was taken as not given (Megatron's default split), where
    # --pipeline-layout "" is refused as empty
    file_check plan-layout-empty p3d.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nparallel: {pp: 2, dp: 2, pipeline_layout: ''}\n" "${S}p3d\\.yaml:5:43: parallel\\.pipeline_layout: empty$" simulate
    file_check estimate-plan-layout-empty p3d.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nparallel:\n  pp: 2\n  pipeline_layout: \"\"\n" "^megaplan estimate: p3d\\.yaml:7:20: parallel\\.pipeline_layout: empty$" estimate
    # an empty plan is located at its start, as an empty model or profile is (it said "p0.yaml: expected a plan")
    file_check plan-empty p0.yaml '' "${S}p0\\.yaml:1:1: empty: expected a plan \\(a mapping with megaplan_plan: 1\\)\$" simulate
    file_check plan-empty-doc p0.yaml '# only a comment\n' "${S}p0\\.yaml:1:1: empty: expected a plan" simulate
    file_check plan-truncated p4.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nstages: [[0, 7], [7" "${S}p4\.yaml:[56]:[0-9]+: stages: YAML syntax error" simulate
    file_check plan-negative p5.yaml "${HEAD}training: {gpus: -4, global_batch: 8}\n" "${S}p5\.yaml:4:18: training\.gpus: must be at least 1" simulate
    file_check plan-batch p6.yaml "${HEAD}training: {gpus: 4, global_batch: 7}\n" "${S}p6\.yaml:4:35: training\.global_batch: 7 is not a multiple" simulate
    file_check plan-recompute-module p9.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nparallel: {tp: 2, recompute: selective, recompute_modules: [mlp, attn]}\n" "${S}p9\.yaml:5:66: parallel\.recompute_modules: unknown module 'attn'" simulate
    file_check plan-cuda-graph-scope p11.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nparallel: {tp: 2, cuda_graph_scope: [attn, graph]}\n" "${S}p11\.yaml:5:44: parallel\.cuda_graph_scope: unknown scope 'graph'" simulate
    file_check plan-recompute-module-none p10.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nparallel: {tp: 2, recompute_modules: [mlp]}\n" "${S}p10\.yaml:5:38: parallel\.recompute_modules: needs recompute: selective" simulate
    # the model-dependent checks of the two lists name their line and plan path
    # (they said "p.yaml:1:1: recompute_modules: ...", the field unqualified)
    file_check plan-recompute-module-mla p22.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nparallel: {tp: 2, recompute: selective,\n  recompute_modules: [mla_up_proj]}\n" "${S}p22\.yaml:6:22: parallel\.recompute_modules: mla_up_proj needs multi-head latent attention" simulate
    file_check plan-cuda-graph-scope-dense p23.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nparallel: {tp: 2, cuda_graph_scope: [moe_router]}\n" "${S}p23\.yaml:5:37: parallel\.cuda_graph_scope: the moe scopes need a model with experts" simulate
    # Megatron's --overlap-param-gather-with-optimizer-step needs the interleaved schedule
    file_check plan-pg-with-opt-step p18.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nparallel: {pp: 2, dp: 2, dist_opt: true, overlap_param_gather_with_optimizer_step: true}\n" "${S}p18\\.yaml:5:[0-9]+: parallel\\.overlap_param_gather_with_optimizer_step: .*needs the interleaved pipeline schedule" simulate
    # Megatron's --ddp-bucket-size: a whole number of parameters, a Megatron-Core DDP option
    file_check plan-bucket-stack p19.yaml "${HEAD}training: {gpus: 4, global_batch: 8, stack: megatron-deepspeed-2021}\nparallel: {dp: 4, ddp_bucket_size: 1000}\n" "${S}p19\\.yaml:5:[0-9]+: parallel\\.ddp_bucket_size: --ddp-bucket-size is a Megatron-Core DDP option" simulate
    file_check plan-bucket-negative p20.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nparallel: {dp: 4, ddp_bucket_size: -5}\n" "${S}p20\\.yaml:5:[0-9]+: parallel\\.ddp_bucket_size: must be at least 0" simulate
    # a quoted value with spaces around it: refused as the command line refuses "--tp ' 2'"
    # (strtoll skipped them: tp: " 2" and "2 " were read as 2, stages [[0, " 14"]] as 14)
    file_check plan-spaced-int p26.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nparallel: {tp: \" 2\"}\n" "${S}p26\\.yaml:5:16: parallel\\.tp: ' 2' has spaces around it: give the value alone\$" simulate
    file_check plan-spaced-int-after p26.yaml "${HEAD}training: {gpus: \"4 \", global_batch: 8}\n" "${S}p26\\.yaml:4:18: training\\.gpus: '4 ' has spaces around it: give the value alone\$" simulate
    file_check plan-spaced-stage p26.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nstages: [[0, \" 14\"]]\n" "${S}p26\\.yaml:5:14: stages: ' 14' has spaces around it" simulate
    file_check plan-spaced-version p26.yaml "megaplan_plan: '1 '\nmodel: gpt3-125m\nhw: dgx-a100\ntraining: {gpus: 4, global_batch: 8}\n" "${S}p26\\.yaml:1:16: megaplan_plan: '1 ' has spaces around it" simulate
    file_check plan-spaced-word p26.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nparallel: {recompute: \"full \"}\n" "${S}p26\\.yaml:5:23: parallel\\.recompute: 'full ' has spaces around it" simulate
    file_check plan-spaced-lrc p26.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nlayer_recompute: [none, ' full', full, full, full, full, full, full, full, full, full, full, full, none]\n" "${S}p26\\.yaml:5:25: layer_recompute: ' full' has spaces around it" simulate
    file_check plan-spaced-module p26.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nparallel: {recompute: selective, recompute_modules: [' mlp']}\n" "${S}p26\\.yaml:5:54: parallel\\.recompute_modules: ' mlp' has spaces around it" simulate
    # the plain and quoted value alone are still read
    file p27.yaml "${HEAD}training: {gpus: \"4\", global_batch: '8'}\nparallel: {tp: \"2\"}\n"
    "$bin" simulate p27.yaml >/dev/null 2>&1 || bad "plan-quoted-int: a quoted integer alone is refused"
    # parallel.cp_comm_type: Megatron-Core's --cp-comm-type, strict
    file_check plan-cp-comm-unknown p22.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nparallel: {cp: 2, cp_comm_type: ring}\n" "${S}p22\\.yaml:5:[0-9]+: parallel\\.cp_comm_type: expected one of p2p\\|all_gather\\|a2a\\|a2a\\+p2p, got 'ring'" simulate
    file_check plan-cp-comm-hier p23.yaml "megaplan_plan: 1\nmodel: gpt3-125m\nhw: dgx-h100\ntraining: {gpus: 4, global_batch: 8}\nparallel: {cp: 2, cp_comm_type: a2a+p2p}\n" "${S}p23\\.yaml:5:[0-9]+: parallel\\.cp_comm_type: a2a\\+p2p \\(hierarchical context parallelism.*is not modelled" simulate
    file_check plan-cp-comm-heads p24.yaml "megaplan_plan: 1\nmodel: gpt3-125m\nhw: dgx-h100\ntraining: {gpus: 8, global_batch: 8}\nparallel: {tp: 2, cp: 4, cp_comm_type: a2a}\n" "${S}p24\\.yaml:5:[0-9]+: parallel\\.cp_comm_type: a2a gives each CP rank heads/\\(tp\\*cp\\) heads: 12 query" simulate
    file_check plan-cp-comm-no-cp p25.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\nparallel: {cp_comm_type: all_gather}\n" "${S}p25\\.yaml:5:[0-9]+: parallel\\.cp_comm_type: all_gather is how context parallelism exchanges K/V: it needs cp > 1" simulate
    check option-bucket-zero "^megaplan estimate: --ddp-bucket-size: must be at least 1 \\(got 0\\)" "$bin" estimate --model gpt3-125m --gpus 4 --ddp-bucket-size 0
    check option-bucket-fraction "^megaplan estimate: --ddp-bucket-size: expected a whole number, got '1.5e8'" "$bin" estimate --model gpt3-125m --gpus 4 --ddp-bucket-size 1.5e8
    # training.optimizer_moments: Megatron-Core's precision-aware optimizer
    file_check plan-moments-fp8 p12.yaml "${HEAD}training: {gpus: 4, global_batch: 8, optimizer_moments: fp8}\nparallel: {tp: 2, dist_opt: true}\n" "${S}p12\.yaml:4:57: training\.optimizer_moments: Adam's moments are kept in fp32, bf16 or fp16, not fp8" simulate
    file_check plan-moments-no-dist-opt p13.yaml "${HEAD}training: {gpus: 4, global_batch: 8, optimizer_moments: bf16}\nparallel: {tp: 2, dist_opt: false}\n" "${S}p13\.yaml:4:57: training\.optimizer_moments: bf16 moments are Megatron-Core's precision-aware optimizer, which runs with its distributed optimizer only" simulate
    file_check plan-moments-unknown p14.yaml "${HEAD}training: {gpus: 4, global_batch: 8, optimizer_moments: bf15}\nparallel: {tp: 2, dist_opt: true}\n" "${S}p14\.yaml:4:57: training\.optimizer_moments: expected one of" simulate
    check option-moments "^megaplan estimate: --optimizer-moments: expected fp32, bf16 or fp16, got 'fp8'" "$bin" estimate --model gpt3-125m --gpus 4 --dist-opt --optimizer-moments fp8
    # training.fp8_act_cache: DeepSeek-V3's FP8 SwiGLU-input cache, Megatron-Core's store
    file_check plan-act-cache-unknown p15.yaml "${HEAD}training: {gpus: 4, global_batch: 8, fp8_act_cache: fp4}\nparallel: {tp: 2}\n" "${S}p15\.yaml:4:53: training\.fp8_act_cache: expected one of" simulate
    file_check plan-act-cache-gelu p16.yaml "${HEAD}training: {gpus: 4, global_batch: 8, fp8_act_cache: swiglu_input}\nparallel: {tp: 2}\n" "${S}p16\.yaml:4:53: training\.fp8_act_cache: swiglu_input stores SwiGLU inputs in FP8, and model gpt3-125m's activation is not SwiGLU" simulate
    file_check plan-act-cache-bf16 p17.yaml 'megaplan_plan: 1\nmodel: mixtral-8x7b\nhw: dgx-h100\ntraining: {gpus: 64, global_batch: 64, fp8_act_cache: deepseek}\nparallel: {tp: 1, pp: 8, dp: 8, ep: 8}\n' "${S}p17\.yaml:4:55: training\.fp8_act_cache: deepseek caches FP8 with DeepSeek-V3's 1x128 tiles: it needs precision fp8 with fp8_recipe blockwise" simulate
    check option-act-cache "^megaplan estimate: --fp8-act-cache: expected off, swiglu_input or deepseek, got 'on'" "$bin" estimate --model gpt3-125m --gpus 4 --fp8-act-cache on
    # a model written inline in a plan: its dropouts are checked as a model file's
    file_check plan-dropout p21.yaml 'megaplan_plan: 1\nmodel: {name: m, arch: gpt, layers: 12, hidden: 768, heads: 12, vocab: 50257, seq: 1024, hidden_dropout: 1.5}\nhw: dgx-a100\ntraining: {gpus: 4, global_batch: 8}\n' "${S}p21\\.yaml:2:[0-9]+: model\\.hidden_dropout: too large: must be less than 1 \\(got 1\\.5\\)" simulate
    file_check plan-tokens-fraction p19.yaml "${HEAD}training: {gpus: 4, global_batch: 8, tokens: 0.5}\n" "${S}p19\.yaml:4:46: training\.tokens: must be 0 \(not asked\) or a whole number of tokens, at least 1 \(got 0\.5\)$" simulate
    file_check plan-tokens-half p19.yaml "${HEAD}training: {gpus: 4, global_batch: 8, tokens: 1.5}\n" "${S}p19\.yaml:4:46: training\.tokens: must be 0 \(not asked\) or a whole number of tokens, at least 1 \(got 1\.5\)$" simulate
    # an option a plan file does not take was dropped without a word (--hw-set memory=1GiB: "fits: yes")
    file okplan.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\n"
    for o in "--hw-set memory=1GiB" "--p2p-overlap on" "--cuda-graph-scope attn" "--optimizer-moments bf16"; do
        # shellcheck disable=SC2086
        check "plan-with $o" "^megaplan estimate: okplan\.yaml: give a plan file or a configuration's options, not both$" "$bin" estimate okplan.yaml $o
    done
    file_check plan-version p8.yaml 'megaplan_plan: 2\nmodel: gpt3-125m\nhw: dgx-a100\ntraining: {gpus: 4, global_batch: 8}\n' "${S}p8\.yaml:1:16: megaplan_plan: format version 2 is not known" simulate
    file_check plan-predicted p9.yaml "${HEAD}training: {gpus: 4, global_batch: 8}\npredicted: 5\n" "${S}p9\.yaml:5:12: predicted: expected a mapping" simulate
    file_check plan-not-a-plan p7.yaml 'model: gpt3-125m\n' "${S}p7\.yaml:1:1: megaplan_plan: missing" simulate
    # fp8_recipe under another precision was read and dropped (the plan ran bf16), where
    # --fp8-recipe is refused so
    file_check plan-fp8-recipe-bf16 p27.yaml "${HEAD}training: {gpus: 4, global_batch: 8, fp8_recipe: mxfp8}\n" "${S}p27\\.yaml:4:50: training\\.fp8_recipe: applies to precision fp8 only \\(precision is bf16\\)$" simulate
    file_check plan-fp8-recipe-fp16 p27.yaml "${HEAD}training: {gpus: 4, global_batch: 8, precision: fp16, fp8_recipe: delayed}\n" "${S}p27\\.yaml:4:[0-9]+: training\\.fp8_recipe: applies to precision fp8 only \\(precision is fp16\\)$" simulate
    # the EP all-to-all overlap runs without full recompute (Megatron-Core): recompute: full was
    # refused, the same full recompute given per layer was taken
    LR="[none$(printf ', full%.0s' $(seq 32)), none]"
    file_check plan-a2a-layer-full p29.yaml "megaplan_plan: 1\nmodel: mixtral-8x7b\nhw: dgx-h100\ntraining: {gpus: 64, global_batch: 128}\nparallel: {pp: 4, vpp: 2, dp: 16, ep: 8, moe_a2a_overlap: true}\nlayer_recompute: $LR\n" "${S}p29\\.yaml:6:18: layer_recompute: item 1 is full, and parallel\\.moe_a2a_overlap \\(the EP all-to-all overlap\\) runs without full recompute$" simulate
    # a plan's model.moe.imbalance above what its ep can carry (config_moe.c), at its line
    file_check plan-imbalance-ceiling p31.yaml 'megaplan_plan: 1\nmodel: {name: m, arch: llama, layers: 4, hidden: 512, heads: 8, ffn_hidden: 1024, vocab: 1000, seq: 256, moe: {experts: 8, top_k: 2, expert_ffn: 64, imbalance: 3}}\nhw: dgx-a100\ntraining: {gpus: 8, global_batch: 8}\nparallel: {dp: 8, ep: 2}\n' "${S}p31\\.yaml:2:[0-9]+: model\\.moe\\.imbalance: the busiest of ep=2 ranks carries at most .* = 2 times the mean .*: got 3$" simulate
    # hybrid sharding on one scale-up domain, refused as --hsdp is (a plan was estimated and run
    # as ZeRO-3 labelled hsdp)
    file_check plan-hsdp-one-node p30.yaml "${HEAD}training: {gpus: 8, global_batch: 8}\nparallel: {dp: 8, zero: 3, dist_opt: true, hsdp: true}\n" "${S}p30\\.yaml:5:50: parallel\\.hsdp: hybrid sharding shards within a scale-up domain and replicates across domains, and 8 GPUs are at most one domain of dgx-a100 \\(8\\): nothing to replicate" simulate
    # defer_embedding_wgrad is Megatron-Core's: the 2021 stacks were estimated with its flush
    for st in megatron-lm-2021 megatron-deepspeed-2021; do
        file_check "plan-defer-wgrad-$st" p28.yaml "${HEAD}training: {gpus: 4, global_batch: 8, stack: $st}\nparallel: {pp: 2, dp: 2, defer_embedding_wgrad: true}\n" "${S}p28\\.yaml:5:[0-9]+: parallel\\.defer_embedding_wgrad: --defer-embedding-wgrad-compute is a Megatron-Core option: training\\.stack must be megatron-lm \\($st has none\\)$" simulate
    done
}

# hardening: what a hostile or careless command line does -- repeated
# options, settings fixed twice, absurdly small hardware numbers (which used
# to print inf/nan), fixed search settings that cannot run together (which
# used to name an unrelated refusal), and iterations too large to simulate
# (which used to take 30 s and 6 GB, or write a 300 MB SVG). Each case is
# refused in bounded time (timeout) with one line, and leaves no file behind.
hardening() {
    E="^megaplan estimate: "
    S="^megaplan search: "
    SIM="^megaplan simulate: "
    TO="timeout 20"
    # the good forms of what follows are accepted
    if ! "$bin" estimate --model 125M --gpus 8 --hw-set hbm_bw=1TB/s --hw-set memory=40GiB >/dev/null 2>&1 ||
       ! "$bin" simulate --unit-ops --pp 4 --micro-batches 8 --trace ok.json >/dev/null 2>&1 ||
       ! "$bin" search --model 125M --gpus 8 --fix tp=2 --fix pp=2 --top 2 >/dev/null 2>&1; then
        bad "the good forms are refused"
    fi
    rm -f ok.json

    # --- a full disk: not exit 0 as if the output were whole (skipped without /dev/full) ---
    if [ -w /dev/full ]; then
        for cmd in "models" "hw dgx-a100" "simulate --unit-ops --pp 2 --micro-batches 4" \
                   "estimate --model 125M --gpus 8" "help search" "--version"; do
            # shellcheck disable=SC2086
            "$bin" $cmd >/dev/full 2>err.txt
            rc=$?
            if [ "$rc" -ne 1 ] || [ "$(wc -l <err.txt)" -ne 1 ] ||
               ! grep -q "cannot write the output" err.txt; then
                bad "full-disk '$cmd': exit $rc, stderr: $(cat err.txt)"
            else
                ok
            fi
        done
        # the ranks' output reaches it through mpirun, which ignored the failed write (exit 0)
        file one.yaml 'megaplan_plan: 1\nmodel: {name: t, arch: gpt, layers: 1, hidden: 64, heads: 2, vocab: 128, seq: 32}\nhw: dgx-a100\ntraining: {gpus: 1, global_batch: 1}\n'
        for cmd in "exec one.yaml --np 1 --steps 1" "calibrate --np 1"; do
            # the ranks run with LeakSanitizer's leak check off, as every exec test does
            # (Open MPI's allocations outlive MPI_Init by design)
            # shellcheck disable=SC2086
            ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" "$bin" $cmd >/dev/full 2>err.txt
            rc=$?
            if grep -q "was not built" err.txt; then
                echo "SKIP full-disk '$cmd': the executor is not built"
            elif [ "$rc" -ne 1 ] || [ "$(wc -l <err.txt)" -ne 1 ] ||
               ! grep -q "^megaplan [a-z]*: cannot write the output: No space left on device$" err.txt; then
                bad "full-disk '$cmd': exit $rc, stderr: $(cat err.txt)"
            else
                ok
            fi
        done
    fi
    # a newline in an argument split the error line in two (exec, calibrate, the verb name)
    nl=$(printf 'a\nb')
    check exec-newline "^megaplan exec: --steps: 'a b': expected" "$bin" exec plan.yaml --steps "$nl"
    check calibrate-newline "^megaplan calibrate: --name: 'a b' must be" "$bin" calibrate --name "$nl"
    check verb-newline "^megaplan: 'a b' is not a verb" "$bin" "$nl"
    # bytes that are not UTF-8 text are shown as '?' (they were quoted raw),
    # well-formed UTF-8 as it is
    ff=$(printf '\377\376')
    check non-utf8-option "^megaplan estimate: --precision: expected bf16, fp16, fp32 or fp8, got '\?\?'$" "$bin" estimate --model 125M --gpus 8 --precision "$ff"
    check non-utf8-top "^megaplan search: --top: '\?\?': expected an integer" "$bin" search --model 125M --gpus 8 --top "$ff"
    check non-utf8-file "^megaplan simulate: \?\?x\.yaml: cannot read: No such file" "$bin" simulate "${ff}x.yaml"
    e8=$(printf 'mod\303\250le')
    check utf8-model "^megaplan estimate: --model: unknown model '$e8': not a preset" "$bin" estimate --model "$e8" --gpus 8
    # a framework format the verb does not write: refused (the table came instead, exit 0)
    check simulate-format-deepspeed "${SIM}--format: simulate writes table, json or yaml$" "$bin" simulate --model 125M --gpus 8 --zero 3 --format deepspeed
    # a framework that cannot run the plan names the option (it said "megaplan estimate: format: ...")
    check estimate-format-torchtitan-schedule "^megaplan estimate: --format: torchtitan has no dualpipe pipeline schedule$" "$bin" estimate --model llama3-8b --gpus 16 --global-batch 64 --schedule dualpipe --pp 4 --format torchtitan
    # search writes its winner: the refusal says it is the winner the framework cannot run (it
    # said "--format: torchtitan has no dualpipe pipeline schedule" to a search given --fix pp=2)
    check search-format-torchtitan-winner "^megaplan search: --format: the best plan found \(tp=[0-9]+ pp=2 vpp=1 cp=1 dp=[0-9]+, dualpipe\) cannot be written so: torchtitan has no dualpipe pipeline schedule; --fix settings the framework runs to rank only those$" "$bin" search --model 125M --gpus 8 --format torchtitan --fix pp=2,schedule=dualpipe
    check estimate-format-deepspeed-pp "^megaplan estimate: --format: a DeepSpeed config here covers data and tensor parallelism" "$bin" estimate --model llama3-8b --gpus 16 --global-batch 64 --pp 4 --format deepspeed
    # a setting the DeepSpeed or torchtitan file has no key for was dropped in
    # silence (torchtitan's said mixed_precision_reduce "float32" to --grad-reduce-bf16 on)
    check estimate-format-torchtitan-te-ce "^megaplan estimate: --format: te_cross_entropy \\(Transformer Engine's fused cross entropy\\): the torchtitan file written here has no key for it" "$bin" estimate --model llama3-8b --gpus 8 --zero 3 --te-cross-entropy on --format torchtitan
    check estimate-format-torchtitan-native-ce "^megaplan estimate: --format: native_cross_entropy .* the torchtitan file" "$bin" estimate --model llama3-8b --gpus 8 --zero 3 --native-cross-entropy on --format torchtitan
    check estimate-format-torchtitan-bf16-reduce "^megaplan estimate: --format: grad_reduce_bf16 .* the torchtitan file" "$bin" estimate --model llama3-8b --gpus 8 --zero 3 --grad-reduce-bf16 on --format torchtitan
    check estimate-format-deepspeed-nccl-ub "^megaplan estimate: --format: nccl_ub .* the DeepSpeed file" "$bin" estimate --model llama3-8b --gpus 8 --zero 2 --nccl-ub on --format deepspeed
    # (search says so before searching: no winner could be written, and its "--fix settings
    # the framework runs" hint fitted none of these)
    check search-format-deepspeed-graphs "^megaplan search: --format: cuda_graph_scope \\(CUDA graphs\\): the DeepSpeed file written here has no key for it \\(--format megatron writes it, or leave it out\\)$" "$bin" search --model 125M --gpus 8 --zero 2 --cuda-graph-scope attn --format deepspeed
    # the model's MTP modules: the estimate charges them, neither file said a word of them
    file mtp.yaml "${GOOD_MODEL}mtp_layers: 1\n"
    for fmt in deepspeed:DeepSpeed:2 torchtitan:torchtitan:3; do
        # (check sets $name: the framework's is $fw)
        f=${fmt%%:*} fw=${fmt#*:} zero=${fmt##*:}
        fw=${fw%:*}
        check "estimate-format-$f-mtp" "^megaplan estimate: --format: mtp_layers \\(multi-token prediction modules\\): the $fw file written here has no key for it \\(--format megatron writes it, or leave it out\\)$" "$bin" estimate --model mtp.yaml --gpus 8 --zero "$zero" --format "$f"
        check "search-format-$f-mtp" "^megaplan search: --format: mtp_layers \\(multi-token prediction modules\\): the $fw file written here" "$bin" search --model mtp.yaml --gpus 8 --zero "$zero" --format "$f"
    done
    if ! "$bin" estimate --model mtp.yaml --gpus 8 --format megatron 2>&1 | grep -q -- "--mtp-num-layers 1"; then
        bad "estimate --format megatron does not write the MTP modules it charges"
    else
        ok
    fi
    check explain-format-torchtitan "^megaplan explain: --format: explain writes table, json, yaml or megatron" "$bin" explain --model 125M --gpus 8 --format torchtitan
    check unknown-verb "^megaplan: 'frob' is not a verb \(megaplan --help lists them\)$" "$bin" frob

    # --- one setting, given twice ---
    check twice-gpus "${E}--gpus: given twice \('8', then '16'\)" "$bin" estimate --model 175B --gpus 8 --gpus 16
    check twice-gpus-eq "${E}--gpus: given twice" "$bin" estimate --model 175B --gpus=8 --gpus=8
    check twice-sp "${E}--no-sp: given twice \('--sp', then '--no-sp'\)" "$bin" estimate --model 175B --gpus 8 --tp 8 --sp --no-sp
    check twice-model "^megaplan simulate: --model: given twice" "$bin" simulate --model 175B --model 125M --gpus 8
    check twice-top "${S}--top: given twice" "$bin" search --model 125M --gpus 8 --top 2 --top 3
    # --cp-comm-type: refused before the search when every candidate would be
    check search-cp-comm-hier "${S}--cp-comm-type: a2a\+p2p \(hierarchical" "$bin" search --model llama3-8b --hw dgx-h100 --gpus 64 --cp-comm-type a2a+p2p
    check search-cp-comm-cp1 "${S}--cp-comm-type: a2a is how context parallelism exchanges K/V: it needs cp > 1$" "$bin" search --model llama3-8b --hw dgx-h100 --gpus 64 --fix cp=1 --cp-comm-type a2a
    check search-cp-comm-heads "${S}--cp-comm-type: a2a gives each CP rank heads/\(tp\*cp\) heads: .*tp\*cp = 16$" "$bin" search --model llama3-8b --hw dgx-h100 --gpus 64 --tp 4 --cp 4 --cp-comm-type a2a
    check search-cp-comm-mla "${S}--cp-comm-type: all_gather is not modelled for latent attention \(MLA\)" "$bin" search --model deepseek-v3 --hw dgx-h100 --gpus 1024 --cp-comm-type all_gather
    check search-cp-comm-unknown "${S}--cp-comm-type: expected p2p, all_gather or a2a, got 'ulysses'$" "$bin" search --model llama3-8b --hw dgx-h100 --gpus 64 --cp-comm-type ulysses
    check twice-output "${S}--output: given twice" "$bin" search --model 125M --gpus 8 -o a.yaml --output b.yaml
    check twice-fix "${S}--fix: tp is fixed twice" "$bin" search --model 125M --gpus 8 --fix tp=2,tp=4
    check twice-fix-option "${S}--fix: tp is fixed twice" "$bin" search --model 125M --gpus 8 --tp 2 --fix tp=4
    check twice-trace "${SIM}--trace: given twice" "$bin" simulate --unit-ops --pp 2 --micro-batches 4 --trace a.json --trace=b.json
    check trace-empty "${SIM}--trace: needs a value" "$bin" simulate --unit-ops --pp 2 --micro-batches 4 --trace=
    # a value missing before the next option: that option was taken as the value ("--trace
    # --events" wrote a trace file named --events and exit 0; "--model --gpus 8" read 8 as a plan)
    check trace-then-option "${SIM}--trace: needs a value, and '--events' is an option \(a value that starts with -- goes as --trace=--events\)$" "$bin" simulate --model 125M --gpus 8 --trace --events --format json
    check model-then-option "${E}--model: needs a value, and '--gpus' is an option" "$bin" estimate --model --gpus 8
    check output-then-option "${S}-o: needs a value, and '--top' is an option \(a file of that name goes as -o \./--top\)$" "$bin" search --model 125M --gpus 8 -o --top 3
    check value-then-end "${E}--tp: needs a value, and '--' ends the options$" "$bin" estimate --model 125M --gpus 8 --tp --
    # a known option after "--" was told "unknown option (did you mean --model?)"
    check option-after-end "${E}--model: comes after '--', which ends the options: give it before" "$bin" estimate -- --model 125M --gpus 8
    [ -e --events ] && bad "a refused --trace wrote a file named --events"
    check hw-set-twice "${E}--hw-set: memory is set twice \\('memory=40GiB', then 'memory=80GiB'\\): say it once$" "$bin" estimate --model 175B --gpus 8 --hw-set memory=40GiB --hw-set memory=80GiB
    check hw-set-no-key "${E}--hw-set: expected KEY=VALUE" "$bin" estimate --model 175B --gpus 8 --hw-set =5
    # each verb's own options too (the last one silently won): flags, values,
    # an alias beside its name; --fix and --price are the repeatable ones
    check twice-no-split "${S}--no-split: given twice: say it once$" "$bin" search --model 125M --gpus 8 --no-split --no-split
    check twice-explain-flag "^megaplan explain: --no-simulate: given twice" "$bin" explain --model 125M --gpus 8 --no-simulate --no-simulate
    check twice-unit-ops "${SIM}--unit-ops: given twice: say it once$" "$bin" simulate --unit-ops --unit-ops --pp 2 --micro-batches 4
    check twice-alias "${SIM}--microbatches: given twice \('4', then '5'\)" "$bin" simulate --unit-ops --pp 2 --micro-batches 4 --microbatches 5
    check twice-exec-steps "^megaplan exec: --steps: given twice \('1', then '2'\): say it once$" "$bin" exec plan.yaml --steps 1 --steps 2
    check twice-exec-flag "^megaplan exec: --exact: given twice: say it once$" "$bin" exec plan.yaml --exact --exact
    # models --format given twice did not say the two values, as every other option does
    check twice-models-format "^megaplan models: --format: given twice \('json', then 'table'\): say it once$" "$bin" models --format json --format table
    # "all" among names was called an unknown profile
    check search-hw-all-listed "${S}--hw: all \(every profile\) cannot be combined with names" "$bin" search --model 125M --gpus 8 --hw all,dgx-a100
    # --force without a file to overwrite was taken and did nothing, in every verb that has it
    check force-alone-search "${S}--force: nothing to overwrite: it lets -o replace a read-only file$" "$bin" search --model 125M --gpus 8 --force
    check force-alone-search-hw "${S}--force: nothing to overwrite: it lets --plot replace a read-only file$" "$bin" search --model 125M --gpus 8 --hw dgx-a100,h200 --force
    check force-alone-simulate "${SIM}--force: nothing to overwrite: it lets --trace or --plot replace a read-only file$" "$bin" simulate --unit-ops --pp 2 --micro-batches 4 --force
    check force-alone-explain "^megaplan explain: --force: is search's" "$bin" explain --model 125M --gpus 8 --force
    check force-alone-exec "^megaplan exec: --force: nothing to overwrite: it lets --trace replace a read-only file$" "$bin" exec plan.yaml --force
    check force-alone-calibrate "^megaplan calibrate: --force: nothing to overwrite: it lets -o replace a read-only file$" "$bin" calibrate --force
    # an empty file name: refused at once (exec and calibrate ran every rank, then failed
    # writing it with no name, under mpirun's own lines)
    check exec-trace-empty "^megaplan exec: --trace: needs a value$" "$bin" exec plan.yaml --np 4 --trace ""
    # a layout's stages over pp 1 were taken as vpp: "--vpp: virtual stages (vpp=2) need
    # pipeline parallelism" named an option not given (and hid "'1' is not a layer");
    # search said "give pp too" to a command line that gave it
    check estimate-layout-pp1 "${E}--pipeline-layout: 2 stages, but pp\\*vpp = 1\\*1 = 1 " "$bin" estimate --model 125M --gpus 8 --pipeline-layout 'Et*6|t*6L'
    for verb in estimate search; do
        check "$verb-layout-pp1" "^megaplan $verb: --pipeline-layout: 2 stages, but pp\\*vpp = 1\\*1 = 1 " "$bin" $verb --model 125M --gpus 8 --pp 1 --pipeline-layout 'Et*6|t*6L'
        check "$verb-layout-pp1-syntax" "^megaplan $verb: --pipeline-layout: character 1: '1' is not a layer" "$bin" $verb --model 125M --gpus 8 --pp 1 --pipeline-layout '1|2'
    done
    check search-layout-stages "${S}--pipeline-layout: 3 stages, but pp\\*vpp = 2\\*1 = 2 " "$bin" search --model 125M --gpus 8 --pp 2 --pipeline-layout 'Et*6|t*3|t*3L'
    check search-layout-no-pp "${S}--pipeline-layout: a layout fixes the stages: give pp too" "$bin" search --model 125M --gpus 8 --pipeline-layout 'Et*6|t*6L'
    # an empty plan name was read as a file: "cannot read: No such file or directory", no name
    for verb in simulate estimate exec; do
        check "$verb-plan-empty-name" "^megaplan $verb: PLAN\\.yaml: empty file name$" "$bin" $verb ""
    done
    # a picture with no name before .svg: written as the hidden ".svg" and "-memory.svg";
    # search took only lower-case extensions, simulate any case
    check plot-no-name "${SIM}--plot: 'pics/\\.svg' has no name before its extension" "$bin" simulate --unit-ops --pp 2 --micro-batches 4 --plot pics/.svg
    check search-plot-no-name "${S}--plot: '\\.PNG' has no name before its extension" "$bin" search --model 125M --tokens 1T --gpus 8 --hw dgx-a100,h200 --plot .PNG
    check plot-extension "${SIM}--plot: the plot file must end in \\.svg or \\.png \\(got 'pic\\.txt'\\)$" "$bin" simulate --unit-ops --pp 2 --micro-batches 4 --plot pic.txt
    [ -e .svg ] || [ -e .PNG ] || [ -e -memory.svg ] && bad "a picture without a name was written"
    # exec's own checks of a plan name its line (they named the file alone:
    # "t5x.yaml: model.head_dim: ..."); the preset's key when the field is not written
    file t5x.yaml 'megaplan_plan: 1\nmodel: t5-11b\nhw: dgx-a100\ntraining: {gpus: 8, global_batch: 8}\nparallel: {tp: 8}\n'
    if ! "$bin" exec t5x.yaml --np 8 2>&1 | grep -q "was not built"; then
        check exec-plan-field-line "^megaplan exec: t5x\\.yaml:2:8: model\\.head_dim: head_dim x heads != hidden is not supported by this executor" "$bin" exec t5x.yaml --np 8
    fi
    # a file of the wrong kind to exec: the hint named --model, which exec does not have
    # (both refused before any rank starts: --compare's profile is read before MPI_Init,
    # and the plan with --np by the launcher's check)
    file kind6.yaml "$GOOD_MODEL"
    file kind7.yaml "$GOOD_HW"
    if ! "$bin" exec t5x.yaml --np 8 2>&1 | grep -q "was not built"; then
        # (a plan that passes exec's checks: the plan is checked before --compare's profile)
        file tiny.yaml 'megaplan_plan: 1\nmodel: {name: t, arch: gpt, layers: 1, hidden: 64, heads: 2, vocab: 128, seq: 32}\nhw: dgx-a100\ntraining: {gpus: 1, global_batch: 1}\n'
        check exec-compare-model "^megaplan exec: kind6\\.yaml:1:1: this is a model file, not a hardware profile: give it as --model FILE \\(estimate, explain, search, simulate\\)$" "$bin" exec tiny.yaml --compare kind6.yaml
        check exec-hw-as-plan "^megaplan exec: kind7\\.yaml:1:1: this is a hardware profile, not a plan: give it as --hw FILE \\(estimate, explain, search, simulate\\) or as exec's --compare FILE$" "$bin" exec kind7.yaml --np 1
        # without --np (the in-process path) the plan is read and checked before
        # MPI_Init as with it: after MPI_Init the exit 2 left Open MPI's state, which
        # LeakSanitizer reported as leaks (exit 134 in the sanitizer build)
        check exec-hw-as-plan-in-process "^megaplan exec: kind7\\.yaml:1:1: this is a hardware profile, not a plan: give it as --hw FILE" "$bin" exec kind7.yaml
        file badplan.yaml 'megaplan_plan: 1\nmodel: gpt3-125m\nhw: dgx-a100\ntraining: {gpus: 1, global_batch: 8}\nparallel: {tp: [1\n'
        check exec-bad-plan-in-process "^megaplan exec: badplan\\.yaml:6:1: parallel\\.tp: YAML syntax error" "$bin" exec badplan.yaml
        check exec-plan-field-in-process "^megaplan exec: t5x\\.yaml:2:8: model\\.head_dim: head_dim x heads != hidden is not supported by this executor" "$bin" exec t5x.yaml
        # a plan of 8 ranks in one process: its line, not MPI's start and a failed split
        file ranks8.yaml 'megaplan_plan: 1\nmodel: gpt3-125m\nhw: dgx-a100\ntraining: {gpus: 8, global_batch: 8}\nparallel: {tp: 2, dp: 4}\n'
        check exec-ranks-in-process "^megaplan exec: ranks8\\.yaml:4:18: training\\.gpus: the plan needs 8 ranks \\(tp 2 x cp 1 x dp 4 x pp 1\\) and this is one process: run .megaplan exec --np 8" "$bin" exec ranks8.yaml
        check exec-solo-rank-in-process "^megaplan exec: --solo: rank 8 is not one of the plan's 8 ranks$" "$bin" exec ranks8.yaml --solo 8
        check exec-missing-in-process "^megaplan exec: missing\\.yaml: cannot read" "$bin" exec missing.yaml
        # AutoModel's benchmark gate is costed, not executed: refused with its line, not run
        # with the model's router as if it were the plan (with --np and in one process)
        file fakegate.yaml 'megaplan_plan: 1\nmodel: {name: m, arch: llama, layers: 2, hidden: 32, heads: 4, ffn_hidden: 64, vocab: 64, seq: 16,\n  moe: {experts: 4, top_k: 2, expert_ffn: 32, fake_balanced_gate: true}}\nhw: dgx-a100\ntraining: {gpus: 1, global_batch: 1, precision: fp32}\n'
        check exec-fake-gate "^megaplan exec: fakegate\\.yaml:[0-9]+:[0-9]+: model\\.moe\\.fake_balanced_gate: exec routes each token with the model's top-k router" "$bin" exec fakegate.yaml --np 1
        check exec-fake-gate-in-process "^megaplan exec: fakegate\\.yaml:[0-9]+:[0-9]+: model\\.moe\\.fake_balanced_gate: exec routes" "$bin" exec fakegate.yaml
    fi
    # the plan verbs on plan files of every bad shape: one line naming file, line and field
    # (exec without --np among them: before MPI_Init)
    verbs="estimate simulate"
    "$bin" exec t5x.yaml --np 8 2>&1 | grep -q "was not built" || verbs="$verbs exec"
    PH='megaplan_plan: 1\nmodel: gpt3-125m\nhw: dgx-a100\n'
    mkdir -p plandir.yaml
    for verb in $verbs; do
        V="^megaplan $verb: "
        file_check "$verb-plan-list" shape1.yaml '- megaplan_plan: 1\n- model: gpt3-125m\n' "${V}shape1\\.yaml:1:1: expected a plan \\(a mapping with megaplan_plan: 1\\)$" $verb
        file_check "$verb-plan-scalar" shape2.yaml 'megaplan\n' "${V}shape2\\.yaml:1:1: expected a plan" $verb
        file_check "$verb-plan-dup" shape3.yaml "${PH}hw: dgx-h100\ntraining: {gpus: 1, global_batch: 8}\n" "${V}shape3\\.yaml:4:1: hw: duplicate key$" $verb
        file_check "$verb-plan-two-docs" shape4.yaml "${PH}training: {gpus: 1, global_batch: 8}\n---\nmegaplan_plan: 1\n" "${V}shape4\\.yaml:5:1: more than one YAML document in the file$" $verb
        file_check "$verb-plan-garbage" shape5.yaml "${PH}training: {gpus: 1x, global_batch: 8}\n" "${V}shape5\\.yaml:4:18: training\\.gpus: expected an integer, got '1x'$" $verb
        file_check "$verb-plan-huge" shape6.yaml "${PH}training: {gpus: 1, global_batch: 1e30}\n" "${V}shape6\\.yaml:4:35: training\\.global_batch: expected an integer, got '1e30'$" $verb
        file_check "$verb-plan-zero" shape7.yaml "${PH}training: {gpus: 1, global_batch: 0}\n" "${V}shape7\\.yaml:4:35: training\\.global_batch: must be at least 1 \\(got 0\\)$" $verb
        file_check "$verb-plan-truncated" shape8.yaml "${PH}training: {gpus: 1, glo" "${V}shape8\\.yaml:[45]:[0-9]+: training(\\.glo)?: YAML syntax error" $verb
        check "$verb-plan-folder" "${V}plandir\\.yaml: cannot read: Is a directory$" "$bin" $verb plandir.yaml
    done
    check calibrate-out-empty "^megaplan calibrate: -o: needs a value$" "$bin" calibrate --np 1 -o ""
    check twice-calibrate-out "^megaplan calibrate: -o: given twice \('a.yaml', then 'b.yaml'\)" "$bin" calibrate -o a.yaml -o b.yaml
    # search's hardware list: an empty name was skipped, and a file naming a listed profile doubled every row
    check search-hw-empty "${S}--hw: 'dgx-a100,,dgx-h100' has an empty profile name$" "$bin" search --model 125M --tokens 1T --gpus 8..16 --hw dgx-a100,,dgx-h100
    "$bin" hw dgx-h100 >h100copy.yaml
    check search-hw-same-inside "${S}--hw: dgx-h100 is listed twice \(h100copy\.yaml is named dgx-h100 inside\)$" "$bin" search --model 125M --tokens 1T --gpus 8..16 --hw dgx-h100,h100copy.yaml
    # spaces inside a value's parts, refused as around a whole value ("--tp ' 2'"): strtoll and
    # strtod skipped them, so these were read as memory 40 GiB, tp 2, tp {2, 4}, 8..16 GPUs, $2.49
    check hw-set-spaced-value "${E}--hw-set: 'memory= 40GiB' has spaces around its key or value: give them alone\$" "$bin" estimate --model 125M --gpus 8 --hw-set "memory= 40GiB"
    check hw-set-spaced-key "${E}--hw-set: 'memory =40GiB' has spaces around its key or value" "$bin" estimate --model 125M --gpus 8 --hw-set "memory =40GiB"
    check fix-spaced-value "${S}--fix: 'tp= 2' has spaces around its key or value: give them alone\$" "$bin" search --model 125M --gpus 8 --fix "tp= 2"
    check fix-spaced-set "${S}--fix: tp=2\\| 4: ' 4' has spaces around it: give the value alone\$" "$bin" search --model 125M --gpus 8 --fix "tp=2| 4"
    check search-gpus-range-spaced "${S}--gpus: '8\\.\\. 16': expected N or MIN\\.\\.MAX" "$bin" search --model 125M --tokens 1T --gpus "8.. 16" --hw dgx-a100
    check search-price-spaced "${S}--price: ' 2\\.49' is not a number" "$bin" search --model 125M --tokens 1T --gpus 8..16 --hw dgx-a100 --price "dgx-a100= 2.49"
    check search-price-hex "${S}--price: '0x2' is not a number" "$bin" search --model 125M --tokens 1T --gpus 8..16 --hw dgx-a100 --price dgx-a100=0x2
    check search-budget-negative "${S}--budget: -1 is out of range" "$bin" search --model 125M --tokens 1T --gpus 8..16 --hw dgx-a100 --budget -1
    # a listed name with spaces, and an unknown one, are the option's ("hw: unknown hardware profile ' h200'")
    check search-hw-spaced "${S}--hw: ' h200' has spaces around it: give the names alone\$" "$bin" search --model 125M --tokens 1T --gpus 8..16 --hw "dgx-a100, h200"
    check search-hw-unknown "${S}--hw: unknown hardware profile 'nope'" "$bin" search --model 125M --tokens 1T --gpus 8..16 --hw dgx-a100,nope
    check twice-search-hw "${S}--pue: given twice" "$bin" search --model 125M --tokens 1T --hw dgx-a100,dgx-h100 --pue 1.1 --pue 1.2
    [ -e a.yaml ] || [ -e b.yaml ] || [ -e a.json ] || [ -e b.json ] &&
        bad "a refused command wrote a file"

    # --- hardware numbers below any device (used to give inf / -nan% / 1e300 s) ---
    check hw-tiny-bw "${E}--hw-set hbm_bw: absurdly small: at least 1e\+06 bytes/s \(got 1e-300 bytes/s\)$" "$bin" estimate --model 175B --gpus 64 --hw-set "hbm_bw=1e-300 B/s"
    check hw-tiny-link "${E}--hw-set scale_out\.bw_per_gpu: absurdly small" "$bin" estimate --model 175B --gpus 64 --hw-set "scale_out.bw_per_gpu=1 B/s"
    check hw-tiny-eff "${E}--hw-set memory_efficiency: absurdly small" "$bin" estimate --model 175B --gpus 64 --hw-set memory_efficiency=1e-300
    check hw-tiny-curve "${E}--hw-set gemm_efficiency: point 1: y absurdly small" "$bin" estimate --model 175B --gpus 64 --hw-set "gemm_efficiency=[[1e9,1e-300]]"
    check hw-tiny-peak "${E}--hw-set peak_flops\.bf16: absurdly small: at least 1 GFLOP/s" "$bin" estimate --model 175B --gpus 64 --hw-set peak_flops.bf16=1e-300
    check hw-zero-eff "${E}--hw-set scale_up\.efficiency: must be positive" "$bin" estimate --model 175B --gpus 64 --hw-set scale_up.efficiency=0
    # the measured GEMM ceilings, as the peaks (1e-308 gave "compute inf -nan%" and -nan steps)
    check hw-tiny-matmul "${E}--hw-set matmul_achievable: absurdly small: at least 1 GFLOP/s, or 0 for none \\(got 1e-300 FLOP/s\\)\$" "$bin" estimate --model 1.3B --gpus 8 --hw b200 --hw-set matmul_achievable=1e-300
    check hw-tiny-matmul-fp8 "${E}--hw-set matmul_achievable_fp8_split: absurdly small" "$bin" estimate --model 1.3B --gpus 8 --hw dgx-h100 --hw-set matmul_achievable_fp8_split=5
    file_check hw-file-tiny-matmul tinymm.yaml "${GOOD_HW}matmul_achievable: 1e-308\n" "^megaplan hw: tinymm\\.yaml:13:20: matmul_achievable: absurdly small" hw
    file_check hw-file-tiny-peak tinypeak.yaml "$(printf "$GOOD_HW" | sed 's/bf16: 100 TFLOP\/s/bf16: 5/')\n" "^megaplan hw: tinypeak\.yaml:4:[0-9]+: peak_flops\.bf16: absurdly small" hw
    # the fractions that scale a GEMM's rate, 0 (none) or at least 0.001: mxfp8_gemm_rate 1e-300
    # gave an MXFP8 step of 10^300 s, curve_matmul_efficiency 1e-300 a curve scaled 10^300 times
    check hw-tiny-mxfp8-rate "${E}--hw-set mxfp8_gemm_rate: absurdly small: at least 0\\.001, or 0 for none \\(got 1e-300\\)\$" "$bin" estimate --model 1.3B --gpus 8 --hw b200 --precision fp8 --fp8-recipe mxfp8 --hw-set mxfp8_gemm_rate=1e-300
    file_check hw-file-tiny-curve-ratio tinycurve.yaml "${GOOD_HW}curve_matmul_efficiency: 1e-300\n" "^megaplan hw: tinycurve\\.yaml:13:26: curve_matmul_efficiency: absurdly small" hw
    # limits in full (it said "too large: at most 1e+01 (got 1e+02)")
    check hw-limit-full "${E}--hw-set collective_local_pass: too large: at most 10 \\(got 100\\)\$" "$bin" estimate --model 125M --gpus 8 --hw-set collective_local_pass=100

    # a FIFO nobody writes to: refused or read as empty, never waited on forever
    if mkfifo fifo.yaml 2>/dev/null; then
        check fifo-plan "${SIM}fifo\.yaml" timeout 10 "$bin" simulate fifo.yaml
        check fifo-hw "^megaplan hw: \./fifo\.yaml" timeout 10 "$bin" hw ./fifo.yaml
        rm -f fifo.yaml
    fi

    # a 5 MB config.json of one long array used to take 200+ MB as cJSON nodes
    { printf '{"model_type": "gpt2", "x": ['; yes '1,' | head -c 7500000 | tr -d '\n'; printf '1]}'; } >huge.json
    check hf-huge "^megaplan models: huge\.json: file larger than 4194304 bytes: refused" "$bin" models huge.json

    # --- search: fixed settings that cannot run together name themselves ---
    check dualpipe-odd-pp "^megaplan estimate: --pp: dualpipe pairs rank r with rank pp-1-r" "$bin" estimate --model llama3-8b --gpus 12 --pp 3 --schedule dualpipe
    check dualpipe-odd-m "^megaplan estimate: --global-batch: dualpipe feeds half the micro-batches from each end" "$bin" estimate --model llama3-8b --gpus 8 --pp 4 --dp 2 --schedule dualpipe --global-batch 14
    check dualpipe-unit-m "^megaplan simulate: --micro-batches: dualpipe needs an even number of micro-batches" "$bin" simulate --unit-ops --pp 4 --micro-batches 6 --schedule dualpipe
    # --unit-ops holds the schedules to a plan's rules (a V over one rank was drawn; dualpipe took --vpp 2)
    check zbv-unit-pp1 "^megaplan simulate: --pp: zb-v places two chunks per rank in a V: it needs pp >= 2 \(got 1\)$" "$bin" simulate --unit-ops --pp 1 --micro-batches 4 --schedule zb-v
    check dualpipev-unit-pp1 "^megaplan simulate: --pp: dualpipev places two chunks per rank in a V" "$bin" simulate --unit-ops --pp 1 --micro-batches 4 --schedule dualpipev
    check dualpipe-unit-vpp "^megaplan simulate: --vpp: dualpipe runs vpp 1 .*: got 2$" "$bin" simulate --unit-ops --pp 4 --vpp 2 --micro-batches 8 --schedule dualpipe
    # interleaved-1f1b with one chunk per rank, and virtual stages over one rank, were drawn
    check interleaved-unit-vpp1 "^megaplan simulate: --schedule: interleaved-1f1b needs vpp >= 2 \(got vpp=1\)$" "$bin" simulate --unit-ops --pp 2 --micro-batches 4 --schedule interleaved-1f1b
    check interleaved-unit-pp1-vpp1 "^megaplan simulate: --schedule: interleaved-1f1b needs vpp >= 2 \(got vpp=1\)$" "$bin" simulate --unit-ops --pp 1 --vpp 1 --micro-batches 4 --schedule interleaved-1f1b
    check vpp-unit-pp1 "^megaplan simulate: --vpp: virtual stages \(vpp=2\) need pipeline parallelism \(pp >= 2\)$" "$bin" simulate --unit-ops --pp 1 --vpp 2 --micro-batches 4
    # --unit-ops reads --pp, --vpp, --schedule and --micro-batches: the rest of a configuration
    # was taken and dropped (--tp 2, --hw-set memory=1GiB drew the same picture), and so was
    # --ep-overlap, which has no all-to-all to move there
    check unit-ops-tp "${SIM}--tp: --unit-ops draws unit-time ops from --pp, --vpp, --schedule and --micro-batches only" "$bin" simulate --unit-ops --pp 2 --micro-batches 4 --tp 2
    check unit-ops-hw-set "${SIM}--hw-set: --unit-ops draws unit-time ops" "$bin" simulate --unit-ops --hw-set memory=1GiB --pp 2 --micro-batches 4
    check unit-ops-ep-overlap "${SIM}--ep-overlap: --unit-ops has no MoE all-to-all to overlap$" "$bin" simulate --unit-ops --pp 2 --micro-batches 4 --ep-overlap
    # --ep-overlap without experts or with ep 1 did nothing, where --moe-a2a-overlap is refused
    check ep-overlap-dense "${SIM}--ep-overlap: an MoE overlap needs a model with experts \(gpt3-125m has none\)$" "$bin" simulate --model 125M --gpus 8 --ep-overlap
    check ep-overlap-ep1 "${SIM}--ep-overlap: the EP all-to-all overlap needs ep > 1 \(got ep 1\)$" "$bin" simulate --model mixtral-8x7b --gpus 64 --hw dgx-h100 --ep-overlap
    check search-zb-vpp "${S}--schedule: vpp=2 needs schedule interleaved-1f1b \(got zb-h1\)" "$bin" search --model 175B --gpus 64 --schedule zb-h1 --vpp 2 --pp 2
    check search-fix-zb-vpp "${S}--schedule: vpp=2 needs" "$bin" search --model 125M --gpus 8 --fix vpp=2,schedule=zb-h1
    check search-seq "${S}--seq: 4096 is longer than the model's 2048 learned positions" "$bin" search --model 175B --gpus 64 --seq 4096
    check search-dp "${S}--dp: 64 GPUs is not a multiple of the fixed tp\*pp\*cp\*dp" "$bin" search --model 175B --gpus 64 --tp 8 --pp 8 --dp 2
    check search-fix-dp "${S}--dp: 8 GPUs is not a multiple" "$bin" search --model 125M --gpus 8 --fix dp=3
    check search-vpp-pp1 "${S}--vpp: virtual stages \(vpp=2\) need pipeline parallelism" "$bin" search --model 125M --gpus 8 --fix vpp=2,pp=1
    check search-overlap "${S}--tp-overlap: TP communication overlap needs tp > 1 and sp on" "$bin" search --model 125M --gpus 8 --fix tp_overlap=on,sp=off
    # --fix reads yes/no words as files do (core/fields.h), and no others
    check search-fix-bool "${S}--fix: sp=maybe: expected true/false \(on/off\)$" "$bin" search --model 125M --gpus 8 --fix sp=maybe
    # an empty item or value in --fix was skipped ("tp=2|" and "tp=2," read as tp=2)
    check search-fix-empty-value "${S}--fix: tp=2\|: an empty value in the set$" "$bin" search --model 125M --gpus 8 --fix "tp=2|"
    check search-fix-empty-item "${S}--fix: 'tp=2,,pp=2' has an empty KEY=VALUE item$" "$bin" search --model 125M --gpus 8 --fix "tp=2,,pp=2"
    check search-inter-vpp1 "${S}--schedule: interleaved-1f1b needs vpp >= 2" "$bin" search --model 125M --gpus 8 --fix schedule=interleaved-1f1b,vpp=1
    check search-cp-bert "${S}--cp: context parallelism is for GPT/LLaMA" "$bin" search --model bert-large --gpus 8 --cp 2
    check search-batch "${S}--global-batch: 8 is not a multiple of micro_batch\*dp = 3\*2" "$bin" search --model 175B --gpus 64 --global-batch 8 --dp 2 --micro-batch 3
    # the batch the user did not give is the model's: no --global-batch to blame
    # (with dp free the line said "micro_batch*dp = 3*1", a dp nobody fixed: it names what is fixed)
    check search-batch-default "${S}the global batch \(gpt3-125m's published 256; --global-batch not given\) is not a multiple of the fixed micro_batch 3 \(micro_batch\*dp must divide it; dp is free\)$" "$bin" search --model 125M --gpus 8 --fix micro_batch=3
    check search-batch-dp-fixed "${S}--global-batch: 12 is not a multiple of the fixed dp 8 \(micro_batch\*dp must divide it; micro_batch is free\)$" "$bin" search --model 125M --gpus 8 --dp 8 --global-batch 12
    # expert settings are checked before the search, as estimate checks them:
    # an ep that does not divide the experts names --ep (or the --fix key), not
    # whatever unrelated rule refused the last candidate; on a dense model they
    # are refused, never ignored
    check search-ep-experts "${S}--ep: ep=3 does not divide the 8 experts$" "$bin" search --model mixtral-8x7b --gpus 64 --ep 3
    check search-fix-ep-experts "${S}--fix: ep=3 does not divide the 8 experts$" "$bin" search --model mixtral-8x7b --gpus 64 --fix ep=3,pp=1
    check search-fix-ep16 "${S}--fix: ep=16 does not divide the 8 experts$" "$bin" search --model mixtral-8x7b --gpus 64 --fix ep=16
    check search-ep-gpus "${S}--ep: ep=8 is more than the 4 GPUs$" "$bin" search --model mixtral-8x7b --gpus 4 --ep 8
    check search-etp-ffn "${S}--etp: etp=3 does not divide the expert FFN size 14336$" "$bin" search --model mixtral-8x7b --gpus 64 --etp 3
    check search-ep-dense "${S}--ep: expert parallelism needs a model with experts \(llama3-8b has none\)$" "$bin" search --model llama3-8b --gpus 8 --ep 2
    # the sharding options imply each other; given together they must agree in
    # either order (the last one won: --no-dist-opt --zero 2 ran ZeRO-2, the
    # other order was refused; --fix zero=3,dist_opt=off searched both)
    for order in "--no-dist-opt --zero 2" "--zero 2 --no-dist-opt"; do
        # shellcheck disable=SC2086
        check "zero-vs-no-dist-opt $order" "${E}--no-dist-opt: --zero 2 shards the optimizer states" "$bin" estimate --model 125M --gpus 8 $order
    done
    for order in "--zero 1 --hsdp" "--hsdp --zero 1"; do
        # shellcheck disable=SC2086
        check "hsdp-vs-zero $order" "${E}--hsdp: hybrid sharding is a form of ZeRO-3 / FSDP, and --zero 1 is not" "$bin" estimate --model 125M --gpus 8 $order
    done
    check hsdp-vs-no-dist-opt "${E}--no-dist-opt: hybrid sharding \(--hsdp\) shards the optimizer states" "$bin" estimate --model 125M --gpus 8 --no-dist-opt --hsdp
    check fix-zero-vs-dist-opt "${S}--fix: zero=2 shards the optimizer states, and dist_opt is fixed off" "$bin" search --model 125M --gpus 8 --no-dist-opt --fix zero=2
    check fix-dist-opt-vs-zero "${S}--fix: dist_opt=off, and zero is fixed 3" "$bin" search --model 125M --gpus 8 --fix zero=3,dist_opt=off
    # hybrid sharding on one node: no candidate runs it, and search named the
    # last refusal it met ("--global-batch: interleaving needs ...")
    check search-hsdp-one-node "${S}--hsdp: hybrid sharding shards within a scale-up domain and replicates across domains, and 8 GPUs are at most one domain of dgx-a100 \(8\)" "$bin" search --model 125M --gpus 8 --hsdp
    # estimate, simulate and explain refuse it in search's words (estimate ran it
    # as ZeRO-3 labelled dist_opt=hsdp; explain's search, which keeps --hsdp,
    # reported the same unrelated refusal as search did)
    for verb in estimate simulate explain; do
        check "$verb-hsdp-one-node" "^megaplan $verb: --hsdp: hybrid sharding shards within a scale-up domain and replicates across domains, and 8 GPUs are at most one domain of dgx-a100 \(8\): nothing to replicate" "$bin" $verb --model 125M --gpus 8 --hsdp
    done
    # ZeRO-2/3 fixed with a pipeline: search enumerates sharded plans at pp 1 only, so every
    # candidate was refused and it named the last refusal ("--global-batch: interleaving needs
    # microbatches (1) a multiple of pp=2", exit 2) though estimate runs fsdp2 with pp
    check search-zero3-pp "${S}--pp: pp=2: search ranks ZeRO-3 plans without pipeline parallelism only" "$bin" search --model llama3-8b --gpus 16 --hw dgx-h100 --zero 3 --zero-runtime fsdp2 --pp 2
    check search-fix-zero3-pp-set "${S}--fix: pp=2: search ranks ZeRO-3 plans without pipeline" "$bin" search --model llama3-8b --gpus 16 --hw dgx-h100 --fix "zero=3,pp=2|4"
    # the last refusal of a search whose candidates all had tp 1 said "sp needs seq/cp (512) divisible by tp=1"
    check search-sp-tp1 "${S}--sp: sequence parallelism needs tp > 1 \\(got tp=1\\)$" "$bin" search --model t5-base --gpus 8 --hw dgx-h100 --fix dp=4,vpp=2,sp=on
    check search-fix-zero3-vpp "${S}--fix: vpp=2: search ranks ZeRO-3 plans without pipeline" "$bin" search --model llama3-8b --gpus 16 --hw dgx-h100 --fix zero=3,vpp=2
    check search-zero3-dualpipe "${S}--fix: schedule=dualpipe: search ranks ZeRO-3 plans without pipeline" "$bin" search --model mixtral-8x7b --gpus 64 --hw dgx-h100 --fix schedule=dualpipe,zero=3
    "$bin" explain --model llama3-8b --gpus 16 --hw dgx-h100 --zero 3 --zero-runtime fsdp2 --pp 2 >out.txt 2>err.txt &&
        grep -q "^runs and fits" out.txt && ok || bad "explain of zero 3 fsdp2 pp 2: $(head -1 err.txt)"
    check search-fix-hsdp-one-node "${S}--fix: hsdp=on: hybrid sharding" "$bin" search --model 125M --gpus 8 --fix hsdp=on
    check fix-hsdp-vs-zero "${S}--fix: hsdp=on is ZeRO-3 with the optimizer sharded, and zero is fixed otherwise" "$bin" search --model 125M --gpus 8 --fix zero=2,hsdp=on
    check search-fix-ep-dense "${S}--fix: ep=2: expert parallelism needs a model with experts \(llama3-8b has none\)$" "$bin" search --model llama3-8b --gpus 8 --fix ep=2
    check search-fix-etp-dense "${S}--fix: etp=2: expert parallelism needs a model with experts" "$bin" search --model llama3-8b --gpus 8 --fix etp=2
    check search-dispatcher-dense "${S}--dispatcher: a token dispatcher needs a model with experts \(llama3-8b has none\)$" "$bin" search --model llama3-8b --gpus 8 --dispatcher flex
    check search-a2a-dense "${S}--moe-a2a-overlap: an MoE overlap needs a model with experts" "$bin" search --model llama3-8b --gpus 8 --moe-a2a-overlap on
    check explain-ep-dense "^megaplan explain: --ep: expert parallelism needs a model with experts" "$bin" explain --model llama3-8b --gpus 8 --ep 2

    # nothing fits is exit 1, not bad input (405B's weights, gradients and
    # optimizer states alone exceed 64 GPUs; its 126 layers split unevenly over
    # pp = 8, as Megatron's first/last-stage split allows, and still do not fit)
    "$bin" search --model llama3-405b --gpus 64 >out.txt 2>err.txt
    rc=$?
    if [ "$rc" -ne 1 ] || [ -s out.txt ]; then
        bad "search-nothing-runs: exit $rc, expected 1: $(head -1 err.txt)"
    else
        ok
    fi

    # a legal but extreme model (2048 thin layers): the stage split's DP used to
    # run for minutes; it now gives up within its work budget (even split)
    file deep.yaml 'name: deep\narch: gpt\nlayers: 2048\nhidden: 256\nheads: 4\nvocab: 1000\nseq: 256\n'
    timeout 90 "$bin" search --model deep.yaml --gpus 8 >out.txt 2>err.txt
    rc=$?
    if [ "$rc" -ne 0 ] || ! grep -q "^   1 " out.txt; then
        bad "search-deep-model: exit $rc (124 = timeout): $(head -2 err.txt)"
    else
        ok
    fi
    # so many divisors that the space has 10^8 candidates: refused, not minutes
    # (a model small enough to fit: a huge one's micro-batches stop at the
    # first over memory, and that search ends by saying nothing fits)
    file div.yaml 'name: div\narch: gpt\nlayers: 1680\nhidden: 10080\nheads: 5040\nvocab: 50400\nseq: 5040\nposition: rope\n'
    check search-huge-space "${S}--gpus: absurdly large search: more than 2097152 candidates" timeout 60 "$bin" search --model div.yaml --gpus 720720 --global-batch 1037836800 --tp-cross-node --hw-set flash_attention=true

    # the largest degrees everywhere: no overflow (the sanitizer build halts on one)
    "$bin" explain --model 175B --gpus 8 --tp 16777216 --pp 16777216 --cp 16777216 >out.txt 2>err.txt
    rc=$?
    if [ "$rc" -ne 0 ] || ! grep -q "^refused: tp:" out.txt || [ -s err.txt ]; then
        bad "explain-huge-degrees: exit $rc: $(head -3 err.txt)"
    else
        ok
    fi

    # --- iterations too large to simulate: refused at once, nothing written ---
    check sim-huge-units "${SIM}--micro-batches: too large to simulate: pp\*vpp\*micro-batches = 16\*1\*4194304 is over 1048576" $TO "$bin" simulate --unit-ops --pp 16 --micro-batches 4194304
    check sim-huge-trace "${SIM}--micro-batches: too large to simulate: .* over 262144 with a timeline" $TO "$bin" simulate --unit-ops --pp 16 --micro-batches 65536 --trace big.json
    check sim-huge-plot "${SIM}--micro-batches: too large for --plot: .* over 32768" $TO "$bin" simulate --unit-ops --pp 16 --micro-batches 4096 --plot big.svg
    # the JSON summary has no limit of its own; --events stream what the engine can time
    check sim-huge-events "${SIM}--micro-batches: too large to simulate: .* over 262144 with a timeline" $TO "$bin" simulate --unit-ops --pp 16 --micro-batches 65536 --format json --events
    check sim-huge-config "${SIM}--global-batch: too large to simulate: pp\*vpp\*micro-batches = 4\*1\*1048576" $TO "$bin" simulate --model 125M --gpus 16 --pp 4 --global-batch 4194304
    check sim-huge-config2 "${SIM}--global-batch: too large to simulate: pp\*vpp\*micro-batches = 128\*1\*4194304" $TO "$bin" simulate --model 1T --gpus 128 --pp 128 --global-batch 4194304
    file big.yaml 'megaplan_plan: 1\nmodel: gpt3-125m\nhw: dgx-a100\ntraining: {gpus: 4, global_batch: 4194304}\nparallel: {pp: 4}\n'
    check sim-huge-plan "${SIM}big\.yaml: training\.global_batch: too large to simulate" $TO "$bin" simulate big.yaml --trace big.json
    # the two pictures of --plot come as a pair or not at all (needs gnuplot)
    if command -v gnuplot >/dev/null 2>&1; then
        mkdir -p pic-memory.svg
        check plot-pair "${SIM}pic-memory\.svg: is a folder, not a file" "$bin" simulate --unit-ops --pp 2 --micro-batches 4 --plot pic.svg
        if ls pic.svg* 2>/dev/null | grep -q .; then
            bad "the pipeline picture was left without its memory picture"
        fi
    fi
    if ls big.json* big*.svg 2>/dev/null | grep -q .; then
        bad "a refused simulation left a file: $(ls big.json* big*.svg 2>/dev/null)"
    fi
}

case "$group" in
core) core ;;
estimate) estimate ;;
plan) plan ;;
hardening) hardening ;;
*) echo "unknown group $group"; exit 2 ;;
esac
finish
