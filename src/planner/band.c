/* band.c — predicted times and throughputs as ranges (band.h). */
#include "planner/band.h"

bool mp_band_known(const mp_hw *hw)
{
    return hw->error_band_low != 0.0 || hw->error_band_high != 0.0;
}

bool mp_band_time(const mp_hw *hw, double t, double *lo, double *hi)
{
    *lo = *hi = t;
    if (!mp_band_known(hw))
        return false;
    /* predicted = measured (1 + e), e in [low, high] */
    *lo = t / (1.0 + hw->error_band_high);
    *hi = t / (1.0 + hw->error_band_low);
    return true;
}

bool mp_band_rate(const mp_hw *hw, double q, double *lo, double *hi)
{
    *lo = *hi = q;
    if (!mp_band_known(hw))
        return false;
    *lo = q * (1.0 + hw->error_band_low);
    *hi = q * (1.0 + hw->error_band_high);
    return true;
}

double mp_band_width(const mp_hw *hw, double fallback)
{
    return mp_band_known(hw) ? hw->error_band_high - hw->error_band_low : fallback;
}
