/* ref_run.c — the check's reference run (ref_run.h). */
#include "exec/ref_run.h"

#include <stdlib.h>
#include <string.h>

static mp_status no_memory(mp_error *err)
{
    return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the check");
}

/* The fixture's gradients, weights after the step and logits (from
 * micro-batch mb on), in the whole model's layout. */
static mp_status fixture_load(mp_ref_run *r, const mp_gpt_dims *rd, int mb, mp_error *err)
{
    size_t n = r->lay.total, Sfull = (size_t)rd->seq * (size_t)rd->micro_batch;
    r->fx_grad = malloc(n * sizeof(float));
    r->fx_after = malloc(n * sizeof(float));
    /* zeros past the rows the fixture has (T5: the decoder's, fewer than seq) */
    r->fx_logits = calloc(Sfull * (size_t)rd->vocab, sizeof(float));
    if (!r->fx_grad || !r->fx_after || !r->fx_logits)
        return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the fixture");
    mp_status st = mp_fixture_fill(r->fx, "grad:", &r->lay, &r->lay, 0, r->fx_grad, err);
    if (!st)
        st = mp_fixture_fill(r->fx, "after:", &r->lay, &r->lay, 0, r->fx_after, err);
    mp_fixture_logits(r->fx, mb, rd->micro_batch, r->fx_logits);
    return st;
}

mp_status mp_ref_run_init(mp_ref_run *r, const mp_gpt_dims *rd, int batches, int keep,
                          const mp_backend *host, mp_group self, const mp_adam_cfg *adam,
                          double grad_scale, double tokens, bool exact, uint64_t seed,
                          const mp_fixture *fx, int fx_mb, mp_error *err)
{
    memset(r, 0, sizeof *r);
    r->f64 = !exact;
    r->fx = fx;
    r->tokens = tokens;
    mp_status st = mp_param_layout_build(rd, &r->lay, err);
    if (st)
        return st;
    size_t Sfull = (size_t)rd->seq * (size_t)rd->micro_batch;
    r->ops.ops = calloc(2 * (size_t)batches, sizeof(mp_op));
    r->tok = malloc((size_t)batches * Sfull * sizeof(int32_t));
    r->tgt = malloc((size_t)batches * Sfull * sizeof(int32_t));
    r->sync_buf = malloc((r->lay.total ? r->lay.total : 1) * sizeof *r->sync_buf);
    if (!r->ops.ops || !r->tok || !r->tgt || !r->sync_buf)
        return no_memory(err);
    for (int i = 0; i < batches; i++) {
        r->ops.ops[r->ops.n++] = (mp_op){.kind = MP_OP_F, .microbatch = i};
        r->ops.ops[r->ops.n++] = (mp_op){.kind = MP_OP_B, .microbatch = i};
    }
    if (fx)
        return fixture_load(r, rd, fx_mb, err);
    size_t logits = Sfull * (size_t)rd->vocab;
    if (r->f64) {
        st = mp_gpt_init_f64(&r->m64, rd, &r->lay, host, self, 1, 1, false, seed, NULL, err);
        if (st)
            return st;
        r->m64.grad_scale = grad_scale;
        r->m64.keep_microbatch = keep;
        r->m64.kept_logits = malloc(logits * sizeof(double));
        if (!r->m64.kept_logits)
            return no_memory(err);
        return mp_trainer_init_f64(&r->t64, &r->m64, self, false, adam, batches, &r->ops, err);
    }
    st = mp_gpt_init_f32(&r->m32, rd, &r->lay, host, self, 1, 1, exact, seed, NULL, err);
    if (st)
        return st;
    r->m32.grad_scale = (float)grad_scale;
    r->m32.keep_microbatch = keep;
    r->m32.kept_logits = malloc(logits * sizeof(float));
    if (!r->m32.kept_logits)
        return no_memory(err);
    return mp_trainer_init_f32(&r->t32, &r->m32, self, false, adam, batches, &r->ops, err);
}

void mp_ref_run_free(mp_ref_run *r)
{
    mp_trainer_free_f32(&r->t32);
    mp_trainer_free_f64(&r->t64);
    mp_gpt_free_f32(&r->m32);
    mp_gpt_free_f64(&r->m64);
    mp_param_layout_free(&r->lay);
    free(r->ops.ops);
    free(r->tok);
    free(r->tgt);
    free(r->sync_buf);
    free(r->fx_grad);
    free(r->fx_after);
    free(r->fx_logits);
    memset(r, 0, sizeof *r);
}

mp_status mp_ref_run_grads(mp_ref_run *r, double *loss_sum, mp_check_view *view,
                           mp_error *err)
{
    *loss_sum = 0;
    if (r->fx) {
        *view = mp_check_view_f32(r->fx_grad, r->fx_logits);
        *loss_sum = *(const float *)mp_fixture_find(r->fx, "loss")->data * r->tokens;
        return MP_OK;
    }
    if (r->f64) {
        *view = mp_check_view_f64(r->m64.g, r->m64.kept_logits);
        return mp_trainer_grads_f64(&r->t64, r->tok, r->tgt, loss_sum, err);
    }
    *view = mp_check_view_f32(r->m32.g, r->m32.kept_logits);
    return mp_trainer_grads_f32(&r->t32, r->tok, r->tgt, loss_sum, err);
}

mp_status mp_ref_run_update(mp_ref_run *r, int step, mp_check_view *view, mp_error *err)
{
    if (r->fx) { /* the fixture's weights after PyTorch's AdamW step */
        *view = mp_check_view_f32(r->fx_after, NULL);
        return MP_OK;
    }
    if (r->f64) {
        *view = mp_check_view_f64(r->m64.w, NULL);
        return mp_trainer_update_f64(&r->t64, step, err);
    }
    *view = mp_check_view_f32(r->m32.w, NULL);
    return mp_trainer_update_f32(&r->t32, step, err);
}

mp_ref_state mp_ref_run_state(mp_ref_run *r)
{
    return r->f64 ? (mp_ref_state){r->m64.w, r->t64.m, r->t64.v, true}
                  : (mp_ref_state){r->m32.w, r->t32.m, r->t32.v, false};
}
