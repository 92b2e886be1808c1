#!/usr/bin/env python3
"""megatron_check.py — hands a plan's exported flags to Megatron-LM itself.

Run by tools/megatron-check.sh inside a virtual environment with PyTorch and
a Megatron-LM checkout on sys.path:

    python megatron_check.py MEGAPLAN MEGATRON_FLAGS_BINARY PLAN.yaml...

For each plan: `megatron-flags PLAN` (megaplan's export), then Megatron's own
parse_args and validate_args on exactly those flags (plus the few a launch
needs that are not the plan's: lr, iterations, tokenizer), then
core_transformer_config_from_args, and for every (pipeline rank, virtual
stage) the number of blocks Megatron-Core builds there
(transformer_block.get_num_layers_to_build, parallel_state's rank answered
for it). Compared with the plan: the model's shape, data-parallel size,
virtual stages, micro-batches, the stage split, recompute, sequence
parallelism and the distributed optimizer. Prints one line per plan, "ok" or
what differs; exit 1 if any differs.
"""
import json
import os
import shlex
import subprocess
import sys

import yaml


def flags_of(binary, plan):
    out = subprocess.run([binary, plan], check=True, capture_output=True, text=True).stdout
    notes = [l for l in out.splitlines() if l.startswith("#")]
    env = {}
    args = []
    for line in out.splitlines():
        if line.startswith("#"):
            continue
        if line.startswith("export "):
            k, v = line[len("export "):].split("=", 1)
            env[k] = v
            continue
        args += shlex.split(line.rstrip("\\"))
    return notes, env, args


def blocks_per_stage(plan, L, K):
    st = plan.get("stages")
    if not st:
        per = L // K
        return [per] * K
    return [max(0, min(e, L + 1) - max(b, 1)) for b, e in st]


def check(binary, path):
    import megatron.core.parallel_state as ps
    from megatron.core.transformer import transformer_block
    from megatron.training.arguments import parse_args, validate_args
    from megatron.training.argument_utils import core_transformer_config_from_args

    import megatron.training.arguments as margs

    plan = yaml.safe_load(open(path))
    notes, env, flags = flags_of(binary, path)
    par, tr = plan["parallel"], plan["training"]
    gpus = tr["gpus"]
    # Megatron asks the GPU for its architecture (before Blackwell, tp or cp
    # need CUDA_DEVICE_MAX_CONNECTIONS=1); this machine has none: answer for
    # the plan's hardware (A100: 8, H100: 9)
    hw = plan.get("hw")
    hw = hw.get("name", "") if isinstance(hw, dict) else str(hw)
    margs.get_device_arch_version = lambda: 8 if "a100" in hw else 9
    os.environ.pop("CUDA_DEVICE_MAX_CONNECTIONS", None)  # only what the export says
    os.environ.update(env)
    os.environ.update({"WORLD_SIZE": str(gpus), "RANK": "0", "LOCAL_RANK": "0"})
    # what a launch adds that is not the plan's; and without TransformerEngine
    # (not installable on a CPU machine) its fused rotary kernel is switched
    # off, which changes no value of the model
    extra = ["--lr", "1e-4", "--train-iters", "10", "--tokenizer-type", "NullTokenizer",
             "--mock-data", "--no-rope-fusion"]
    sys.argv = ["pretrain"] + flags + extra
    args = parse_args()
    validate_args(args, {})
    config = core_transformer_config_from_args(args)
    diffs = []

    def want(what, got, exp):
        if got != exp:
            diffs.append("%s: Megatron %r, plan %r" % (what, got, exp))

    tp, pp, cp = par["tp"], par["pp"], par.get("cp", 1)
    vpp = par.get("vpp", 1) or 1
    want("data_parallel_size", args.data_parallel_size, gpus // (tp * pp * cp))
    want("virtual stages", args.virtual_pipeline_model_parallel_size or 1, vpp)
    want("micro-batches", tr["global_batch"] // (par["micro_batch"] * args.data_parallel_size),
         tr["global_batch"] // (par["micro_batch"] * gpus // (tp * pp * cp)))
    want("sequence_parallel", bool(args.sequence_parallel), bool(par.get("sp")) and tp > 1)
    want("distributed optimizer", bool(args.use_distributed_optimizer),
         bool(par.get("dist_opt")))
    # FP8 (TransformerConfig.fp8 / fp8_recipe) and the expert degrees
    fp8 = tr.get("precision") == "fp8"
    want("fp8 format", config.fp8, "hybrid" if fp8 else None)
    if fp8:
        want("fp8_recipe", config.fp8_recipe, tr.get("fp8_recipe", "delayed"))
    if par.get("ep"):
        want("expert_model_parallel_size", args.expert_model_parallel_size, par["ep"])
        want("expert_tensor_parallel_size", args.expert_tensor_parallel_size,
             par.get("etp") or tp)
    want("recompute_granularity", args.recompute_granularity,
         None if par.get("recompute", "none") == "none" and "layer_recompute" not in plan
         else args.recompute_granularity)
    # the model as Megatron builds it, against the plan's (a preset by name:
    # megaplan's own description of it, `megaplan models --format json`)
    model = plan["model"]
    if isinstance(model, str):
        model = PRESETS[model]
    hd = model.get("head_dim") or model["hidden"] // model["heads"]
    t5 = model.get("arch") == "t5"
    if t5:
        want("encoder layers", args.encoder_num_layers, model["encoder_layers"])
        # Megatron-LM's T5 builds its decoder with config.num_layers (the encoder's)
        want("decoder layers", config.num_layers, model["decoder_layers"])
        want("decoder_seq_length", args.decoder_seq_length, model["decoder_seq"])
    else:
        want("num_layers", config.num_layers, model["layers"])
    want("hidden_size", config.hidden_size, model["hidden"])
    want("num_attention_heads", config.num_attention_heads, model["heads"])
    want("kv_channels", config.kv_channels, hd)
    want("num_query_groups", config.num_query_groups or model["heads"],
         model.get("kv_heads") or model["heads"])
    want("ffn_hidden_size", config.ffn_hidden_size, model.get("ffn_hidden") or 4 * model["hidden"])
    want("gated_linear_unit (swiglu)", bool(config.gated_linear_unit),
         model.get("activation") == "swiglu")
    want("normalization", config.normalization,
         "RMSNorm" if model.get("norm") == "rmsnorm" else "LayerNorm")
    # every norm's epsilon (--norm-epsilon); a file without norm_eps has its
    # architecture's (megaplan's core/model.c: bert 1e-12, t5 1e-6, else 1e-5)
    want("layernorm_epsilon", config.layernorm_epsilon,
         model.get("norm_eps") or {"bert": 1e-12, "t5": 1e-6}.get(model.get("arch"), 1e-5))
    # the dropouts (--hidden-dropout, --attention-dropout); a file without them
    # has its architecture's (megaplan's core/model.c: llama 0, else 0.1)
    drop = 0.0 if model.get("arch") == "llama" else 0.1
    want("hidden_dropout", config.hidden_dropout, model.get("hidden_dropout", drop))
    want("attention_dropout", config.attention_dropout, model.get("attention_dropout", drop))
    want("position_embedding_type", args.position_embedding_type,
         {"rope": "rope", "relative": "relative"}.get(model.get("position"), "learned_absolute"))
    want("tied embeddings", not args.untie_embeddings_and_output_weights,
         bool(model.get("tied_embeddings", True)))
    want("add_bias_linear", bool(config.add_bias_linear), model.get("arch") not in ("llama", "t5"))
    want("vocab_size", args.vocab_size, model["vocab"])
    want("seq_length", args.seq_length, tr.get("seq") or model["seq"])
    L = args.num_layers
    K = pp * vpp
    if args.encoder_num_layers is not None and args.decoder_num_layers is not None:
        pass  # T5: encoder and decoder, no pipeline
    built = []
    if pp > 1 or vpp > 1:
        for v in range(vpp):
            for r in range(pp):
                ps.get_pipeline_model_parallel_rank = lambda r=r: r
                ps.get_virtual_pipeline_model_parallel_world_size = (
                    lambda: vpp if vpp > 1 else None)
                ps.get_pipeline_model_parallel_world_size = lambda: pp
                built.append(transformer_block.get_num_layers_to_build(
                    config, vp_stage=v if vpp > 1 else None, pp_rank=r))
        want("blocks per stage", built, blocks_per_stage(plan, L, K))
    summary = ("layers %s, hidden %d, heads %d/%s groups, ffn %d, dp %d, vpp %d, stages %s, "
               "recompute %s/%s/%s%s" % (
                   "%d+%d" % (args.encoder_num_layers, args.decoder_num_layers)
                   if getattr(args, "decoder_num_layers", None) else str(args.num_layers),
                   config.hidden_size, config.num_attention_heads, config.num_query_groups,
                   config.ffn_hidden_size, args.data_parallel_size,
                   args.virtual_pipeline_model_parallel_size or 1, built or "one",
                   config.recompute_granularity, config.recompute_method,
                   config.recompute_num_layers,
                   ", %d note(s)" % len(notes) if notes else ""))
    return diffs, summary


PRESETS = {}


def main():
    megaplan, binary, plans = sys.argv[1], sys.argv[2], sys.argv[3:]
    out = subprocess.run([megaplan, "models", "--format", "json"], check=True,
                         capture_output=True, text=True).stdout
    PRESETS.update({m["name"]: m for m in json.loads(out)})
    bad = 0
    for p in plans:
        try:
            diffs, summary = check(binary, p)
        except BaseException as e:  # Megatron asserts and exits on bad flags
            diffs, summary = ["refused: %s: %s" % (type(e).__name__, e)], ""
        name = os.path.basename(p)
        if diffs:
            bad += 1
            print("%s: DIFFERS: %s" % (name, "; ".join(diffs)))
        else:
            print("%s: ok (%s)" % (name, summary))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
