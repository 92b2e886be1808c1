/* calibrate.h — measure the machine the executor runs on and describe it as a
 * hardware profile (core/hw.h), so that the cost model and the simulator can
 * predict a run of `megaplan exec` and `exec --compare` can set measured
 * against predicted. Every rank measures at once, as they run under exec
 * (ranks that share cores slow each other down, and the profile should say
 * so); the slowest rank's figure is kept. */
#ifndef MP_EXEC_CALIBRATE_H
#define MP_EXEC_CALIBRATE_H

#include <stdbool.h>

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
    double gemm_call;                       /* seconds per tiny GEMM back to back, slowest rank */
    int gemm_call_side, gemm_call_count;    /* its square side, the calls timed together */
    double copy_bw;                         /* bytes/s per rank, memcpy (read + write) */
    double layernorm_bw;                    /* bytes/s per rank, the executor's LayerNorm */
    int n_coll;
    double coll_bytes[MP_CALIB_COLL_POINTS]; /* all-reduce sizes over every rank */
    double coll_time[MP_CALIB_COLL_POINTS];  /* seconds, best of repeats */
    const char *gemm_kind;                   /* "fp32", or "bf16" on a device */
    double cublas_bf16;                      /* a device: cuBLAS alone, bf16 inputs; else 0 */
} mp_calibration;

/* A device backend's extras (NULL for the CPU): what it is, its memory, and
 * its fp32 GEMM peak (TF32 off) when be's GEMMs are bf16. */
typedef struct mp_calib_device {
    char device[96];    /* e.g. "NVIDIA H200" */
    double memory;      /* bytes per device */
    double fp32_peak;   /* FLOP/s; 0: be's own rate */
    double cublas_bf16; /* FLOP/s of cuBLAS alone on bf16 inputs (8192^3), for the report */
} mp_calib_device;

/* The backend `calibrate --backend NAME` measures: the CPU's (*dev left
 * zeroed, *is_device false), or CUDA's in bf16 with the device's extras.
 * Collective over rt->world. */
mp_status mp_calibrate_backend(const mp_runtime *rt, const char *name, const mp_backend **be,
                               mp_calib_device *dev, bool *is_device, mp_error *err);

/* Bytes of probe buffers one rank allocates and touches (the backend's
 * memory: the host's for the CPU, the device's for a device), whatever the
 * rank count; without the process itself (exec/memory.h's baseline). */
double mp_calibrate_rank_bytes(bool device);

/* Collective over rt->world. name: the profile's name. */
mp_status mp_calibrate(const mp_runtime *rt, const mp_backend *be, const char *name,
                       const mp_calib_device *dev, mp_calibration *out, mp_error *err);

#endif
