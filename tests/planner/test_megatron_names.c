/* test_megatron_names.c — every flag `--format megatron` writes is one that
 * Megatron-LM's parser knows (tests/data/megatron/flag_names.txt, read from
 * the pinned Megatron-LM by tools/megatron_flag_names.py), for dense, MoE,
 * latent-attention and FP8 plans; and the MoE, MLA and FP8 flags carry the
 * plan's values under Megatron's names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/io.h"
#include "core/plan.h"
#include "planner/megatron.h"

static char *known; /* the list, one flag per line, with a newline before the first */

static void load_known(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot read %s", path);
    size_t cap = 1 << 16, n = 1;
    known = malloc(cap);
    known[0] = '\n';
    char line[256];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        size_t l = strlen(line);
        if (n + l + 2 > cap) known = realloc(known, cap *= 2);
        memcpy(known + n, line, l);
        n += l;
    }
    known[n] = 0;
    fclose(f);
}

static bool is_known(const char *flag)
{
    char needle[160];
    snprintf(needle, sizeof needle, "\n%.120s\n", flag);
    return strstr(known, needle) != NULL;
}

/* The flags text of a plan. */
static char *flags_of(const char *model, const char *hw, const char *training,
                      const char *parallel)
{
    char text[4096];
    snprintf(text, sizeof text, "megaplan_plan: 1\nmodel: %s\nhw: %s\ntraining: %s\nparallel: %s\n",
             model, hw, training, parallel);
    mp_plan *plan = calloc(1, sizeof *plan);
    mp_error err = {0};
    assert_non_null(plan);
    if (mp_plan_parse_yaml(text, strlen(text), "test", plan, &err) != MP_OK)
        fail_msg("%s: %s: %s", model, err.field, err.msg);
    mp_buf out;
    mp_buf_init(&out);
    mp_megatron_args(&plan->config, plan, &out);
    free(plan);
    assert_false(out.oom);
    return out.data;
}

/* Every "--flag" at the start of a line is known. */
static void all_known(const char *model, const char *text)
{
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (p[0] != '-' || p[1] != '-') continue;
        char flag[128];
        size_t n = strcspn(p, " \n");
        snprintf(flag, sizeof flag, "%.*s", (int)(n < 127 ? n : 127), p);
        if (!is_known(flag)) fail_msg("%s: %s is not a flag of Megatron-LM's parser", model, flag);
    }
}

static void has(const char *text, const char *flag_and_value)
{
    char needle[160];
    snprintf(needle, sizeof needle, "\n%.120s \\", flag_and_value);
    if (!strstr(text, needle)) {
        snprintf(needle, sizeof needle, "\n%.120s\n", flag_and_value);
        if (!strstr(text, needle)) fail_msg("missing '%s' in:\n%s", flag_and_value, text);
    }
}

static void lacks(const char *text, const char *flag)
{
    assert_non_null(text);
    if (strstr(text, flag) != NULL) fail_msg("'%s' should not be in the flags", flag);
}

static void names(void **state)
{
    (void)state;
    char *t = flags_of("deepseek-v3", "dgx-h100",
                       "{gpus: 2048, seq: 4096, global_batch: 2048, precision: fp8, "
                       "fp8_recipe: blockwise}",
                       "{tp: 2, sp: true, pp: 16, dp: 64, ep: 32, etp: 1, micro_batch: 1, "
                       "dist_opt: true, schedule: 1f1b, dispatcher: alltoall}");
    all_known("deepseek-v3", t);
    has(t, "--bf16");
    has(t, "--fp8-format hybrid");
    has(t, "--fp8-recipe blockwise");
    has(t, "--num-experts 256");
    has(t, "--moe-router-topk 8");
    has(t, "--moe-router-num-groups 8");
    has(t, "--moe-router-group-topk 4");
    has(t, "--moe-router-topk-scaling-factor 2.5");
    lacks(t, "--moe-router-bias-update-rate"); /* Megatron's default */
    has(t, "--expert-model-parallel-size 32");
    has(t, "--expert-tensor-parallel-size 1");
    has(t, "--moe-token-dispatcher-type alltoall");
    has(t, "--moe-grouped-gemm");
    has(t, "--multi-latent-attention");
    has(t, "--q-lora-rank 1536");
    has(t, "--kv-lora-rank 512");
    has(t, "--qk-head-dim 128");
    has(t, "--qk-pos-emb-head-dim 64");
    has(t, "--v-head-dim 128");
    has(t, "--norm-epsilon 1e-06"); /* the config's rms_norm_eps */
    free(t);

    /* the account-for split, as the plan gives it (126 layers on 16 x 8 = 128
     * units: the first and last virtual stage the embedding and the loss alone)
     * and as a default split has it (126 + 2 on 16 x 4: 1 | 2 x 62 | 1) */
    t = flags_of("llama3-405b", "dgx-h100", "{gpus: 1024, seq: 8192, global_batch: 512}",
                 "{tp: 8, pp: 16, vpp: 8, micro_batch: 1, schedule: interleaved-1f1b, "
                 "account_for_embedding: true, account_for_loss: true}");
    all_known("llama3-405b account-for", t);
    has(t, "--account-for-embedding-in-pipeline-split");
    has(t, "--account-for-loss-in-pipeline-split");
    has(t, "--num-virtual-stages-per-pipeline-rank 8");
    lacks(t, "--pipeline-model-parallel-layout");
    lacks(t, "--num-layers-per-virtual-pipeline-stage");
    free(t);
    t = flags_of("llama3-405b", "dgx-h100", "{gpus: 512, seq: 8192, global_batch: 512}",
                 "{tp: 8, pp: 16, vpp: 4, micro_batch: 1, schedule: interleaved-1f1b}");
    all_known("llama3-405b vpp 4", t);
    has(t, "--account-for-embedding-in-pipeline-split");
    has(t, "--account-for-loss-in-pipeline-split");
    has(t, "--num-virtual-stages-per-pipeline-rank 4");
    lacks(t, "--pipeline-model-parallel-layout");
    free(t);
    /* and the first/last-stage form without virtual stages: Meta's 7, 8 x 14, 7 */
    t = flags_of("llama3-405b", "dgx-h100", "{gpus: 128, seq: 8192, global_batch: 512}",
                 "{tp: 8, pp: 16, micro_batch: 1, schedule: 1f1b}");
    all_known("llama3-405b pp 16", t);
    has(t, "--decoder-first-pipeline-num-layers 7");
    has(t, "--decoder-last-pipeline-num-layers 7");
    lacks(t, "--pipeline-model-parallel-layout");
    lacks(t, "--account-for");
    free(t);

    /* --overlap-param-gather-with-optimizer-step, read from the plan key, beside
     * the overlaps it needs */
    t = flags_of("llama3-70b", "dgx-h100", "{gpus: 64, seq: 8192, global_batch: 128}",
                 "{tp: 4, sp: true, pp: 4, vpp: 5, dp: 4, micro_batch: 1, dist_opt: true, "
                 "dp_overlap: true, schedule: interleaved-1f1b, "
                 "overlap_param_gather_with_optimizer_step: true}");
    all_known("llama3-70b", t);
    has(t, "--overlap-param-gather");
    has(t, "--overlap-param-gather-with-optimizer-step");
    has(t, "--use-distributed-optimizer");
    free(t);

    /* --ddp-bucket-size, read from the plan key (Megatron-Bridge's and NeMo's
     * 128 * 1024^2); absent from a plan that leaves Megatron's default */
    t = flags_of("llama3-70b", "dgx-h100", "{gpus: 64, seq: 8192, global_batch: 128}",
                 "{tp: 4, sp: true, pp: 4, dp: 4, micro_batch: 1, dist_opt: true, "
                 "dp_overlap: true, schedule: 1f1b, ddp_bucket_size: 134217728}");
    all_known("llama3-70b bucket", t);
    has(t, "--ddp-bucket-size 134217728");
    free(t);
    t = flags_of("llama3-70b", "dgx-h100", "{gpus: 64, seq: 8192, global_batch: 128}",
                 "{tp: 4, sp: true, pp: 4, dp: 4, micro_batch: 1, dist_opt: true, "
                 "dp_overlap: true, schedule: 1f1b}");
    lacks(t, "--ddp-bucket-size");
    free(t);

    /* the norm epsilon of each family, under Megatron's name */
    t = flags_of("bert-large", "dgx-a100", "{gpus: 8, seq: 512, global_batch: 256}",
                 "{tp: 2, dp: 4, micro_batch: 1, schedule: 1f1b}");
    all_known("bert-large", t);
    has(t, "--norm-epsilon 1e-12");
    free(t);
    t = flags_of("llama3-8b", "dgx-a100", "{gpus: 8, seq: 8192, global_batch: 512}",
                 "{tp: 8, micro_batch: 1, schedule: 1f1b}");
    has(t, "--norm-epsilon 1e-05");
    free(t);
    t = flags_of("{name: m, arch: llama, layers: 2, hidden: 256, heads: 4, vocab: 1000, seq: 128, "
                 "norm_eps: 3.5e-7}",
                 "dgx-a100", "{gpus: 1, seq: 128, global_batch: 8}",
                 "{micro_batch: 1, schedule: 1f1b}");
    has(t, "--norm-epsilon 3.5e-07");
    free(t);

    t = flags_of("mixtral-8x7b", "b200",
                 "{gpus: 64, seq: 4096, global_batch: 256, precision: fp8, fp8_recipe: mxfp8}",
                 "{tp: 2, sp: true, pp: 2, dp: 16, ep: 8, micro_batch: 1, dist_opt: true, "
                 "schedule: 1f1b, dispatcher: allgather}");
    all_known("mixtral-8x7b", t);
    has(t, "--fp8-recipe mxfp8");
    has(t, "--expert-model-parallel-size 8");
    has(t, "--expert-tensor-parallel-size 2"); /* etp absent: tp, Megatron's default */
    has(t, "--moe-token-dispatcher-type allgather");
    lacks(t, "--multi-latent-attention");
    lacks(t, "--fp8-param-gather");
    lacks(t, "--grad-reduce-in-bf16");
    free(t);

    /* the recipes' gradient and parameter storage, read from a plan file */
    t = flags_of("mixtral-8x7b", "b200",
                 "{gpus: 64, seq: 4096, global_batch: 256, precision: fp8, fp8_recipe: mxfp8, "
                 "grad_reduce_bf16: true, fp8_param_gather: true}",
                 "{tp: 1, pp: 1, dp: 64, ep: 8, micro_batch: 1, dist_opt: true}");
    all_known("mixtral-8x7b", t);
    has(t, "--fp8-param-gather");
    has(t, "--grad-reduce-in-bf16");
    free(t);

    /* Adam's moments in bf16 beside fp32 master weights (DeepSeek-V3's
     * optimizer): Megatron-Core's precision-aware optimizer, whose flags
     * arguments.py spells so; the master weights keep --main-params-dtype's
     * fp32 default */
    t = flags_of("mixtral-8x7b", "dgx-h100",
                 "{gpus: 64, seq: 4096, global_batch: 256, precision: fp8, fp8_recipe: blockwise, "
                 "optimizer_moments: bf16}",
                 "{tp: 1, pp: 1, dp: 64, ep: 8, micro_batch: 1, dist_opt: true}");
    all_known("mixtral-8x7b", t);
    has(t, "--use-precision-aware-optimizer");
    has(t, "--exp-avg-dtype bf16");
    has(t, "--exp-avg-sq-dtype bf16");
    has(t, "--use-distributed-optimizer");
    lacks(t, "--main-params-dtype");
    free(t);
    /* FP8 dispatch: Megatron-Core's MXFP8 wire, on its ncclep backend with
     * TE's op fuser (transformer_config.py); on Hopper a note says MXFP8 is
     * not there and the plan assumes DeepSeek's FP8 dispatch */
    t = flags_of("deepseek-v3", "b200",
                 "{gpus: 256, seq: 4096, global_batch: 256, precision: fp8, fp8_recipe: mxfp8}",
                 "{tp: 1, pp: 1, dp: 256, ep: 64, micro_batch: 1, dist_opt: true, "
                 "dispatcher: flex, dispatch_fp8: true}");
    all_known("deepseek-v3", t);
    has(t, "--moe-flex-dispatcher-backend ncclep");
    has(t, "--moe-dispatch-fwd-dtype mxfp8");
    has(t, "--moe-combine-bwd-dtype mxfp8");
    has(t, "--use-transformer-engine-op-fuser");
    lacks(t, "# dispatch_fp8");
    free(t);
    t = flags_of("deepseek-v3", "h800",
                 "{gpus: 256, seq: 4096, global_batch: 256, precision: fp8, fp8_recipe: blockwise}",
                 "{tp: 1, pp: 1, dp: 256, ep: 64, micro_batch: 1, dist_opt: true, "
                 "dispatcher: flex, dispatch_fp8: true}");
    if (!strstr(t, "# dispatch_fp8: Megatron-Core's FP8 dispatch is MXFP8, which h800 cannot"))
        fail_msg("no note on h800's missing MXFP8 in:\n%s", t);
    free(t);
    t = flags_of("mixtral-8x7b", "dgx-h100",
                 "{gpus: 64, seq: 4096, global_batch: 256, precision: bf16}",
                 "{tp: 1, pp: 1, dp: 64, ep: 8, micro_batch: 1, dist_opt: true}");
    lacks(t, "--use-precision-aware-optimizer");
    lacks(t, "--moe-dispatch-fwd-dtype");
    lacks(t, "--exp-avg-dtype");
    free(t);

    /* GPT-OSS: the window, sinks, biases and clamped SwiGLU as Megatron-Bridge's
     * GPT-OSS bridge sets them */
    t = flags_of("gpt-oss-120b", "dgx-h100", "{gpus: 64, seq: 4096, global_batch: 512, precision: bf16}",
                 "{tp: 1, pp: 4, dp: 16, ep: 8, micro_batch: 1, dist_opt: true}");
    all_known("gpt-oss-120b", t);
    has(t, "--window-size 127,0");
    has(t, "--window-attn-skip-freq 2");
    has(t, "--softmax-type learnable");
    has(t, "--quick-geglu");
    has(t, "--glu-linear-offset 1.0");
    has(t, "--activation-func-clamp-value 7");
    lacks(t, "--swiglu");
    lacks(t, "--disable-bias-linear");
    free(t);
    t = flags_of("mixtral-8x7b", "dgx-h100", "{gpus: 8, seq: 4096, global_batch: 8, precision: bf16}",
                 "{tp: 1, pp: 1, dp: 8, ep: 8, micro_batch: 1}");
    lacks(t, "--window-size");
    lacks(t, "--softmax-type");
    lacks(t, "--qk-layernorm");
    has(t, "--disable-bias-linear");
    free(t);
    /* Qwen3's QK-norm (Megatron-Bridge's Qwen3 providers set qk_layernorm) */
    t = flags_of("qwen3-235b-a22b", "dgx-h100",
                 "{gpus: 64, seq: 4096, global_batch: 512, precision: bf16}",
                 "{tp: 2, pp: 4, dp: 8, ep: 8, micro_batch: 1, sp: true, dist_opt: true}");
    all_known("qwen3-235b-a22b", t);
    has(t, "--qk-layernorm");
    free(t);
    /* a recipe's settings read from a plan file: Transformer Engine's fused
     * cross entropy, and the interleaved pipeline's p2p synchronous (Megatron
     * overlaps it unless told) or overlapped (its default: no flag) */
    t = flags_of("llama3-70b", "dgx-h100",
                 "{gpus: 64, seq: 8192, global_batch: 128, precision: bf16, te_cross_entropy: true}",
                 "{tp: 4, pp: 8, vpp: 5, dp: 2, micro_batch: 1, sp: true, "
                 "schedule: interleaved-1f1b}");
    all_known("llama3-70b", t);
    has(t, "--cross-entropy-loss-fusion");
    has(t, "--cross-entropy-fusion-impl te");
    has(t, "--no-overlap-p2p-communication");
    free(t);
    t = flags_of("llama3-70b", "dgx-h100", "{gpus: 64, seq: 8192, global_batch: 128, precision: bf16}",
                 "{tp: 4, pp: 8, vpp: 5, dp: 2, micro_batch: 1, sp: true, "
                 "schedule: interleaved-1f1b, p2p_overlap: true}");
    all_known("llama3-70b", t);
    lacks(t, "--no-overlap-p2p-communication");
    lacks(t, "--cross-entropy-loss-fusion");
    free(t);
    /* Megatron-Core's deferred output-layer wgrad, read from a plan file:
     * both flags with a limit, only the first with 0 (every micro-batch,
     * Megatron's default), neither without a pipeline (it refuses pp 1) */
    t = flags_of("llama3-70b", "dgx-h100", "{gpus: 64, seq: 8192, global_batch: 128, precision: bf16}",
                 "{tp: 4, pp: 8, vpp: 5, dp: 2, micro_batch: 1, sp: true, "
                 "schedule: interleaved-1f1b, defer_embedding_wgrad: true, "
                 "wgrad_deferral_limit: 22}");
    all_known("llama3-70b", t);
    has(t, "--defer-embedding-wgrad-compute");
    has(t, "--wgrad-deferral-limit 22");
    free(t);
    t = flags_of("llama3-70b", "dgx-h100", "{gpus: 64, seq: 8192, global_batch: 128, precision: bf16}",
                 "{tp: 4, pp: 8, dp: 2, micro_batch: 1, sp: true, defer_embedding_wgrad: true}");
    has(t, "--defer-embedding-wgrad-compute");
    lacks(t, "--wgrad-deferral-limit");
    free(t);
    t = flags_of("llama3-8b", "dgx-h100", "{gpus: 8, seq: 8192, global_batch: 128, precision: bf16}",
                 "{tp: 1, pp: 1, dp: 8, micro_batch: 1, defer_embedding_wgrad: true}");
    lacks(t, "--defer-embedding-wgrad-compute");
    free(t);
    t = flags_of("llama3-70b", "dgx-h100", "{gpus: 64, seq: 8192, global_batch: 128, precision: bf16}",
                 "{tp: 4, pp: 8, dp: 2, micro_batch: 1, sp: true}");
    lacks(t, "--defer-embedding-wgrad-compute");
    free(t);
    /* a plan that names its attention kernel writes it (Megatron-Core's
     * --attention-backend); auto, the default, writes nothing */
    t = flags_of("llama3-8b", "dgx-h100",
                 "{gpus: 8, seq: 8192, global_batch: 128, precision: bf16, attention_backend: flash}",
                 "{tp: 1, pp: 1, dp: 8, micro_batch: 1}");
    all_known("llama3-8b", t);
    has(t, "--attention-backend flash");
    free(t);
    t = flags_of("llama3-8b", "dgx-h100",
                 "{gpus: 8, seq: 8192, global_batch: 128, precision: bf16, attention_backend: fused}",
                 "{tp: 1, pp: 1, dp: 8, micro_batch: 1}");
    has(t, "--attention-backend fused");
    free(t);
    t = flags_of("llama3-8b", "dgx-h100", "{gpus: 8, seq: 8192, global_batch: 128, precision: bf16}",
                 "{tp: 1, pp: 1, dp: 8, micro_batch: 1}");
    lacks(t, "--attention-backend");
    free(t);
    /* the flex dispatcher and the MoE overlaps, read from a plan file: DeepEP
     * within 8-GPU nodes, HybridEP on an NVL72 domain (Megatron-Core: only
     * hybridep supports multi-node NVLink) */
    t = flags_of("deepseek-v3", "dgx-h100",
                 "{gpus: 2048, seq: 4096, global_batch: 2048, precision: bf16}",
                 "{tp: 1, pp: 1, dp: 2048, ep: 64, etp: 1, micro_batch: 1, "
                 "dist_opt: true, dispatcher: flex, moe_a2a_overlap: true}");
    all_known("deepseek-v3", t);
    has(t, "--moe-token-dispatcher-type flex");
    has(t, "--moe-flex-dispatcher-backend deepep");
    has(t, "--overlap-moe-expert-parallel-comm");
    has(t, "--delay-wgrad-compute");
    lacks(t, "--moe-shared-expert-overlap");
    free(t);
    t = flags_of("deepseek-v3", "gb200-nvl72",
                 "{gpus: 256, seq: 4096, global_batch: 256, precision: bf16}",
                 "{tp: 1, pp: 16, dp: 16, ep: 16, etp: 1, micro_batch: 1, dist_opt: true, "
                 "dispatcher: flex, shared_expert_overlap: true}");
    all_known("deepseek-v3", t);
    has(t, "--moe-flex-dispatcher-backend hybridep");
    has(t, "--moe-shared-expert-overlap");
    lacks(t, "--overlap-moe-expert-parallel-comm");
    lacks(t, "-num-sms");
    free(t);
    /* the flex kernels' SMs, for the backend Megatron-Core picks */
    t = flags_of("deepseek-v3", "gb200-nvl72",
                 "{gpus: 256, seq: 4096, global_batch: 256, precision: bf16}",
                 "{tp: 1, pp: 16, dp: 16, ep: 16, etp: 1, micro_batch: 1, dist_opt: true, "
                 "dispatcher: flex, flex_sms: 32}");
    all_known("deepseek-v3", t);
    has(t, "--moe-hybridep-num-sms 32");
    free(t);
    /* the plan's backend, named in place of the guess (H100: deepep) */
    t = flags_of("deepseek-v3", "dgx-h100",
                 "{gpus: 256, seq: 4096, global_batch: 256, precision: bf16}",
                 "{tp: 1, pp: 16, dp: 16, ep: 16, etp: 1, micro_batch: 1, dist_opt: true, "
                 "dispatcher: flex, flex_backend: hybridep, flex_sms: 32}");
    all_known("deepseek-v3", t);
    has(t, "--moe-flex-dispatcher-backend hybridep");
    has(t, "--moe-hybridep-num-sms 32");
    lacks(t, "deepep");
    free(t);
    t = flags_of("deepseek-v3", "dgx-h100",
                 "{gpus: 256, seq: 4096, global_batch: 256, precision: bf16}",
                 "{tp: 1, pp: 16, dp: 16, ep: 16, etp: 1, micro_batch: 1, dist_opt: true, "
                 "dispatcher: flex}");
    has(t, "--moe-flex-dispatcher-backend deepep");
    free(t);

    t = flags_of("llama3-8b", "dgx-a100", "{gpus: 8, seq: 8192, global_batch: 16, precision: bf16}",
                 "{tp: 2, sp: true, pp: 2, dp: 2, micro_batch: 1, recompute: selective, "
                 "schedule: 1f1b}");
    all_known("llama3-8b", t);
    has(t, "--bf16");
    lacks(t, "--fp8");
    lacks(t, "--num-experts");
    free(t);
}

int main(int argc, char **argv)
{
    load_known(argc > 1 ? argv[1] : "tests/data/megatron/flag_names.txt");
    const struct CMUnitTest tests[] = {cmocka_unit_test(names)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(known);
    return rc;
}
