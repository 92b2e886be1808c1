/* band.c — predicted times and throughputs as ranges (band.h). */
#include "planner/band.h"

mp_band mp_band_of(const mp_hw *hw, const mp_model *m)
{
    if (m && mp_model_is_moe(m))
        return (mp_band){hw->moe_error_band_low, hw->moe_error_band_high, true};
    return (mp_band){hw->error_band_low, hw->error_band_high, false};
}

bool mp_band_known(const mp_band *b)
{
    return b->low != 0.0 || b->high != 0.0;
}

bool mp_band_time(const mp_band *b, double t, double *lo, double *hi)
{
    *lo = *hi = t;
    if (!mp_band_known(b))
        return false;
    /* predicted = measured (1 + e), e in [low, high] */
    *lo = t / (1.0 + b->high);
    *hi = t / (1.0 + b->low);
    return true;
}

bool mp_band_rate(const mp_band *b, double q, double *lo, double *hi)
{
    *lo = *hi = q;
    if (!mp_band_known(b))
        return false;
    *lo = q * (1.0 + b->low);
    *hi = q * (1.0 + b->high);
    return true;
}

double mp_band_width(const mp_band *b, double fallback)
{
    return mp_band_known(b) ? b->high - b->low : fallback;
}

const char *mp_band_kind(const mp_band *b)
{
    return b->moe ? "mixture-of-experts" : "dense";
}
