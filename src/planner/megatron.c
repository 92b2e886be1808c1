/* megatron.c — Megatron-LM (Megatron-Core) arguments of a plan: the model's
 * shape and the plan's parallelism, as megatron/training/arguments.py and
 * TransformerConfig name them (checked against Megatron-LM d98e8a6,
 * megatron-core 0.20, by tools/megatron-check.sh; docs/megatron-check.md).
 *
 * Model: --num-layers (T5: --encoder-num-layers, --decoder-num-layers),
 * --hidden-size, --num-attention-heads, --kv-channels, --ffn-hidden-size,
 * --group-query-attention --num-query-groups, --swiglu, --normalization,
 * --norm-epsilon (always: the model's, whatever Megatron's default),
 * --position-embedding-type (rope, relative with its buckets and distance),
 * --max-position-embeddings, --untie-embeddings-and-output-weights,
 * --disable-bias-linear, --vocab-size, --seq-length (T5: --encoder-seq-length,
 * --decoder-seq-length). Parallelism: --tensor/pipeline-model-parallel-size,
 * --context-parallel-size, --sequence-parallel, virtual stages by
 * --num-layers-per-virtual-pipeline-stage when even, by
 * --decoder-first/last-pipeline-num-layers with
 * --num-virtual-stages-per-pipeline-rank for their split
 * (mp_vpp_flag_split), else the exact split by
 * --pipeline-model-parallel-layout ("Et*20|t*20|t*21|t*19L": stages split by
 * '|', virtual stage k = chunk * pp + rank, E embedding, t a block, L loss),
 * batches, precision, recompute (below), the distributed optimizer and the
 * overlaps. CUDA_DEVICE_MAX_CONNECTIONS=1, which Megatron needs with tp > 1
 * or cp > 1 (its TP/CP communication must be issued in order), comes first as
 * an `export` line. What Megatron cannot say comes out as '#' comments first. */
#include "planner/megatron.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/units.h"

static int64_t blocks_in(const mp_stage_range *r, int64_t L)
{
    int64_t b = r->begin < 1 ? 1 : r->begin;
    int64_t e = r->end > L + 1 ? L + 1 : r->end;
    return e > b ? e - b : 0;
}

/* The (virtual) stages the flags describe: the plan's, or Megatron's even split. */
static mp_stage_range *stages_of(const mp_config *c, const mp_plan *plan, int64_t K)
{
    mp_stage_range *st = calloc((size_t)(K > 0 ? K : 1), sizeof *st);
    if (!st)
        return NULL;
    if (plan && plan->n_stages == K) {
        memcpy(st, plan->stages, (size_t)K * sizeof *st);
        return st;
    }
    /* the split every part uses (core/plan.h): the explicit layout, else
     * even, Megatron's first/last-stage split when K does not divide the
     * layers, T5's at its split rank */
    mp_config_stages(c, K, st);
    return st;
}

/* Megatron's recompute settings: none, selective (core attention: the
 * probabilities megaplan's selective drops) on every layer, full on every
 * layer (method uniform, 1 layer a unit), or full on the first `block`
 * layers of every (virtual) stage and none on the rest (method block). */
typedef enum { RC_NONE, RC_SELECTIVE, RC_UNIFORM, RC_BLOCK } rc_kind;
typedef struct rc_choice {
    rc_kind kind;
    int64_t block;
} rc_choice;

/* The recompute of block i (1..L) under choice ch. */
static int rc_mode(rc_choice ch, const mp_stage_range *st, int64_t K, int64_t L, int64_t i)
{
    switch (ch.kind) {
    case RC_NONE: return MP_RECOMPUTE_NONE;
    case RC_SELECTIVE: return MP_RECOMPUTE_SELECTIVE;
    case RC_UNIFORM: return MP_RECOMPUTE_FULL;
    case RC_BLOCK:
        for (int64_t k = 0; k < K; k++) {
            int64_t b = st[k].begin < 1 ? 1 : st[k].begin;
            if (i >= b && i < b + blocks_in(&st[k], L))
                return i - b < ch.block ? MP_RECOMPUTE_FULL : MP_RECOMPUTE_NONE;
        }
    }
    return MP_RECOMPUTE_NONE;
}

static int plan_mode(const mp_config *c, const mp_plan *plan, int64_t i)
{
    return plan && plan->has_layer_recompute ? plan->layer_recompute[i]
                                             : (int)c->parallel.recompute;
}

/* The choice that says the plan exactly, or else the one that recomputes at
 * least what the plan does on every layer (so that it still fits) with the
 * fewest layers different; *differ counts them. */
static rc_choice choose_recompute(const mp_config *c, const mp_plan *plan,
                                  const mp_stage_range *st, int64_t K, int64_t *differ)
{
    int64_t L = c->model.layers, most = 0;
    for (int64_t k = 0; k < K; k++)
        most = blocks_in(&st[k], L) > most ? blocks_in(&st[k], L) : most;
    rc_choice best = {RC_UNIFORM, 0};
    int64_t best_diff = -1;
    for (int64_t n = -3; n <= most; n++) {
        rc_choice ch = n == -3 ? (rc_choice){RC_NONE, 0}
                     : n == -2 ? (rc_choice){RC_SELECTIVE, 0}
                     : n == -1 ? (rc_choice){RC_UNIFORM, 0}
                               : (rc_choice){RC_BLOCK, n};
        if (ch.kind == RC_BLOCK && n == 0)
            continue;
        int64_t diff = 0;
        bool covers = true;
        for (int64_t i = 1; i <= L; i++) {
            int want = plan_mode(c, plan, i), got = rc_mode(ch, st, K, L, i);
            diff += want != got;
            covers &= got >= want; /* none < selective < full in memory saved */
        }
        if (covers && (best_diff < 0 || diff < best_diff)) {
            best = ch;
            best_diff = diff;
        }
    }
    *differ = best_diff;
    return best;
}

bool mp_megatron_recompute_exact(const mp_config *c, const mp_plan *plan)
{
    int64_t K = c->parallel.pp * (c->parallel.vpp > 1 ? c->parallel.vpp : 1), differ = 0;
    mp_stage_range *st = stages_of(c, plan, K);
    if (!st)
        return false;
    choose_recompute(c, plan, st, K, &differ);
    free(st);
    return differ == 0;
}

static const char *mode_name(int m)
{
    return m == MP_RECOMPUTE_FULL ? "full" : m == MP_RECOMPUTE_SELECTIVE ? "selective" : "none";
}

static void recompute_flags(const mp_config *c, const mp_plan *plan, const mp_stage_range *st,
                            int64_t K, mp_buf *out, mp_buf *notes)
{
    int64_t L = c->model.layers, differ = 0;
    rc_choice ch = choose_recompute(c, plan, st, K, &differ);
    switch (ch.kind) {
    case RC_NONE: break;
    case RC_SELECTIVE: {
        /* a list option (megatron/training/argument_utils.py: nargs "+") */
        uint32_t mask = mp_recompute_modules_of(&c->parallel, MP_RECOMPUTE_SELECTIVE);
        mp_buf_puts(out, "--recompute-granularity selective \\\n--recompute-modules");
        for (int k = 0; k < MP_RCM_COUNT; k++)
            if (mask & (1u << k))
                mp_buf_printf(out, " %s", mp_recompute_module_name((mp_recompute_module)k));
        mp_buf_puts(out, " \\\n");
        break;
    }
    case RC_UNIFORM:
        mp_buf_puts(out, "--recompute-granularity full \\\n--recompute-method uniform \\\n"
                         "--recompute-num-layers 1 \\\n");
        break;
    case RC_BLOCK:
        mp_buf_printf(out, "--recompute-granularity full \\\n--recompute-method block \\\n"
                           "--recompute-num-layers %lld \\\n", (long long)ch.block);
        break;
    }
    if (differ > 0) {
        int64_t first = 0;
        for (int64_t i = 1; i <= L && !first; i++)
            if (plan_mode(c, plan, i) != rc_mode(ch, st, K, L, i))
                first = i;
        mp_buf_printf(notes,
                      "# recompute differs on %lld of %lld layers: Megatron has one granularity, "
                      "on all layers or (full) the first N of every stage; these flags recompute "
                      "at least what the plan does (first: layer %lld, plan %s, flags %s)\n",
                      (long long)differ, (long long)L, (long long)first,
                      mode_name(plan_mode(c, plan, first)), mode_name(rc_mode(ch, st, K, L, first)));
    }
}

/* "Et*20|t*20|t*21|t*19L": virtual stage k's items, stages in order k; a
 * model's MTP modules ('m', as many as it has: PipelineParallelLayerLayout
 * refuses a layout without them) with the head on the last stage, where the
 * cost model places them. */
static void layout_flag(const mp_stage_range *st, int64_t K, int64_t L, int64_t mtp, mp_buf *out)
{
    mp_buf_puts(out, "--pipeline-model-parallel-layout \"");
    for (int64_t k = 0; k < K; k++) {
        int64_t n = blocks_in(&st[k], L);
        mp_buf_printf(out, "%s%s", k ? "|" : "", st[k].begin == 0 ? "E" : "");
        if (n == 1)
            mp_buf_puts(out, "t");
        else if (n > 1)
            mp_buf_printf(out, "t*%lld", (long long)n);
        if (st[k].end == L + 2) {
            for (int64_t j = 0; j < mtp; j++)
                mp_buf_puts(out, "m");
            mp_buf_puts(out, "L");
        }
    }
    mp_buf_puts(out, "\" \\\n");
}

static void model_flags(const mp_config *c, mp_buf *out, mp_buf *notes)
{
    const mp_model *m = &c->model;
    bool t5 = m->arch == MP_ARCH_T5;
    if (t5) {
        mp_buf_printf(out, "--encoder-num-layers %lld \\\n--decoder-num-layers %lld \\\n",
                      (long long)m->encoder_layers, (long long)m->decoder_layers);
        if (m->encoder_layers != m->decoder_layers)
            mp_buf_printf(notes, "# t5: Megatron-LM's T5 builds its decoder with "
                                 "--encoder-num-layers (%lld) layers, not %lld\n",
                          (long long)m->encoder_layers, (long long)m->decoder_layers);
    } else {
        mp_buf_printf(out, "--num-layers %lld \\\n", (long long)m->layers);
    }
    int64_t hd = m->head_dim > 0 ? m->head_dim : m->hidden / m->heads;
    mp_buf_printf(out, "--hidden-size %lld \\\n--num-attention-heads %lld \\\n"
                       "--kv-channels %lld \\\n--ffn-hidden-size %lld \\\n",
                  (long long)m->hidden, (long long)m->heads, (long long)hd,
                  (long long)(m->ffn_hidden > 0 ? m->ffn_hidden : 4 * m->hidden));
    if (m->kv_heads > 0 && m->kv_heads < m->heads)
        mp_buf_printf(out, "--group-query-attention \\\n--num-query-groups %lld \\\n",
                      (long long)m->kv_heads);
    if (m->activation == MP_ACT_SWIGLU && m->glu_limit > 0.0)
        /* GPT-OSS's clamped SwiGLU: x sigmoid(1.702 x) (u + 1), clamped
         * (Megatron-Bridge's GPT-OSS bridge sets the same three) */
        mp_buf_printf(out, "--quick-geglu \\\n--glu-linear-offset 1.0 \\\n"
                           "--activation-func-clamp-value %g \\\n", m->glu_limit);
    else if (m->activation == MP_ACT_SWIGLU)
        mp_buf_puts(out, "--swiglu \\\n");
    else if (m->activation == MP_ACT_GELU) {
        /* GELU's tanh form; no flag: the exact (erf) GELU, Megatron's default
         * (TransformerConfig.activation_func F.gelu). At the commit
         * tools/megatron-check.sh pins, arguments.py still parses
         * --openai-gelu but nothing reads it (the legacy models that did
         * were removed), so the export says so */
        mp_buf_puts(out, "--openai-gelu \\\n");
        mp_buf_puts(notes, "# activation gelu (tanh form): Megatron-Core no longer reads "
                           "--openai-gelu (only its legacy models did) and runs the exact "
                           "(erf) GELU\n");
    }
    else if (m->activation == MP_ACT_RELU)
        mp_buf_puts(notes, "# activation relu: Megatron-LM has no flag for ReLU (its MLP runs "
                           "GeLU; --squared-relu is another function)\n");
    if (m->norm == MP_NORM_RMSNORM)
        mp_buf_puts(out, "--normalization RMSNorm \\\n");
    /* TransformerConfig.layernorm_epsilon: every norm Megatron builds (the
     * blocks', the final one, QK-norm's, MLA's latent ones) */
    char eps[32];
    mp_format_double(m->norm_eps > 0 ? m->norm_eps : mp_model_default_norm_eps(m->arch), eps,
                     sizeof eps);
    mp_buf_printf(out, "--norm-epsilon %s \\\n", eps);
    /* dropout: Megatron-Core's TransformerConfig defaults hidden_dropout and
     * attention_dropout to 0.1 (and the embedding's dropout is the hidden
     * one), so a model without (LLaMA-style, or a run that turns it off)
     * must say 0 */
    char hdrop[32], adrop[32];
    mp_format_double(mp_model_hidden_dropout(m), hdrop, sizeof hdrop);
    mp_format_double(mp_model_attention_dropout(m), adrop, sizeof adrop);
    mp_buf_printf(out, "--hidden-dropout %s \\\n--attention-dropout %s \\\n", hdrop, adrop);
    if (m->position == MP_POS_ROPE)
        mp_buf_puts(out, "--position-embedding-type rope \\\n");
    else if (m->position == MP_POS_RELATIVE)
        mp_buf_puts(out, "--position-embedding-type relative \\\n"
                         "--relative-attention-num-buckets 32 \\\n"
                         "--relative-attention-max-distance 128 \\\n");
    int64_t seq = c->training.seq > 0 ? c->training.seq : m->seq;
    int64_t maxpos = seq > m->seq ? seq : m->seq;
    if (t5 && m->decoder_seq > maxpos)
        maxpos = m->decoder_seq;
    mp_buf_printf(out, "--max-position-embeddings %lld \\\n", (long long)maxpos);
    if (!m->tied_embeddings)
        mp_buf_puts(out, "--untie-embeddings-and-output-weights \\\n");
    /* LLaMA's and T5's linear layers have no biases (megaplan's cost model and exec),
     * unless the model says so (GPT-OSS) */
    if ((m->arch == MP_ARCH_LLAMA && !m->linear_bias) || t5)
        mp_buf_puts(out, "--disable-bias-linear \\\n");
    if (m->attn.window > 0) {
        /* Megatron's window is (left, right) keys besides the query itself */
        mp_buf_printf(out, "--window-size %lld,0 \\\n", (long long)(m->attn.window - 1));
        if (m->attn.window_skip_freq > 0)
            mp_buf_printf(out, "--window-attn-skip-freq %lld \\\n",
                          (long long)m->attn.window_skip_freq);
    }
    if (m->attn.sinks)
        mp_buf_puts(out, "--softmax-type learnable \\\n");
    if (m->attn.qk_norm) /* Qwen3: RMSNorm on each query and key head (the model's norm) */
        mp_buf_puts(out, "--qk-layernorm \\\n");
    mp_buf_printf(out, "--vocab-size %lld \\\n", (long long)m->vocab);
    if (t5)
        mp_buf_printf(out, "--encoder-seq-length %lld \\\n--decoder-seq-length %lld \\\n",
                      (long long)seq, (long long)m->decoder_seq);
    else
        mp_buf_printf(out, "--seq-length %lld \\\n", (long long)seq);
}

static void pipeline_flags(const mp_config *c, const mp_stage_range *st, int64_t K, mp_buf *out,
                           mp_buf *notes)
{
    const mp_parallel *p = &c->parallel;
    int64_t L = c->model.layers, v = p->vpp > 1 ? p->vpp : 1;
    if (c->model.arch == MP_ARCH_T5) {
        if (p->pp > 1)
            mp_buf_printf(notes, "# t5: Megatron-LM's T5 (examples/t5/pretrain_t5.py) refuses "
                                 "pipeline parallelism; the plan's pp %lld does not run there\n",
                          (long long)p->pp);
        return;
    }
    /* the split's form: what Megatron's flags can say of it (core/plan.h) */
    mp_split_form f = mp_split_form_of(c, st, K);
    bool acct = p->account_for_embedding || p->account_for_loss;
    if (K == 1 && acct) /* transformer_block.py: L + e + l units on the one stage, less e and l */
        mp_buf_puts(notes, "# account_for_embedding/loss: with pp 1 there is no split; Megatron "
                           "accepts the flags and builds every layer on the one stage, so they "
                           "are left out\n");
    if (K > 1 && p->pipeline_layout[0]) /* the user's layout, as written (st is its split) */
        mp_buf_printf(out, "--pipeline-model-parallel-layout \"%s\" \\\n", p->pipeline_layout);
    else if (K > 1 && (acct || (!mp_parallel_split_given(p) && f.kind == MP_SPLIT_ACCOUNT))) {
        /* the embedding and/or the loss counted as a layer: as the plan
         * gives them, else as its split is (transformer_block.py) */
        bool e = acct ? p->account_for_embedding : f.embedding;
        bool l = acct ? p->account_for_loss : f.loss;
        if (e)
            mp_buf_puts(out, "--account-for-embedding-in-pipeline-split \\\n");
        if (l)
            mp_buf_puts(out, "--account-for-loss-in-pipeline-split \\\n");
        if (v > 1)
            mp_buf_printf(out, "--num-virtual-stages-per-pipeline-rank %lld \\\n",
                          (long long)v);
    } else if (K > 1 && (mp_parallel_split_given(p) || f.kind == MP_SPLIT_FLAGS)) {
        /* the first/last-stage layers: the user's as given (st is their
         * split), else the ones the split has; with virtual stages every
         * chunk a vpp-th of its rank's (arguments.py: then vpp by
         * --num-virtual-stages-per-pipeline-rank, which it requires with them) */
        int64_t F = mp_parallel_split_given(p) ? p->first_stage_layers : f.first;
        int64_t Lz = mp_parallel_split_given(p) ? p->last_stage_layers : f.last;
        if (F > 0)
            mp_buf_printf(out, "--decoder-first-pipeline-num-layers %lld \\\n", (long long)F);
        if (Lz > 0)
            mp_buf_printf(out, "--decoder-last-pipeline-num-layers %lld \\\n", (long long)Lz);
        if (v > 1)
            mp_buf_printf(out, "--num-virtual-stages-per-pipeline-rank %lld \\\n",
                          (long long)v);
    } else if (K > 1 && f.kind != MP_SPLIT_EVEN)
        layout_flag(st, K, L, c->model.mtp_layers > 0 ? c->model.mtp_layers : 0, out);
    else if (v > 1)
        mp_buf_printf(out, "--num-layers-per-virtual-pipeline-stage %lld \\\n",
                      (long long)(L / K));
}

mp_status mp_megatron_can_run(const mp_config *c, mp_error *err)
{
    /* Megatron-LM (training/argument_utils.py) gates its MLP only for
     * --swiglu (F.silu) and --quick-geglu (quick_gelu); activation_func and
     * gated_linear_unit have no flag of their own (arguments.py lists them
     * among the config fields given no CLI argument) */
    mp_activation a = c->model.activation;
    if (a == MP_ACT_GEGLU || a == MP_ACT_GEGLU_ERF)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.activation",
                            "%s: Megatron-LM has no flag for a gated GELU MLP (--quick-geglu "
                            "gates with x sigmoid(1.702 x), another function): no Megatron-LM "
                            "flags for this model", mp_activation_name(a));
    /* NeMo AutoModel's FakeBalancedGate sends each token to top_k consecutive
     * experts without scores; Megatron's --moe-router-force-load-balancing
     * scores random logits instead, another dispatch, so no flag says it */
    if (c->model.moe.fake_balanced_gate)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.moe.fake_balanced_gate",
                            "NeMo AutoModel's benchmark gate has no Megatron-LM flag "
                            "(--moe-router-force-load-balancing routes otherwise): leave it out");
    return MP_OK;
}

void mp_megatron_args(const mp_config *c, const mp_plan *plan, mp_buf *dest)
{
    /* comments first: a '#' line inside a backslash-continued command would end it */
    mp_buf notes, flags;
    mp_buf_init(&notes);
    mp_buf_init(&flags);
    mp_buf *out = &flags;
    const mp_parallel *p = &c->parallel;
    int64_t K = p->pp * (p->vpp > 1 ? p->vpp : 1);
    mp_stage_range *st = stages_of(c, plan, K);
    if (!st) {
        dest->oom = true;
        return;
    }
    model_flags(c, out, &notes);
    mp_buf_printf(out, "--tensor-model-parallel-size %lld \\\n--pipeline-model-parallel-size %lld \\\n",
                  (long long)p->tp, (long long)p->pp);
    if (p->cp > 1) mp_buf_printf(out, "--context-parallel-size %lld \\\n", (long long)p->cp);
    /* the ring (p2p) is Megatron-Core's default: named only when another */
    if (p->cp > 1 && p->cp_comm_type != MP_CP_P2P)
        mp_buf_printf(out, "--cp-comm-type %s \\\n", mp_cp_comm_name(p->cp_comm_type));
    if (p->sp) mp_buf_puts(out, "--sequence-parallel \\\n");
    pipeline_flags(c, st, K, out, &notes);
    mp_buf_printf(out, "--micro-batch-size %lld \\\n--global-batch-size %lld \\\n",
                  (long long)p->micro_batch, (long long)c->training.global_batch);
    if (c->training.precision == MP_DTYPE_FP16) mp_buf_puts(out, "--fp16 \\\n");
    if (c->training.precision == MP_DTYPE_BF16 || c->training.precision == MP_DTYPE_FP8)
        mp_buf_puts(out, "--bf16 \\\n");
    if (c->training.precision == MP_DTYPE_FP8)
        /* Transformer Engine's FP8 GEMMs on bf16 training: E4M3 forward, E5M2
         * gradients (TransformerConfig.fp8 and fp8_recipe, megatron-core 0.20) */
        mp_buf_printf(out, "--fp8-format hybrid \\\n--fp8-recipe %s \\\n",
                      mp_fp8_recipe_name(c->training.fp8_recipe));
    if (c->training.fp8_param_gather) mp_buf_puts(out, "--fp8-param-gather \\\n");
    if (c->training.grad_reduce_bf16) mp_buf_puts(out, "--grad-reduce-in-bf16 \\\n");
    if (c->training.te_cross_entropy)
        mp_buf_puts(out, "--cross-entropy-loss-fusion \\\n--cross-entropy-fusion-impl te \\\n");
    if (c->training.native_cross_entropy)
        mp_buf_puts(out,
                    "--cross-entropy-loss-fusion \\\n--cross-entropy-fusion-impl native \\\n");
    mp_megatron_moe_args(c, out);
    recompute_flags(c, plan, st, K, out, &notes);
    if (p->dist_opt) mp_buf_puts(out, "--use-distributed-optimizer \\\n");
    if (c->training.optimizer_moments != MP_DTYPE_FP32) {
        /* Megatron-Core's precision-aware optimizer (arguments.py; the
         * master weights stay fp32, --main-params-dtype's default) */
        const char *d = mp_dtype_name(c->training.optimizer_moments);
        mp_buf_printf(out, "--use-precision-aware-optimizer \\\n--exp-avg-dtype %s \\\n"
                           "--exp-avg-sq-dtype %s \\\n", d, d);
    }
    if (p->dp_overlap) mp_buf_puts(out, "--overlap-grad-reduce \\\n");
    if (p->dp_overlap && p->dist_opt && !p->param_gather_sync)
        mp_buf_puts(out, "--overlap-param-gather \\\n");
    if (p->overlap_param_gather_with_optimizer_step)
        mp_buf_puts(out, "--overlap-param-gather-with-optimizer-step \\\n");
    if (p->ddp_bucket_size > 0)
        mp_buf_printf(out, "--ddp-bucket-size %lld \\\n", (long long)p->ddp_bucket_size);
    if (p->tp_overlap) mp_buf_puts(out, "--tp-comm-overlap \\\n");
    /* Megatron-LM overlaps the interleaved schedule's p2p by default
     * (arguments.py: --no-overlap-p2p-communication, store_false); a plan
     * estimated with synchronous transfers asks for them */
    if (p->pp > 2 && p->vpp > 1 && p->schedule == MP_SCHED_INTERLEAVED && !p->p2p_overlap)
        mp_buf_puts(out, "--no-overlap-p2p-communication \\\n");
    /* arguments.py: interleaving without the overlap needs pp > 2 (two chunks'
     * sends and receives between the same two ranks in one batch) */
    if (p->pp == 2 && p->vpp > 1 && p->schedule == MP_SCHED_INTERLEAVED && !p->p2p_overlap)
        mp_buf_puts(&notes, "# pp 2 with virtual stages: Megatron-LM overlaps the pipeline's "
                            "p2p there (it refuses --no-overlap-p2p-communication below pp 3); "
                            "the plan was estimated with synchronous transfers (--p2p-overlap "
                            "on estimates what runs)\n");
    /* Megatron-Core's deferred output-layer wgrad (model_parallel_config.py:
     * it refuses it without a pipeline, and needs the gradient accumulation
     * fusion, Megatron-LM's default) */
    if (p->defer_embedding_wgrad && p->pp > 1) {
        mp_buf_puts(out, "--defer-embedding-wgrad-compute \\\n");
        if (p->wgrad_deferral_limit > 0)
            mp_buf_printf(out, "--wgrad-deferral-limit %lld \\\n",
                          (long long)p->wgrad_deferral_limit);
    }
    if (p->cuda_graph_scope) {
        /* Transformer Engine's per-layer capture (make_graphed_callables);
         * graphs need TE's RNG tracker (arguments.py, --te-rng-tracker) */
        mp_buf_puts(out, "--cuda-graph-impl transformer_engine \\\n--te-rng-tracker \\\n"
                         "--cuda-graph-scope");
        for (int k = 0; k < MP_CGS_COUNT; k++)
            if (p->cuda_graph_scope & (1u << k))
                mp_buf_printf(out, " %s", mp_cuda_graph_scope_name((mp_cuda_graph_scope)k));
        mp_buf_puts(out, " \\\n");
    }
    /* Megatron-Core's AttnBackend names (transformer/enums.py: flash, fused,
     * unfused, local, auto); auto is its default and leaves the choice to
     * Transformer Engine, so only a plan that names a kernel writes it */
    if (c->training.attention_backend != MP_ATTN_AUTO)
        mp_buf_printf(out, "--attention-backend %s \\\n",
                      mp_attn_backend_name(c->training.attention_backend));
    if (p->schedule == MP_SCHED_ZBH1)
        mp_buf_puts(&notes, "# schedule zb-h1: Megatron-LM has no flag for it; the plan assumes a "
                         "zero-bubble (ZB-H1) pipeline runtime\n");
    if (mp_schedule_is_v(p->schedule))
        mp_buf_printf(&notes, "# schedule %s: Megatron-LM has no flag for it; the plan assumes a "
                              "runtime with the V placement (rank r: stages r and 2pp-1-r), e.g. "
                              "%s\n",
                      mp_schedule_name(p->schedule),
                      p->schedule == MP_SCHED_ZBV ? "sail-sg/zero-bubble-pipeline-parallelism"
                                                  : "deepseek-ai/DualPipe");
    if (p->schedule == MP_SCHED_DUALPIPE)
        mp_buf_puts(&notes, "# schedule dualpipe: Megatron-LM has no flag for it; the plan assumes "
                            "a bidirectional runtime holding two copies of the stages (rank r: "
                            "stage r forward, pp-1-r reverse), e.g. deepseek-ai/DualPipe\n");
    if (p->schedule == MP_SCHED_GPIPE)
        mp_buf_puts(&notes, "# schedule gpipe: Megatron-LM runs 1F1B; the plan assumes GPipe\n");
    if (p->dispatch_fp8 && !c->hw.mxfp8)
        mp_buf_printf(&notes, "# dispatch_fp8: Megatron-Core's FP8 dispatch is MXFP8, which %s "
                              "cannot quantize (Blackwell only); the plan assumes DeepSeek's FP8 "
                              "dispatch (1x128 tiles, DeepEP), the same bytes\n",
                      c->hw.name);
    if (c->training.fp8_act_cache == MP_F8AC_SWIGLU_INPUT)
        mp_buf_puts(&notes, "# fp8_act_cache swiglu_input: Megatron-Core's "
                            "TransformerConfig.activation_func_fp8_input_store = True, which "
                            "has no command-line argument (arguments.py leaves it out): set it "
                            "in the model provider\n");
    if (c->training.fp8_act_cache == MP_F8AC_DEEPSEEK)
        mp_buf_puts(&notes, "# fp8_act_cache deepseek: Megatron-LM has no flag for it; the plan "
                            "assumes DeepSeek-V3's FP8 cache of the MoE SwiGLU inputs (1x128 "
                            "tiles, kept under moe_act's recompute) and its E5M6 attention "
                            "output (report section 3.3.3); "
                            "Megatron-Core's nearest, activation_func_fp8_input_store, is "
                            "dropped by the moe_act checkpoint\n");
    /* the last flag ends the command: drop its continuation */
    if (flags.len >= 3 && !strcmp(flags.data + flags.len - 3, " \\\n")) {
        flags.len -= 3;
        flags.data[flags.len] = 0;
        mp_buf_puts(&flags, "\n");
    }
    if (notes.len) mp_buf_append(dest, notes.data, notes.len);
    if (p->tp > 1 || p->cp > 1) mp_buf_puts(dest, "export CUDA_DEVICE_MAX_CONNECTIONS=1\n");
    if (flags.len) mp_buf_append(dest, flags.data, flags.len);
    if (notes.oom || flags.oom) dest->oom = true;
    mp_buf_free(&notes);
    mp_buf_free(&flags);
    free(st);
}
