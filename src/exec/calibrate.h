/* calibrate.h — measure the machine the executor runs on and describe it as a
 * hardware profile (core/hw.h), so that the cost model and the simulator can
 * predict a run of `megaplan exec` and `exec --compare` can set measured
 * against predicted. Every rank measures at once, as they run under exec
 * (ranks that share cores slow each other down, and the profile should say
 * so); the slowest rank's figure is kept. */
#ifndef MP_EXEC_CALIBRATE_H
#define MP_EXEC_CALIBRATE_H

#include "core/error.h"
#include "core/hw.h"
#include "exec/backend.h"
#include "exec/runtime.h"

#define MP_CALIB_GEMM_POINTS 8
#define MP_CALIB_COLL_POINTS 8

typedef struct mp_calibration {
    mp_hw hw;                               /* the profile */
    int ranks;
    /* what was measured, for the report */
    int n_gemm;
    double gemm_n[MP_CALIB_GEMM_POINTS];    /* square GEMM side */
    double gemm_rate[MP_CALIB_GEMM_POINTS]; /* FLOP/s per rank, slowest rank */
    double copy_bw;                         /* bytes/s per rank, memcpy (read + write) */
    double layernorm_bw;                    /* bytes/s per rank, the executor's LayerNorm */
    int n_coll;
    double coll_bytes[MP_CALIB_COLL_POINTS]; /* all-reduce sizes over every rank */
    double coll_time[MP_CALIB_COLL_POINTS];  /* seconds, best of repeats */
} mp_calibration;

/* Collective over rt->world. name: the profile's name. */
mp_status mp_calibrate(const mp_runtime *rt, const mp_backend *be, const char *name,
                       mp_calibration *out, mp_error *err);

#endif
