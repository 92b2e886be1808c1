/* megatron.c — Megatron-LM (Megatron-Core) arguments of a plan.
 *
 * Flags and their meaning as in megatron/training/arguments.py:
 * --tensor-model-parallel-size, --pipeline-model-parallel-size,
 * --context-parallel-size, --sequence-parallel,
 * --num-layers-per-virtual-pipeline-stage, --micro-batch-size,
 * --global-batch-size, --recompute-granularity selective|full,
 * --recompute-method uniform|block, --recompute-num-layers,
 * --use-distributed-optimizer, --overlap-grad-reduce, --overlap-param-gather,
 * --tp-comm-overlap, and for uneven pipelines
 * --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers
 * (the remaining layers split evenly over the middle stages). */
#include "planner/megatron.h"

#include <stdbool.h>
#include <string.h>

static int64_t blocks_in(const mp_stage_range *r, int64_t L)
{
    int64_t b = r->begin < 1 ? 1 : r->begin;
    int64_t e = r->end > L + 1 ? L + 1 : r->end;
    return e > b ? e - b : 0;
}

void mp_megatron_args(const mp_config *c, const mp_plan *plan, mp_buf *dest)
{
    /* comments first: a '#' line inside a backslash-continued command would end it */
    mp_buf notes, flags;
    mp_buf_init(&notes);
    mp_buf_init(&flags);
    mp_buf *out = &flags;
    const mp_parallel *p = &c->parallel;
    int64_t L = c->model.layers;
    int64_t v = p->vpp > 1 ? p->vpp : 1;
    int64_t K = p->pp * v;
    bool staged = plan && plan->n_stages == K && K > 0;

    mp_buf_printf(out, "--tensor-model-parallel-size %lld \\\n--pipeline-model-parallel-size %lld \\\n",
                  (long long)p->tp, (long long)p->pp);
    if (p->cp > 1) mp_buf_printf(out, "--context-parallel-size %lld \\\n", (long long)p->cp);
    if (p->sp) mp_buf_puts(out, "--sequence-parallel \\\n");
    if (v > 1)
        mp_buf_printf(out, "--num-layers-per-virtual-pipeline-stage %lld \\\n",
                      (long long)(L / (p->pp * v)));
    mp_buf_printf(out, "--micro-batch-size %lld \\\n--global-batch-size %lld \\\n"
                       "--seq-length %lld \\\n",
                  (long long)p->micro_batch, (long long)c->training.global_batch,
                  (long long)c->training.seq);
    if (c->training.precision == MP_DTYPE_FP16) mp_buf_puts(out, "--fp16 \\\n");
    if (c->training.precision == MP_DTYPE_BF16) mp_buf_puts(out, "--bf16 \\\n");
    mp_megatron_moe_args(c, out);

    /* uneven pipeline: first and last stage layer counts */
    const char *note = NULL;
    if (staged && v == 1 && p->pp > 1) {
        int64_t first = blocks_in(&plan->stages[0], L), last = blocks_in(&plan->stages[K - 1], L);
        bool even = true, middle_even = true;
        int64_t mid0 = K > 2 ? blocks_in(&plan->stages[1], L) : 0;
        for (int64_t k = 0; k < K; k++) {
            int64_t n = blocks_in(&plan->stages[k], L);
            if (n != L / K) even = false;
            if (k > 0 && k < K - 1 && n != mid0) middle_even = false;
        }
        if (!even) {
            if (first != mid0 || K == 2)
                mp_buf_printf(out, "--decoder-first-pipeline-num-layers %lld \\\n", (long long)first);
            if (last != mid0 || K == 2)
                mp_buf_printf(out, "--decoder-last-pipeline-num-layers %lld \\\n", (long long)last);
            if (!middle_even)
                note = "# the plan's middle stages are uneven; Megatron splits the middle evenly\n";
        }
    } else if (staged && v > 1) {
        for (int64_t k = 0; k < K; k++)
            if (blocks_in(&plan->stages[k], L) != L / K) {
                note = "# the plan's virtual stages are uneven; Megatron interleaves even chunks\n";
                break;
            }
    }

    /* recompute: uniform, or full on the first N blocks of each stage (method block) */
    int count[MP_RECOMPUTE_COUNT] = {0};
    int64_t full_max = 0;
    if (staged && plan->has_layer_recompute) {
        for (int64_t k = 0; k < K; k++) {
            int64_t f = 0;
            for (int64_t i = plan->stages[k].begin; i < plan->stages[k].end; i++) {
                if (i < 1 || i > L) continue;
                count[plan->layer_recompute[i]]++;
                if (plan->layer_recompute[i] == MP_RECOMPUTE_FULL) f++;
            }
            if (f > full_max) full_max = f;
        }
    } else {
        count[p->recompute] = (int)L;
    }
    if (count[MP_RECOMPUTE_FULL] == L) {
        mp_buf_puts(out, "--recompute-granularity full \\\n--recompute-method uniform \\\n"
                         "--recompute-num-layers 1 \\\n");
    } else if (count[MP_RECOMPUTE_FULL] > 0) {
        mp_buf_printf(out, "--recompute-granularity full \\\n--recompute-method block \\\n"
                           "--recompute-num-layers %lld \\\n", (long long)full_max);
        if (count[MP_RECOMPUTE_SELECTIVE] > 0)
            mp_buf_puts(&notes, "# the plan recomputes the other layers selectively; Megatron has one "
                             "granularity, these flags recompute those in full or not at all\n");
        else if (count[MP_RECOMPUTE_FULL] != full_max * K)
            mp_buf_puts(&notes, "# the plan recomputes a different number of layers per stage; "
                             "--recompute-num-layers takes the largest\n");
    } else if (count[MP_RECOMPUTE_SELECTIVE] > 0) {
        mp_buf_puts(out, "--recompute-granularity selective \\\n");
        if (count[MP_RECOMPUTE_SELECTIVE] != L)
            mp_buf_puts(&notes, "# the plan recomputes only some layers selectively; Megatron's "
                             "selective recompute covers all\n");
    }
    if (p->dist_opt) mp_buf_puts(out, "--use-distributed-optimizer \\\n");
    if (p->dp_overlap) mp_buf_puts(out, "--overlap-grad-reduce \\\n");
    if (p->dp_overlap && p->dist_opt) mp_buf_puts(out, "--overlap-param-gather \\\n");
    if (p->tp_overlap) mp_buf_puts(out, "--tp-comm-overlap \\\n");
    if (p->schedule == MP_SCHED_ZBH1)
        mp_buf_puts(&notes, "# schedule zb-h1: Megatron-LM has no flag for it; the plan assumes a "
                         "zero-bubble (ZB-H1) pipeline runtime\n");
    if (p->schedule == MP_SCHED_GPIPE)
        mp_buf_puts(&notes, "# schedule gpipe: Megatron-LM runs 1F1B; the plan assumes GPipe\n");
    if (note) mp_buf_puts(&notes, note);
    mp_buf_printf(out, "--num-layers %lld\n", (long long)L);
    if (notes.len) mp_buf_append(dest, notes.data, notes.len);
    if (flags.len) mp_buf_append(dest, flags.data, flags.len);
    if (notes.oom || flags.oom) dest->oom = true;
    mp_buf_free(&notes);
    mp_buf_free(&flags);
}
