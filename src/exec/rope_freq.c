/* rope_freq.c — the rotary embedding's inverse frequencies and attention
 * factor (rope.h), written from HF transformers' _compute_yarn_parameters
 * (modeling_rope_utils.py): find_correction_dim, find_correction_range,
 * linear_ramp_factor, get_mscale. */
#include "exec/rope.h"

#include <math.h>
#include <stdbool.h>

#include "exec/test_mutant.h"

/* Test-only (the mutant build of tests/exec/meson.build): the error that the
 * environment's MP_TEST_ROPE_MUTANT names, planted so that the PyTorch
 * fixture yarn.bin can show it catches it; the normal build plants nothing. */
#ifdef MP_TEST_ROPE_MUTANT
#define mutant(what) mp_test_mutant_named("MP_TEST_ROPE_MUTANT", (what))
#else
#define mutant(what) ((void)(what), false)
#endif

#define PI 3.14159265358979323846

static double theta_of(const mp_rope_spec *r)
{
    return r && r->theta > 0.0 ? r->theta : 10000.0;
}

/* The pair index (fractional) at which a frequency makes `rotations` turns
 * over the original context: dim ln(L / (2 pi rotations)) / (2 ln theta). */
static double correction_dim(double rotations, int hd, double theta, int original_seq)
{
    return hd * log(original_seq / (rotations * 2.0 * PI)) / (2.0 * log(theta));
}

void mp_rope_yarn_range(const mp_rope_spec *r, int hd, double *lo, double *hi)
{
    double theta = theta_of(r);
    double fast = r->beta_fast > 0.0 ? r->beta_fast : 32.0;
    double slow = r->beta_slow > 0.0 ? r->beta_slow : 1.0;
    if (mutant("ramp-swapped")) {
        double t = fast;
        fast = slow;
        slow = t;
    }
    double l = correction_dim(fast, hd, theta, r->original_seq);
    double h = correction_dim(slow, hd, theta, r->original_seq);
    if (!r->unrounded || mutant("bounds-rounded")) {
        l = floor(l);
        h = ceil(h);
    }
    l = l > 0.0 ? l : 0.0;
    h = h < hd - 1 ? h : hd - 1;
    if (l == h)
        h += 0.001; /* HF's linear_ramp_factor: no division by zero */
    *lo = l;
    *hi = h;
}

double mp_rope_inv_freq(const mp_rope_spec *r, int k, int hd)
{
    double theta = theta_of(r);
    if (!r || !r->yarn)
        return pow(theta, -2.0 * k / hd);
    double pos_freq = pow(theta, 2.0 * k / hd);
    double extrapolated = 1.0 / pos_freq, interpolated = 1.0 / (r->factor * pos_freq);
    double lo, hi;
    mp_rope_yarn_range(r, hd, &lo, &hi);
    double ramp = (k - lo) / (hi - lo);
    ramp = ramp < 0.0 ? 0.0 : ramp > 1.0 ? 1.0 : ramp;
    double extrapolation = 1.0 - ramp;
    return interpolated * (1.0 - extrapolation) + extrapolated * extrapolation;
}

/* HF's get_mscale(scale, mscale): 0.1 mscale ln scale + 1 above 1, else 1. */
static double yarn_mscale(double factor, double mscale)
{
    return factor <= 1.0 ? 1.0 : 0.1 * mscale * log(factor) + 1.0;
}

double mp_rope_attention_factor(const mp_rope_spec *r)
{
    if (!r || !r->yarn || r->factor <= 1.0 || mutant("mscale-dropped"))
        return 1.0;
    if (r->mscale != 0.0 && r->mscale_all_dim != 0.0) /* DeepSeek's */
        return yarn_mscale(r->factor, r->mscale) / yarn_mscale(r->factor, r->mscale_all_dim);
    return yarn_mscale(r->factor, 1.0);
}

double mp_rope_softmax_scale(const mp_rope_spec *r)
{
    if (!r || !r->yarn || r->mscale_all_dim == 0.0 || mutant("softmax-mscale-dropped"))
        return 1.0;
    double g = yarn_mscale(r->factor, r->mscale_all_dim);
    return g * g;
}
