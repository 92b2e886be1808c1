#!/usr/bin/env python3
"""Regenerates tests/data/megatron_ci/golden_values.csv from a Megatron-LM checkout.

    python3 tools/megatron_ci_rows.py MEGATRON_LM_DIR > tests/data/megatron_ci/golden_values.csv

MEGATRON_LM_DIR is a work tree or a bare git directory (read with `git show HEAD:path`).
Never run by the tests: the CSV it writes is what they read. The header lines it
prints (source, licence, role, notes) are the ones the CSV keeps; the notes give
every assumption the columns make.

Rows: one per (test case, platform, environment) golden-values file of NVIDIA's
functional tests of Megatron-LM (tests/functional_tests/test_cases/gpt/<case>/
golden_values_<env>_<platform>.json) for the dense GPT cases of at least ~500M
parameters that log memory (CASES below). Steady state: WARMUP_ITER.
"""
import json
import os
import statistics
import subprocess
import sys

import yaml

CASE_DIR = "tests/functional_tests/test_cases/gpt"
# case -> the platforms whose golden file is that case's own measurement. The
# _gb200 variants (tp 4, pp 2) also carry dgx_h100 and lts dgx_a100 files that
# are not measurements of their configuration: the lts a100 one is identical,
# value for value, to gpt3_15b_8t_release_sm's (tp 8, pp 1), the h100 one has
# A100-like iteration times (3.39 s): left out.
CASES = {
    "gpt3_7b_tp1_pp4_memory_speed": None,
    "gpt3_7b_tp4_pp1_memory_speed": None,
    "gpt3_15b_8t_release": None,
    "gpt3_15b_8t_release_sm": None,
    "gpt3_15b_8t_release_sm_gb200": {"dgx_gb200"},
}
# NVIDIA CI's hardware (tests/test_utils/recipes/<platform>/gpt.yaml spec:
# nodes x gpus): megaplan's profile for each platform
PROFILES = {"dgx_a100": "dgx-a100", "dgx_h100": "dgx-h100", "dgx_gb200": "gb200-nvl72"}
# the first iteration counted as steady state: iteration-time is logged every
# --log-interval iterations as the mean over that interval; the 7B cases'
# values at iterations 2 and 4 still carry the first iterations' warm-up
# (gb200 tp4: 5.12, 1.10, then 0.85 s), the 15B cases log every 100
WARMUP_ITER = 10

COLUMNS = ("case,platform,environment,system,nodes,gpus_per_node,gpus,layers,hidden,heads,"
           "kv_heads,ffn_hidden,vocab,seq,position,activation,tied,linear_bias,hidden_dropout,"
           "attention_dropout,tp,pp,vp,cp,dp,sp,micro_batch,global_batch,precision,dist_opt,"
           "dp_overlap,param_gather_overlap,tp_overlap,recompute,deterministic,nccl_algo,"
           "log_params_norm,log_num_zeros,grad_acc_fusion,cuda_graphs,timed_from,timed_values,"
           "iter_s,mem_allocated_bytes,mem_max_allocated_bytes,compare").split(",")


class Repo:
    def __init__(self, path):
        self.path = path
        self.bare = not os.path.isdir(os.path.join(path, "tests"))

    def git(self, *args):
        return subprocess.run(["git", "-C", self.path, *args], check=True, capture_output=True,
                              text=True).stdout

    def read(self, rel):
        if self.bare:
            return self.git("show", "HEAD:" + rel)
        with open(os.path.join(self.path, rel)) as f:
            return f.read()

    def ls(self, rel):
        if self.bare:
            return [p.rsplit("/", 1)[-1] for p in self.git("ls-tree", "--name-only", "HEAD", rel + "/").split()]
        return sorted(os.listdir(os.path.join(self.path, rel)))

    def commit(self):
        return self.git("rev-parse", "HEAD").strip()


def recipe_size(repo, platform):
    """nodes, gpus per node of the platform's gpt recipe (its spec's defaults)."""
    name = {"dgx_gb200": "gb200", "dgx_h100": "h100", "dgx_a100": "h100"}[platform]
    spec = yaml.safe_load(repo.read(f"tests/test_utils/recipes/{name}/gpt.yaml"))["spec"]
    return int(spec["nodes"]), int(spec["gpus"])


def flag(args, name, default=False):
    v = args.get(name, default)
    return 1 if v is True or v == "true" else 0 if v in (False, None, "false") else v


def steady(values, first):
    """The non-nan values at iterations >= first."""
    return [(int(k), v) for k, v in values.items() if int(k) >= first and v != "nan"]


def row(repo, case, fname):
    env, platform = fname[len("golden_values_"):-len(".json")].split("_", 1)
    cfg = yaml.safe_load(repo.read(f"{CASE_DIR}/{case}/model_config.yaml"))
    a, envv = cfg["MODEL_ARGS"], cfg.get("ENV_VARS", {})
    gold = json.loads(repo.read(f"{CASE_DIR}/{case}/{fname}"))
    if not gold:
        return None
    nodes, gpn = recipe_size(repo, platform)
    compare = "yes"
    if case.startswith("gpt3_15b"):
        # the release cases run from a recipe this commit does not hold
        # (its .gitlab convergence stage runs local_recipes/<model>/<case>.sh, absent)
        nodes = gpn = ""
        compare = "no: GPU count not in the repository; squared ReLU"
    L, h = int(a["--num-layers"]), int(a["--hidden-size"])
    heads = int(a["--num-attention-heads"])
    kv = int(a["--num-query-groups"]) if flag(a, "--group-query-attention") else heads
    tp = int(a.get("--tensor-model-parallel-size", 1))
    pp = int(a.get("--pipeline-model-parallel-size", 1))
    lpv = a.get("--num-layers-per-virtual-pipeline-stage")
    vp = L // (pp * int(lpv)) if lpv else 1
    cp = int(a.get("--context-parallel-size", 1))
    gpus = nodes * gpn if nodes else ""
    dp = gpus // (tp * pp * cp) if gpus else ""
    gb = a.get("--global-batch-size")
    if gb is None:  # the 15B cases' ramp "0:384 200B:768 ...": 384 for the logged iterations
        gb = int(str(a["--step-batch-size-schedule"]).split()[0].split(":")[1])
    act = "squared_relu" if flag(a, "--squared-relu") else "swiglu" if flag(a, "--swiglu") else "gelu"
    it = gold["iteration-time"]["values"]
    t = steady(it, WARMUP_ITER)
    mem = steady(gold["mem-allocated-bytes"]["values"], WARMUP_ITER)
    peak = steady(gold["mem-max-allocated-bytes"]["values"], 1)
    drop = lambda k: str(a.get(k, 0.1))  # TransformerConfig's defaults: 0.1 (transformer_config.py)
    recompute = a.get("--recompute-granularity", "none")
    return {
        "case": case, "platform": platform, "environment": env, "system": PROFILES[platform],
        "nodes": nodes, "gpus_per_node": gpn, "gpus": gpus, "layers": L, "hidden": h,
        "heads": heads, "kv_heads": kv,
        "ffn_hidden": a.get("--ffn-hidden-size", 4 * h), "vocab": a.get("--vocab-size", ""),
        "seq": a["--seq-length"],
        "position": "rope" if a.get("--position-embedding-type") == "rope" else "learned",
        "activation": act, "tied": 0 if flag(a, "--untie-embeddings-and-output-weights") else 1,
        "linear_bias": 0 if flag(a, "--disable-bias-linear") else 1,
        "hidden_dropout": drop("--hidden-dropout"), "attention_dropout": drop("--attention-dropout"),
        "tp": tp, "pp": pp, "vp": vp, "cp": cp, "dp": dp, "sp": flag(a, "--sequence-parallel"),
        "micro_batch": a["--micro-batch-size"], "global_batch": gb,
        "precision": "bf16" if flag(a, "--bf16") else "fp16" if flag(a, "--fp16") else "fp32",
        "dist_opt": flag(a, "--use-distributed-optimizer"),
        "dp_overlap": flag(a, "--overlap-grad-reduce"),
        "param_gather_overlap": flag(a, "--overlap-param-gather"),
        "tp_overlap": flag(a, "--tp-comm-overlap"), "recompute": recompute,
        "deterministic": flag(a, "--deterministic-mode"),
        "nccl_algo": envv.get("NCCL_ALGO", ""),
        "log_params_norm": flag(a, "--log-params-norm"),
        "log_num_zeros": flag(a, "--log-num-zeros-in-grad"),
        "grad_acc_fusion": 0 if flag(a, "--no-gradient-accumulation-fusion") else 1,
        "cuda_graphs": 1 if flag(a, "--enable-cuda-graph") or a.get("--cuda-graph-impl") else 0,
        "timed_from": WARMUP_ITER, "timed_values": len(t),
        "iter_s": "%.5g" % statistics.median(v for _, v in t) if t else "",
        "mem_allocated_bytes": "%d" % statistics.median(v for _, v in mem),
        "mem_max_allocated_bytes": "%d" % max(v for _, v in peak),
        "compare": compare,
    }


HEADER = """\
# source: github.com/NVIDIA/Megatron-LM, commit @COMMIT@ (2026-08-22): tests/functional_tests/test_cases/gpt/<case>/golden_values_<env>_<platform>.json (NVIDIA CI's measured values) and model_config.yaml (every argument), tests/test_utils/recipes/{h100,gb200}/gpt.yaml (nodes x GPUs); regenerated by tools/megatron_ci_rows.py MEGATRON_LM_DIR
# licence: Megatron-LM is BSD-3-Clause / Apache-2.0 (LICENSE); measured values reproduced as facts for validation
# role: held-out
# note: why held-out: added after every profile was fitted; nothing is fitted to it, no constant or term chosen from it
# note: what the figures are: megatron/training/training.py training_log, lines 3436-3446: with --log-memory-to-tensorboard, mem-allocated-bytes = torch.cuda.memory_stats()["allocated_bytes.all.current"] and mem-max-allocated-bytes = ["allocated_bytes.all.peak"]: torch's caching allocator's ALLOCATED bytes (reserved is logged apart, mem-reserved-bytes, line 3439, not in the golden files), so no CUDA context, no NCCL buffers, no allocator fragmentation; the peak is never reset (no reset_peak_memory_stats under megatron/training), so it is the run's peak so far. training_log runs after train_step (training.py lines 4722 and 4888), i.e. after the optimizer step: mem-allocated-bytes is then the persistent state (bf16 weights, fp32 main-grad buffer, the distributed optimizer's fp32 master and Adam shards) plus whatever buffers stay allocated
# note: which rank: the tensorboard writer exists only on rank world_size - 1 (megatron/training/global_vars.py line 241; wandb line 258), and the golden files are read from its event files (tests/functional_tests/python_test_utils/common.py lines 13, 110-161). Megatron-Core's default rank order is tp-cp-ep-dp-pp (megatron/core/parallel_state.py line 617, pp outermost), so that rank is the LAST pipeline stage (its last TP and DP rank): with pp > 1 the stage with the output layer, without the embedding
# note: iteration-time: training.py lines 3546-3566: the interval timer over --log-interval iterations divided by their number (2 for the 7B cases, 100 for the 15B ones), logged only with --log-timers-to-tensorboard and not at the first iteration; iter_s = the median of the non-nan values at iterations >= timed_from (10: the 7B cases' values at 2 and 4 still carry warm-up, gb200 tp4: 5.12, 1.10, then 0.85 s); timed_values = how many; the a100 files keep every 5th iteration only, so 2 values (10, 20). mem_allocated_bytes: the median of its values at iterations >= 10; mem_max_allocated_bytes: the largest value in the file
# note: GPUs: tests/test_utils/recipes/h100/gpt.yaml spec nodes 1 x gpus 8 and gb200/gpt.yaml nodes 2 x gpus 4 (8 GPUs both); this commit has no a100 recipe: the a100 files come from older CI runs and the h100 recipe's spec (whose default platform is dgx_a100) is assumed, 1 x 8 (the 7B cases' tp x pp x dp = 8 needs 8 GPUs at gbs 8)
# note: the 7B cases' model: 32 layers, h 4096, 32 heads, 8 query groups, untied, --vocab-size 131073 with NullTokenizer, padded by Megatron to a multiple of 128 x tp (megatron/core/tokenizers/utils/build_tokenizer.py lines 133-146: 131200 at tp 1, 131584 at tp 4, the same for 131074 if the tokenizer adds an EOD), learned absolute positions (arguments.py line 2397: default learned_absolute; 8192 x 4096 on the first stage), FFN 4h (arguments.py lines 1320-1329, no --swiglu), GeLU, LayerNorm, biases on (no --disable-bias-linear), dropout 0.1 and 0.1 (transformer_config.py lines 188 and 191, not set), bf16, distributed optimizer with overlapped grad reduce and param gather, Transformer Engine; tp1_pp4: --num-layers-per-virtual-pipeline-stage 1, i.e. interleaved 1F1B with vp 8 chunks per rank, micro-batch 1, 4 micro-batches per pipeline (gbs 8, dp 2); tp4_pp1: micro-batch 2, 2 micro-batches, no SP
# note: settings that cost time and megaplan does not model (columns): deterministic (--deterministic-mode and NVTE_ALLOW_NONDETERMINISTIC_ALGO=0: deterministic kernels, e.g. TE's attention backward), nccl_algo Ring (NCCL_ALGO=Ring), log_params_norm and log_num_zeros (--log-params-norm, --log-num-zeros-in-grad: an extra pass over all parameters and gradients each logged iteration), grad_acc_fusion 0 (--no-gradient-accumulation-fusion: the weight gradient is a separate bf16 tensor added to the fp32 main grad), --log-interval 2 with barriers in the timers; no CUDA graphs, no fp8, no recompute; the 7B cases also run --async-save with a persistent checkpoint worker, but save only at exit (save interval 10000)
# note: the 15B release cases (gpt3_15b_8t_release, _sm, _sm_gb200; tp 8 SP, or tp 4 pp 2 vp 2 on GB200 with TP comm overlap; h 6144, 48 heads, 8 groups, seq 4096, micro-batch 4, gbs 384 for every logged iteration of the --step-batch-size-schedule ramp 0:384 200B:768 400B:1152, RoPE at 50 %, squared ReLU, LayerNorm 1p, no biases, no dropout, the Nemotron-2 256k SentencePiece vocab) are recorded but not compared (compare column): they run from a convergence recipe this commit does not hold (.gitlab runs tests/functional_tests/local_recipes/<model>/<case>.sh, absent), so their GPU count, hence dp, is not in the repository, and megaplan has no squared ReLU. The _sm_gb200 case's dgx_h100 and lts dgx_a100 files are left out: the a100 one equals gpt3_15b_8t_release_sm's (tp 8) value for value, the h100 one has A100-like times (3.39 s); the gpt3_7b_tp4_pp1 lts dgx_a100 file is empty ({}). tests/performance_tests (gpt_583m_perf, gpt_16b_perf, ...) are inference benchmarks (static_benchmark.py, tokens per second of generation), not training: none here
"""


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: megatron_ci_rows.py MEGATRON_LM_DIR")
    repo = Repo(sys.argv[1])
    rows = []
    for case, platforms in CASES.items():
        for fname in repo.ls(f"{CASE_DIR}/{case}"):
            if not fname.startswith("golden_values_"):
                continue
            if platforms and fname[len("golden_values_"):-len(".json")].split("_", 1)[1] not in platforms:
                continue
            r = row(repo, case, fname)
            if r:
                rows.append(r)
    sys.stdout.write(HEADER.replace("@COMMIT@", repo.commit()))
    print(",".join(COLUMNS))
    for r in rows:
        print(",".join(str(r[c]) for c in COLUMNS))


if __name__ == "__main__":
    main()
