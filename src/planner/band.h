/* band.h — the error band of a prediction: the range of predicted/measured − 1
 * that the held-out runs of its hardware class showed (the profile's
 * error_band for dense plans, moe_error_band for plans of a model with routed
 * experts, both written by tools/fit_profile.py; docs/validation.md). A
 * predicted time t then says the measured time is likely in
 * [t / (1 + high), t / (1 + low)], and a throughput q in [q(1 + low), q(1 + high)]. */
#ifndef MP_BAND_H
#define MP_BAND_H

#include <stdbool.h>

#include "core/hw.h"
#include "core/model.h"

typedef struct mp_band {
    double low, high; /* both 0: no band known */
    bool moe;         /* the mixture-of-experts band (moe_error_band) */
} mp_band;

/* The band of a plan of model m on hw: the profile's moe_error_band when m
 * has routed experts (mp_model_is_moe), its error_band otherwise. A profile
 * without a moe_error_band gives MoE plans no band: the dense band is never
 * used for them (their held-out errors are several times wider). */
mp_band mp_band_of(const mp_hw *hw, const mp_model *m);

/* Whether the band is known (a profile without held-out data has none). */
bool mp_band_known(const mp_band *b);

/* The likely measured range of a predicted time (seconds); false, and
 * lo = hi = t, without a band. */
bool mp_band_time(const mp_band *b, double t, double *lo, double *hi);

/* The same for a throughput (anything inversely proportional to the time). */
bool mp_band_rate(const mp_band *b, double q, double *lo, double *hi);

/* The band's relative width, high − low: predictions closer than this are not
 * told apart by the model. fallback without a band. */
double mp_band_width(const mp_band *b, double fallback);

/* "dense" or "mixture-of-experts": which held-out rows the band comes from. */
const char *mp_band_kind(const mp_band *b);

#endif
