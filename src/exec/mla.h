/* mla.h — the executor's multi-head latent attention (DeepSeek-V2/V3;
 * docs/exec.md, "Multi-head latent attention"): the sizes of one rank's
 * share and where one block's saved state and the shared workspace lie. The
 * forward and backward are mla.c, declared in model_internal.h.
 *
 * Shapes (S token rows of the TP group, Sl of them this rank's residual rows:
 * S/tp under SP; al = heads/tp local heads; dqk = nope + rope):
 *   n1  [Sl,h]       the block's first norm, this rank's rows
 *   cq  [Sl,rq]      n1 W_dq               (replicated over TP)
 *   ckv [Sl,rkv+dr]  n1 W_dkv = [c_kv | k_r] (replicated over TP)
 *   latq, latkv, kr  [S,rq] [S,rkv] [S,dr]: norm(cq), norm(c_kv), rope(k_r);
 *                    under SP each rank's rows, all-gathered over TP
 *   q   [S,al*dqk]   latq W_uq (column-parallel), rope on each head's last dr
 *   kv  [S,al*(dn+dv)] latkv W_ukv (column-parallel): per head [k_nope | v]
 *   K   [S,al*dqk]   per head [k_nope | k_r]: the rotary key shared by all heads
 *   att [S,al*dv]    softmax(q K^T / sqrt(dqk)) v, causal
 * then the output projection [heads*dv, h], row-parallel, as the dense proj. */
#ifndef MP_EXEC_MLA_H
#define MP_EXEC_MLA_H

#include <stddef.h>

#include "exec/params.h"

typedef struct mp_mla_sizes {
    size_t S, Sl, h, al, dn, dr, dv, dqk, rq, rkv;
    size_t lw;  /* a latent row: rq + rkv + dr (rq 0: queries straight from n1) */
    size_t kvw; /* an up-projected key/value row here: al * (dn + dv) */
} mp_mla_sizes;

static inline mp_mla_sizes mp_mla_sizes_of(const mp_gpt_dims *d, size_t S, size_t Sl)
{
    mp_mla_sizes z = {0};
    if (!mp_dims_is_mla(d))
        return z;
    z.S = S;
    z.Sl = Sl;
    z.h = (size_t)d->hidden;
    z.al = (size_t)(d->heads / d->tp);
    z.dn = (size_t)d->nope_dim;
    z.dr = (size_t)d->rope_dim;
    z.dv = (size_t)d->v_dim;
    z.dqk = z.dn + z.dr;
    z.rq = (size_t)d->q_lora;
    z.rkv = (size_t)d->kv_lora;
    z.lw = z.rq + z.rkv + z.dr;
    z.kvw = z.al * (z.dn + z.dv);
    return z;
}

/* One block's saved state, in reals from its region's start. */
typedef struct mp_mla_layout {
    size_t q_xhat, q_rstd;   /* [Sl,rq] [Sl] the query latent's norm */
    size_t kv_xhat, kv_rstd; /* [Sl,rkv] [Sl] the key/value latent's norm */
    size_t latq, latkv, kr;  /* [S,rq] [S,rkv] [S,dr] the normed latents and the turned
                                rotary key, every row of the TP group */
    size_t total;
} mp_mla_layout;

static inline mp_mla_layout mp_mla_layout_of(const mp_mla_sizes *z)
{
    mp_mla_layout L = {0};
    size_t u = 0;
    L.q_xhat = u, u += z->Sl * z->rq;
    L.q_rstd = u, u += z->rq ? z->Sl : 0;
    L.kv_xhat = u, u += z->Sl * z->rkv;
    L.kv_rstd = u, u += z->Sl;
    L.latq = u, u += z->S * z->rq;
    L.latkv = u, u += z->S * z->rkv;
    L.kr = u, u += z->S * z->dr;
    L.total = z->lw ? u : 0;
    return L;
}

/* The workspace shared by the blocks, in reals from its start. */
typedef struct mp_mla_work {
    size_t wq, wkv, wr; /* [S,rq] [S,rkv] [S,dr] SP: the normed latents before the
                           gather; backward: the latents' gradients from this rank's
                           heads (TP partials) */
    size_t lq, lkv, lr; /* [Sl,rq] [Sl,rkv] [Sl,dr] the down-projections' outputs;
                           backward: the latents' gradients of this rank's rows */
    size_t kv;          /* [S,kvw] the up-projected keys and values, or their gradient */
    size_t total;
} mp_mla_work;

static inline mp_mla_work mp_mla_work_of(const mp_mla_sizes *z)
{
    mp_mla_work W = {0};
    size_t u = 0;
    W.wq = u, u += z->S * z->rq;
    W.wkv = u, u += z->S * z->rkv;
    W.wr = u, u += z->S * z->dr;
    W.lq = u, u += z->Sl * z->rq;
    W.lkv = u, u += z->Sl * z->rkv;
    W.lr = u, u += z->Sl * z->dr;
    W.kv = u, u += z->S * z->kvw;
    W.total = z->lw ? u : 0;
    return W;
}

#endif
