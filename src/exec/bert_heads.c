/* bert_heads.c — BERT's heads after the final LayerNorm: the pooler and its
 * two-way head on position 0, and the backward of both heads (the masked-LM
 * transform and vocabulary projection's forward is in model.c with GPT's
 * head). Compiled once per precision (real.h). */
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels.h"
#include "exec/quant.h"
#include "exec/real.h"
#include "exec/model_internal.h"

/* Pooler and two-way head on position 0 of each sample (rows 0..b-1 of the
 * full rows): pooled = tanh(x0 @ Wp + bp), p = softmax(pooled @ Wn + bn); the
 * label is the sample's first token's parity. Returns the summed loss. */
double mp_model_nsp_forward(mp_gpt *g, mp_acts *A)
{
    sizes z = sizes_of(&g->d);
    const mp_param_layout *lay = g->lay;
    bool ex = g->exact;
    if (!holds_first(g))
        return 0;
    GEMM(false, false, z.b, z.h, z.h, A->lnf_full, z.h, param(g->w, g, lay->pool_w), z.h,
         0.0, A->pool_pre, z.h);
    g->be->bias_add(MP_REAL_KIND, A->pool_pre, param(g->w, g, lay->pool_b), (int)z.b, (int)z.h);
    bq(g, A->pool_pre, z.b * z.h, MP_Q_ACT);
    g->be->tanh_forward(MP_REAL_KIND, A->pooled, A->pool_pre, z.b * z.h);
    bq(g, A->pooled, z.b * z.h, MP_Q_ACT);
    GEMM(false, false, z.b, 2, z.h, A->pooled, z.h, param(g->w, g, lay->nsp_w), 2, 0.0,
         A->nsp_p, 2);
    g->be->bias_add(MP_REAL_KIND, A->nsp_p, param(g->w, g, lay->nsp_b), (int)z.b, 2);
    bq(g, A->nsp_p, z.b * 2, MP_Q_ACT);
    /* the two-way softmax of b rows on the host */
    real *host = malloc(z.b * 2 * sizeof(real));
    if (!host)
        return NAN; /* the loss shows the failure */
    g->be->copy(host, A->nsp_p, z.b * 2 * sizeof(real), MP_COPY_D2H);
    real total = 0;
    for (size_t n = 0; n < z.b; n++) {
        real *p = host + n * 2, m = p[0] > p[1] ? p[0] : p[1];
        int label = (int)(A->host_tokens[n] & 1);
        real zl = p[label];
        p[0] = R_EXP(p[0] - m);
        p[1] = R_EXP(p[1] - m);
        mp_q(ex, p, 2, MP_Q_PROB); /* host memory: layers.c's own */
        real sum = p[0] + p[1];
        real loss = R_LOG(sum) + m - zl;
        p[0] /= sum;
        p[1] /= sum;
        mp_q(ex, p, 2, MP_Q_PROB); /* host memory: layers.c's own */
        if (ex)
            mp_quantize(&loss, 1, MP_Q_LOSS, MP_Q_LOSS_MAX_INT);
        total += loss;
    }
    g->be->copy(A->nsp_p, host, z.b * 2 * sizeof(real), MP_COPY_H2D);
    free(host);
    return (double)total;
}

/* Backward of BERT's heads into W.dres (this rank's rows of d lnf after the
 * final norm's backward). The vocabulary projection is split over TP, so the
 * gradient of its input is summed over TP in full before the replicated
 * transform; the rest runs on every rank's full rows alike. */
mp_status mp_model_bert_head_backward(mp_gpt *g, mp_acts *A, mp_error *err)
{
    sizes z = sizes_of(&g->d);
    work W = work_of(g);
    const mp_param_layout *lay = g->lay;
    bool ex = g->exact, sp = g->d.sp && g->tp.size > 1;
    /* dlogits = (p - onehot) * grad_scale on masked tokens, 0 elsewhere */
    mp_model_dlogits(g, A->logits, A->targets, z.S);
    /* vocabulary bias and projection; d mlm_out[S,h] = sum over TP of dlogits @ Wv */
    g->be->bias_grad(MP_REAL_KIND, param(g->g, g, lay->lm_bias), A->logits, (int)z.S,
                     (int)z.Vl);
    GEMM(true, false, z.Vl, z.h, z.S, A->logits, z.Vl, A->mlm_out, z.h, 1.0,
         param(g->g, g, lay->head), z.h);
    GEMM(false, false, z.S, z.h, z.Vl, A->logits, z.Vl, param(g->w, g, lay->head), z.h, 0.0,
         W.dfull, z.h);
    double t = g->be->now();
    if (!mp_probe_drops(g->probe, "tp-head-bwd"))
        CHECK(g->be->allreduce(&g->tp, MP_REAL_KIND, W.dfull, z.S * z.h, MP_RED_SUM, err));
    if (g->tp.size > 1)
        mp_probe_record(g->probe, t, MP_STREAM_TP, MP_EV_TP_COMM, true);
    bq(g, W.dfull, z.S * z.h, MP_Q_GRAD);
    /* through the transform's LayerNorm (into dact = W.part), GeLU, dense */
    real *dact = W.part;
    g->be->layernorm_backward(MP_REAL_KIND, dact, param(g->g, g, lay->mlm_ln_w),
                              param(g->g, g, lay->mlm_ln_b), W.dfull, A->mlm_xhat,
                              A->mlm_rstd, param(g->w, g, lay->mlm_ln_w), (int)z.S,
                              (int)z.h, ex);
    mp_gelu_kind_backward(g, dact, dact, A->mlm_pre, z.S * z.h);
    bq(g, dact, z.S * z.h, MP_Q_GRAD);
    g->be->bias_grad(MP_REAL_KIND, param(g->g, g, lay->mlm_b), dact, (int)z.S, (int)z.h);
    GEMM(true, false, z.h, z.h, z.S, A->lnf_full, z.h, dact, z.h, 1.0,
         param(g->g, g, lay->mlm_w), z.h);
    /* d lnf_full[S,h] (full rows, the same on every TP rank) into W.dfull */
    GEMM(false, true, z.S, z.h, z.h, dact, z.h, param(g->w, g, lay->mlm_w), z.h, 0.0, W.dfull,
         z.h);
    if (holds_first(g)) {
        /* the two-way head and the pooler, on rows 0..b-1 (position 0) */
        /* d2[b,2] in the CE statistics' room (3S), dpool[b,h] in dln's (Sl >= b) */
        real *d2 = W.stats, *dpool = W.dln;
        real *host = malloc(z.b * 4 * sizeof(real)); /* p, then d2, on the host */
        if (!host)
            return mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory");
        g->be->copy(host, A->nsp_p, z.b * 2 * sizeof(real), MP_COPY_D2H);
        for (size_t n = 0; n < z.b; n++) {
            const real *p = host + n * 2;
            int label = (int)(A->host_tokens[n] & 1);
            host[2 * z.b + 2 * n] = (p[0] - (label == 0)) * g->grad_scale;
            host[2 * z.b + 2 * n + 1] = (p[1] - (label == 1)) * g->grad_scale;
        }
        g->be->copy(d2, host + 2 * z.b, z.b * 2 * sizeof(real), MP_COPY_H2D);
        free(host);
        g->be->bias_grad(MP_REAL_KIND, param(g->g, g, lay->nsp_b), d2, (int)z.b, 2);
        GEMM(true, false, z.h, 2, z.b, A->pooled, z.h, d2, 2, 1.0, param(g->g, g, lay->nsp_w),
             2);
        GEMM(false, true, z.b, z.h, 2, d2, 2, param(g->w, g, lay->nsp_w), 2, 0.0, dpool, z.h);
        bq(g, dpool, z.b * z.h, MP_Q_GRAD);
        g->be->tanh_backward(MP_REAL_KIND, dpool, A->pooled, z.b * z.h);
        bq(g, dpool, z.b * z.h, MP_Q_GRAD);
        g->be->bias_grad(MP_REAL_KIND, param(g->g, g, lay->pool_b), dpool, (int)z.b, (int)z.h);
        GEMM(true, false, z.h, z.h, z.b, A->lnf_full, z.h, dpool, z.h, 1.0,
             param(g->g, g, lay->pool_w), z.h);
        GEMM(false, true, z.b, z.h, z.h, dpool, z.h, param(g->w, g, lay->pool_w), z.h, 1.0,
             W.dfull, z.h);
    }
    bq(g, W.dfull, z.S * z.h, MP_Q_GRAD);
    /* this rank's rows (SP: its piece of the sequence), then the final norm */
    be_copy(g, W.dln, W.dfull + (sp ? (size_t)g->tp.rank * z.Sl * z.h : 0), z.Sl * z.h);
    mp_model_norm_backward(g, W.dres, param(g->g, g, lay->lnf_w),
                           lay->lnf_b >= 0 ? param(g->g, g, lay->lnf_b) : NULL, W.dln,
                           A->lnf_xhat, A->lnf_rstd, param(g->w, g, lay->lnf_w), (int)z.Sl);
    return MP_OK;
}

