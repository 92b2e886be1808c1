/* fixture.c — reads a PyTorch fixture (tools/make_fixtures.py) and puts its
 * weights, data and results into exec's layouts. */
#include "exec/fixture.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool read_all(FILE *f, void *buf, size_t n) { return fread(buf, 1, n, f) == n; }

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Bytes are little-endian in the file; this converts in place on any host. */
static void le32_array(void *data, size_t n)
{
    unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        uint32_t v = le32(p + 4 * i);
        memcpy(p + 4 * i, &v, 4);
    }
}

#define BAD(...) (mp_fixture_free(fx), fclose(f), mp_error_set(err, MP_EINPUT, path, 0, 0, \
                                                             "--test-fixture", __VA_ARGS__))

mp_status mp_fixture_load(const char *path, mp_fixture *fx, mp_error *err)
{
    memset(fx, 0, sizeof *fx);
    fx->path = path;
    FILE *f = fopen(path, "rb");
    if (!f)
        return mp_error_set(err, MP_EIO, path, 0, 0, "--test-fixture", "cannot open the fixture");
    unsigned char head[12];
    if (!read_all(f, head, sizeof head) || memcmp(head, "MPFX0001", 8))
        return BAD("not a megaplan fixture (MPFX0001)");
    uint32_t count = le32(head + 8);
    if (count > 4096)
        return BAD("%u tensors: too many", (unsigned)count);
    fx->t = calloc(count ? count : 1, sizeof *fx->t);
    if (!fx->t)
        return BAD("out of memory");
    for (uint32_t k = 0; k < count; k++) {
        mp_fixture_tensor *t = &fx->t[fx->n];
        unsigned char b[4];
        if (!read_all(f, b, 2))
            return BAD("truncated at tensor %u", (unsigned)k);
        size_t len = (size_t)b[0] | (size_t)b[1] << 8;
        if (len >= sizeof t->name || !read_all(f, t->name, len))
            return BAD("tensor %u: bad name", (unsigned)k);
        t->name[len] = 0;
        if (!read_all(f, b, 2) || b[0] > 1 || b[1] < 1 || b[1] > 4)
            return BAD("tensor %s: bad dtype or rank", t->name);
        t->is_int = b[0] == 1;
        t->ndim = b[1];
        t->n = 1;
        for (int i = 0; i < t->ndim; i++) {
            if (!read_all(f, b, 4))
                return BAD("tensor %s: truncated shape", t->name);
            t->dims[i] = (int)le32(b);
            if (t->dims[i] < 1 || t->dims[i] > (1 << 24) || t->n > ((size_t)1 << 28))
                return BAD("tensor %s: bad shape", t->name);
            t->n *= (size_t)t->dims[i];
        }
        t->data = malloc(t->n * 4);
        if (!t->data)
            return BAD("out of memory for tensor %s", t->name);
        fx->n++;
        if (!read_all(f, t->data, t->n * 4))
            return BAD("tensor %s: truncated data", t->name);
        le32_array(t->data, t->n);
    }
    fclose(f);
    const mp_fixture_tensor *c = mp_fixture_find(fx, "config");
    const mp_fixture_tensor *a = mp_fixture_find(fx, "adam");
    if (!c || !c->is_int ||
        (c->n != MP_FX_CONFIG_COUNT && c->n != MP_FX_CONFIG_DSYARN && c->n != MP_FX_CONFIG_ROPE &&
         c->n != MP_FX_CONFIG_OSS &&
         c->n != MP_FX_CONFIG_MTP &&
         c->n != MP_FX_CONFIG_ROUTE &&
         c->n != MP_FX_CONFIG_MOE && c->n != MP_FX_CONFIG_BASE) || !a ||
        a->is_int || a->n != 5) {
        mp_fixture_free(fx);
        return mp_error_set(err, MP_EINPUT, path, 0, 0, "--test-fixture",
                            "no config or adam tensor of the expected size");
    }
    memset(fx->config, 0, sizeof fx->config); /* a dense model's file has the base fields */
    memcpy(fx->config, c->data, c->n * sizeof *fx->config);
    const float *h = a->data;
    fx->lr = h[0], fx->beta1 = h[1], fx->beta2 = h[2], fx->eps = h[3], fx->weight_decay = h[4];
    /* the data and results the run reads by index must have their sizes */
    size_t n = (size_t)fx->config[MP_FX_SEQUENCES], s = (size_t)fx->config[MP_FX_SEQ];
    size_t V = (size_t)fx->config[MP_FX_VOCAB];
    /* T5: targets and logits are the decoder's (dec_seq), its input dec_tokens */
    bool t5 = fx->config[MP_FX_ARCH] == 3;
    size_t so = t5 ? (size_t)fx->config[MP_FX_DEC_SEQ] : s;
    struct {
        const char *name;
        bool is_int;
        size_t n;
    } want[] = {{"tokens", true, n * s}, {"targets", true, n * so}, {"loss", false, 1},
                {"logits", false, n * so * V}, {t5 ? "dec_tokens" : "tokens", true, n * so}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        const mp_fixture_tensor *t = mp_fixture_find(fx, want[i].name);
        if (!t || t->is_int != want[i].is_int || t->n != want[i].n) {
            mp_fixture_free(fx);
            return mp_error_set(err, MP_EINPUT, path, 0, 0, "--test-fixture",
                                "tensor %s missing or not of %zu elements", want[i].name,
                                want[i].n);
        }
    }
    const int32_t *tok = mp_fixture_find(fx, "tokens")->data;
    const int32_t *tgt = mp_fixture_find(fx, "targets")->data;
    for (size_t i = 0; i < n * s; i++)
        if (tok[i] < 0 || (size_t)tok[i] >= V || (i < n * so && (tgt[i] < -1 || (size_t)(tgt[i] + 1) > V))) {
            mp_fixture_free(fx);
            return mp_error_set(err, MP_EINPUT, path, 0, 0, "--test-fixture",
                                "token or target %zu outside the vocabulary", i);
        }
    return MP_OK;
}

void mp_fixture_free(mp_fixture *fx)
{
    for (int i = 0; fx->t && i < fx->n; i++)
        free(fx->t[i].data);
    free(fx->t);
    fx->t = NULL;
    fx->n = 0;
}

const mp_fixture_tensor *mp_fixture_find(const mp_fixture *fx, const char *name)
{
    for (int i = 0; i < fx->n; i++)
        if (!strcmp(fx->t[i].name, name))
            return &fx->t[i];
    return NULL;
}

mp_status mp_fixture_match(const mp_fixture *fx, const mp_gpt_dims *d, int sequences,
                           mp_error *err)
{
    const int *c = fx->config;
    const mp_rope_spec *rf = &d->rope_freq;
    /* the fixtures' MLPs are GELU's tanh form or SwiGLU (tools/make_fixtures.py) */
    if (d->gelu_erf || d->geglu)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.activation",
                            "no PyTorch fixture has %s: the plan cannot be checked against "
                            "one", mp_activation_name(mp_dims_activation(d)));
    /* tools/make_fixtures.py runs every norm with eps 1e-5 (its files have
     * no field for it): another epsilon would fail the comparison by a
     * tolerance, not by name */
    if (mp_dims_norm_eps(d) != 1e-5)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "model.norm_eps",
                            "the PyTorch fixtures are made with 1e-5, not %g: give the plan "
                            "norm_eps: 1e-5 to check it against one",
                            mp_dims_norm_eps(d));
    bool yarn = d->rope && rf->yarn;
    int arch = d->bert ? 2 : (d->rmsnorm || d->gated || d->rope || d->no_bias) ? 1 : 0;
    int enc_layers = 0, dec_seq = 0;
#ifdef MP_T5_BUCKETS /* params.h with T5 in the executor */
    if (d->t5)
        arch = 3, enc_layers = d->enc_layers, dec_seq = d->dec_seq;
#endif
    struct {
        const char *field;
        int want, have;
    } f[] = {
        {"model.arch (0 gpt, 1 llama, 2 bert, 3 t5)", c[MP_FX_ARCH], arch},
        {"model.layers", c[MP_FX_LAYERS], d->layers},
        {"model.hidden", c[MP_FX_HIDDEN], d->hidden},
        {"model.heads", c[MP_FX_HEADS], d->heads},
        {"model.kv_heads", c[MP_FX_KV_HEADS], mp_dims_kv_heads(d)},
        {"model.ffn_hidden", c[MP_FX_FFN], d->ffn},
        {"model.vocab", c[MP_FX_VOCAB], d->vocab},
        {"model.seq", c[MP_FX_SEQ], d->seq},
        {"training.global_batch", c[MP_FX_SEQUENCES], sequences},
        {"model.tied_embeddings", c[MP_FX_TIED], d->tied},
        {"model.norm (1 rmsnorm)", c[MP_FX_RMSNORM], d->rmsnorm},
        {"model.activation (1 swiglu)", c[MP_FX_SWIGLU], d->gated},
        {"model.position (1 rope)", c[MP_FX_ROPE], d->rope},
        {"model.arch (1 no biases)", c[MP_FX_NO_BIAS], d->no_bias},
        {"model.encoder_layers", c[MP_FX_ENC_LAYERS], enc_layers},
        {"model.decoder_seq", c[MP_FX_DEC_SEQ], dec_seq},
        {"model.mla.q_lora_rank", c[MP_FX_Q_LORA], d->q_lora},
        {"model.mla.kv_lora_rank", c[MP_FX_KV_LORA], d->kv_lora},
        {"model.mla.qk_rope_head_dim", c[MP_FX_ROPE_DIM], d->rope_dim},
        {"model.mla.qk_nope_head_dim", c[MP_FX_NOPE_DIM], d->nope_dim},
        {"model.mla.v_head_dim", c[MP_FX_V_DIM], d->v_dim},
        {"model.moe.experts", c[MP_FX_EXPERTS], d->experts},
        {"model.moe.top_k", c[MP_FX_TOP_K], d->experts ? d->top_k : 0},
        {"model.moe.expert_ffn", c[MP_FX_EXPERT_FFN], d->experts ? d->expert_ffn : 0},
        {"model.moe.first_dense", c[MP_FX_FIRST_DENSE], d->experts ? d->moe_first_dense : 0},
        {"model.moe shared experts' ffn", c[MP_FX_SHARED_FFN], d->experts ? d->shared_ffn : 0},
        {"model.moe.router (1 sigmoid)", c[MP_FX_ROUTER_SIGMOID],
         d->experts ? d->router_sigmoid : 0},
        {"model.moe.route_groups", c[MP_FX_ROUTE_GROUPS],
         d->experts && d->route_groups > 1 ? d->route_groups : 0},
        {"model.moe.route_group_top_k", c[MP_FX_ROUTE_GROUP_TOP_K],
         d->experts && d->route_groups > 1 ? d->route_group_top_k : 0},
        {"model.moe.route_scale (x 1000)", c[MP_FX_ROUTE_SCALE_MILLI],
         d->experts && d->route_scale > 0 && d->route_scale != 1.0
             ? (int)lround(d->route_scale * 1000.0)
             : 0},
        {"model.mtp_layers", c[MP_FX_MTP_LAYERS], d->mtp_layers},
        {"model.mtp_loss_scale (x 1000)", c[MP_FX_MTP_SCALE_MILLI],
         d->mtp_layers ? (int)lround(d->mtp_scale * 1000.0) : 0},
        {"model.attn.window", c[MP_FX_WINDOW], d->window},
        {"model.attn.window_skip_freq", c[MP_FX_WINDOW_SKIP_FREQ],
         d->window ? d->window_skip_freq : 0},
        {"model.attn.sinks", c[MP_FX_SINKS], d->sinks},
        {"model.glu_limit (x 1000)", c[MP_FX_GLU_LIMIT_MILLI], (int)lround(d->glu_limit * 1000.0)},
        {"model.linear_bias (the experts' and router's biases)", c[MP_FX_EXPERT_BIAS],
         d->expert_bias},
        {"model.attn.rope_theta (0: 10000)", c[MP_FX_ROPE_THETA],
         d->rope && rf->theta > 0 && rf->theta != 10000.0 ? (int)lround(rf->theta) : 0},
        {"model.attn.yarn_factor (x 1000; 0: no YaRN)", c[MP_FX_YARN_FACTOR_MILLI],
         yarn ? (int)lround(rf->factor * 1000.0) : 0},
        {"model.attn.yarn_original_seq", c[MP_FX_YARN_ORIGINAL_SEQ], yarn ? rf->original_seq : 0},
        {"model.attn.yarn_beta_fast (x 1000)", c[MP_FX_YARN_BETA_FAST_MILLI],
         yarn ? (int)lround(rf->beta_fast * 1000.0) : 0},
        {"model.attn.yarn_beta_slow (x 1000)", c[MP_FX_YARN_BETA_SLOW_MILLI],
         yarn ? (int)lround(rf->beta_slow * 1000.0) : 0},
        {"model.attn.yarn_bounds (1 unrounded)", c[MP_FX_YARN_UNROUNDED], yarn && rf->unrounded},
        {"model.attn.yarn_mscale (x 1000)", c[MP_FX_YARN_MSCALE_MILLI],
         yarn ? (int)lround(rf->mscale * 1000.0) : 0},
        {"model.attn.yarn_mscale_all_dim (x 1000)", c[MP_FX_YARN_MSCALE_ALL_DIM_MILLI],
         yarn ? (int)lround(rf->mscale_all_dim * 1000.0) : 0},
        {"model.head_dim (0: hidden / heads)", c[MP_FX_OWN_HEAD_DIM], d->head_dim},
        {"model.attn.qk_norm", c[MP_FX_QK_NORM], d->qk_norm},
        /* the fixture is dropless, every block after the first dense ones MoE */
        {"model.moe.capacity_factor (0: dropless)", 0, d->experts && d->capacity_factor > 0},
        {"model.moe.layer_freq", d->experts ? 1 : 0,
         d->experts ? (d->moe_layer_freq > 0 ? d->moe_layer_freq : 1) : 0},
    };
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (f[i].want != f[i].have)
            return mp_error_set(err, MP_EINPUT, fx->path, 0, 0, "--test-fixture",
                                "the fixture's %s is %d, the plan's %d", f[i].field, f[i].want,
                                f[i].have);
    return MP_OK;
}

mp_status mp_fixture_fill(const mp_fixture *fx, const char *prefix, const mp_param_layout *lay,
                          const mp_param_layout *ref_lay, int tp_rank, float *buf,
                          mp_error *err)
{
    for (int pid = 0; pid < lay->n; pid++) {
        const mp_param *p = &lay->p[pid];
        const mp_param *rp = &ref_lay->p[p->ref_index];
        char name[128];
        snprintf(name, sizeof name, "%s%s", prefix, rp->name);
        const mp_fixture_tensor *t = mp_fixture_find(fx, name);
        if (!t || t->is_int || t->n != (size_t)rp->rows * (size_t)rp->cols)
            return mp_error_set(err, MP_EINPUT, fx->path, 0, 0, "--test-fixture",
                                "tensor %s [%d, %d] missing or of another size", name, rp->rows,
                                rp->cols);
        const float *src = t->data;
        size_t n = (size_t)p->lrows * (size_t)p->lcols;
        for (size_t i = 0; i < n; i++)
            buf[p->offset + i] = src[mp_param_full_index(p, tp_rank, i)];
    }
    return MP_OK;
}

mp_status mp_fixture_route_bias(const mp_fixture *fx, const mp_gpt_dims *d, float *bias,
                                mp_error *err)
{
    for (int l = 0; l < d->layers; l++) {
        char name[64];
        snprintf(name, sizeof name, "route_bias:layers.%d", l);
        const mp_fixture_tensor *t = mp_fixture_find(fx, name);
        if (!t)
            continue;
        if (!bias || !mp_dims_block_is_moe(d, l) || t->is_int || t->n != (size_t)d->experts)
            return mp_error_set(err, MP_EINPUT, fx->path, 0, 0, "--test-fixture",
                                "tensor %s: not an expert bias of this run's (sigmoid router, "
                                "%d experts)", name, d->experts);
        memcpy(bias + (size_t)l * (size_t)d->experts, t->data, t->n * sizeof(float));
    }
    return MP_OK;
}

/* Length of the rows the loss is on: the decoder's for T5, else the sequence. */
static int out_seq(const mp_fixture *fx)
{
    return fx->config[MP_FX_ARCH] == 3 ? fx->config[MP_FX_DEC_SEQ] : fx->config[MP_FX_SEQ];
}

void mp_fixture_rows(const mp_fixture *fx, const char *name, int first, int n, int b,
                     int stride, int32_t *out)
{
    const mp_fixture_tensor *t = mp_fixture_find(fx, name);
    int s = t->dims[1];
    const int32_t *T = t->data;
    for (int mb = 0; mb < n; mb++)
        for (int si = 0; si < s; si++)
            for (int bi = 0; bi < b; bi++) {
                size_t seq = (size_t)(first + mb) * (size_t)b + (size_t)bi;
                out[(size_t)mb * (size_t)stride + (size_t)si * (size_t)b + (size_t)bi] =
                    T[seq * (size_t)s + (size_t)si];
            }
}

void mp_fixture_batch(const mp_fixture *fx, int first, int n, int b, int32_t *tok, int32_t *tgt)
{
    /* exec's micro-batches are seq * b rows apart in both arrays (T5's
     * targets, the decoder's, fill the first dec_seq * b of theirs) */
    int stride = fx->config[MP_FX_SEQ] * b;
    mp_fixture_rows(fx, "tokens", first, n, b, stride, tok);
    mp_fixture_rows(fx, "targets", first, n, b, stride, tgt);
}

void mp_fixture_logits(const mp_fixture *fx, int mb, int b, float *out)
{
    const mp_fixture_tensor *lt = mp_fixture_find(fx, "logits");
    int s = out_seq(fx), V = fx->config[MP_FX_VOCAB];
    const float *L = lt->data;
    for (int si = 0; si < s; si++)
        for (int bi = 0; bi < b; bi++) {
            size_t seq = (size_t)mb * (size_t)b + (size_t)bi;
            memcpy(out + ((size_t)si * b + bi) * (size_t)V,
                   L + (seq * (size_t)s + (size_t)si) * (size_t)V, (size_t)V * sizeof(float));
        }
}
