/* band.h — the error band of a prediction: the range of predicted/measured − 1
 * that the held-out runs of its hardware class showed (the profile's
 * error_band, written by tools/fit_profile.py; docs/validation.md). A
 * predicted time t then says the measured time is likely in
 * [t / (1 + high), t / (1 + low)], and a throughput q in [q(1 + low), q(1 + high)]. */
#ifndef MP_BAND_H
#define MP_BAND_H

#include <stdbool.h>

#include "core/hw.h"

/* Whether the profile has a band (a profile without held-out data has none). */
bool mp_band_known(const mp_hw *hw);

/* The likely measured range of a predicted time (seconds); false, and
 * lo = hi = t, without a band. */
bool mp_band_time(const mp_hw *hw, double t, double *lo, double *hi);

/* The same for a throughput (anything inversely proportional to the time). */
bool mp_band_rate(const mp_hw *hw, double q, double *lo, double *hi);

/* The band's relative width, high − low: predictions closer than this are not
 * told apart by the model. fallback without a band. */
double mp_band_width(const mp_hw *hw, double fallback);

#endif
