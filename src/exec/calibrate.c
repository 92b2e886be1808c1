/* calibrate.c — this machine as a hardware profile (calibrate.h).
 *
 * What the cost model needs of a device, measured on every rank at once:
 *   peak_flops, gemm_efficiency  the backend's GEMM on square sizes (CPU:
 *                                 16..1024; a device: 256..8192): the fastest
 *                                 rate is the peak, each size's rate over it
 *                                 the efficiency at its FLOPs. On CUDA the
 *                                 curve is the bf16 GEMM's; fp32's peak is
 *                                 measured apart (mp_calib_device)
 *   hbm_bw                        a copy of 64 MiB (CPU) or 1 GiB (device)
 *                                 in the backend's memory (read + write)
 *   memory_efficiency             the executor's own LayerNorm (a memory-bound
 *                                 kernel of the model) against that bandwidth
 *   scale_up latency, bw_per_gpu  the backend's all-reduce over every rank,
 *                                 4 KiB..16 MiB, fitted as t = 2(n-1) latency
 *                                 + 2(n-1)/n bytes / bw (a ring)
 *   gemm_call_overhead            a tiny GEMM (side 8 on the CPU, 128 on a
 *                                 device) called 64 times back to back: what
 *                                 one more call costs (the profile field's
 *                                 meaning, docs/cost-model.md §5)
 *   memory                        physical memory / ranks
 * The ranks form one node and one scale-up domain; nothing runs on a
 * scale-out tier, which gets the same figures. */
#include "exec/calibrate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec/kernels.h"

/* Keep measuring a size until this much time has passed (and at least
 * MIN_REPEATS times): the machine is noisy, the best repeat is kept. */
#define MEASURE_SECONDS 0.05
#define MIN_REPEATS 3

static const int cpu_sides[MP_CALIB_GEMM_POINTS] = {16, 32, 64, 128, 256, 512, 768, 1024};
static const int device_sides[MP_CALIB_GEMM_POINTS] = {256,  512,  1024, 2048,
                                                       3072, 4096, 6144, 8192};

/* One measured operation and its arguments. */
typedef struct probe_op {
    int kind; /* OP_GEMM, OP_GEMM_CALLS, OP_COPY, OP_LAYERNORM */
    int calls; /* OP_GEMM_CALLS: back-to-back GEMMs of side n */
    const mp_backend *be;
    int n, rows, h;
    size_t bytes;
    float *a, *b, *c, *xhat, *rstd;
    const float *x, *w, *bias;
    char *dst;
    const char *src;
} probe_op;

enum { OP_GEMM, OP_GEMM_CALLS, OP_COPY, OP_LAYERNORM };

/* The tiny GEMM of the per-call floor, and how many run back to back. */
#define CALL_SIDE_CPU 8
#define CALL_SIDE_DEVICE 128
#define FLOOR_CALLS 64

static void run_op(const probe_op *o)
{
    switch (o->kind) {
    case OP_GEMM:
        o->be->gemm(MP_REAL32, false, false, o->n, o->n, o->n, 1.0, o->a, o->n, o->b, o->n, 0.0,
                    o->c, o->n);
        break;
    case OP_GEMM_CALLS:
        for (int i = 0; i < o->calls; i++)
            o->be->gemm(MP_REAL32, false, false, o->n, o->n, o->n, 1.0, o->a, o->n, o->b, o->n,
                        0.0, o->c, o->n);
        break;
    case OP_COPY:
        o->be->copy(o->dst, o->src, o->bytes, MP_COPY_D2D);
        break;
    default:
        o->be->layernorm_forward(MP_REAL32, o->c, o->xhat, o->rstd, o->x, o->w, o->bias, o->rows,
                                 o->h, 1e-5, false);
        break;
    }
}

/* Best seconds of one run of o, every rank running its own at once. */
static double best_time(const mp_runtime *rt, const probe_op *o)
{
    MPI_Barrier(rt->world.comm);
    double best = INFINITY, spent = 0;
    for (int rep = 0; rep < MIN_REPEATS || spent < MEASURE_SECONDS; rep++) {
        double t0 = o->be->now();
        run_op(o);
        double t = o->be->now() - t0;
        spent += t;
        best = t < best ? t : best;
    }
    return best;
}

static mp_status time_allreduce(const mp_runtime *rt, const mp_backend *be, float *buf,
                                size_t count, double *best_out, mp_error *err)
{
    double best = INFINITY, spent = 0;
    for (int rep = 0; rep < MIN_REPEATS || spent < MEASURE_SECONDS; rep++) {
        MPI_Barrier(rt->world.comm);
        double t0 = be->now();
        mp_status st = be->allreduce(&rt->world, MP_REAL32, buf, count, MP_RED_SUM, err);
        if (st)
            return st;
        double t = be->now() - t0;
        /* every rank must take the same number of repeats: agree on the time spent */
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, rt->world.comm);
        spent += t;
        best = t < best ? t : best;
    }
    *best_out = best;
    return MP_OK;
}

/* v to 4 significant digits: a measurement is not better than that here,
 * and the profile file then reads "89.95 GFLOP/s", not 17 digits. */
static double sig4(double v)
{
    if (!(v > 0) || !isfinite(v))
        return v;
    char text[32]; /* the decimal rounding, so the value prints as it reads */
    snprintf(text, sizeof text, "%.4g", v);
    return strtod(text, NULL);
}

/* The slowest rank's figure (smallest rate) or time (largest). */
static double slowest_rate(const mp_runtime *rt, double x)
{
    MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_DOUBLE, MPI_MIN, rt->world.comm);
    return x;
}

static void cpu_model(char *out, size_t size)
{
    snprintf(out, size, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *v = strchr(line, ':');
            if (v) {
                v++;
                while (*v == ' ')
                    v++;
                v[strcspn(v, "\n")] = 0;
                snprintf(out, size, "%.100s", v);
            }
            break;
        }
    fclose(f);
}

/* n floats of pattern i -> ((i * mul % mod) - off) / div, made on the host
 * and put in the backend's memory (dst). false: out of memory. */
static bool fill(const mp_backend *be, float *dst, size_t n, size_t mul, size_t mod, float off,
                 float div)
{
    float *h = malloc((n ? n : 1) * sizeof *h);
    if (!h)
        return false;
    for (size_t i = 0; i < n; i++)
        h[i] = mod ? ((float)(i * mul % mod) - off) / div : off;
    be->copy(dst, h, n * sizeof *h, MP_COPY_H2D);
    free(h);
    return true;
}

/* The probes' buffer sizes, one place for mp_calibrate and the memory check. */
typedef struct calib_sizes {
    int big;           /* the largest GEMM side: a, b, c are big^2 floats */
    size_t copy_bytes; /* src and dst each */
    int ln_rows, ln_h; /* x, y, xhat: rows x h floats; rstd rows; gamma, beta h */
    size_t coll_max;   /* the all-reduce buffer */
} calib_sizes;

static calib_sizes sizes_for(bool device)
{
    const int *sides = device ? device_sides : cpu_sides;
    return (calib_sizes){.big = sides[MP_CALIB_GEMM_POINTS - 1],
                         .copy_bytes = (size_t)(device ? 1024 : 64) << 20,
                         .ln_rows = device ? 65536 : 8192,
                         .ln_h = 1024,
                         .coll_max = (size_t)16 << 20};
}

double mp_calibrate_rank_bytes(bool device)
{
    calib_sizes z = sizes_for(device);
    double ln = (double)z.ln_rows * z.ln_h;
    double bufs = 3.0 * z.big * z.big * sizeof(float) + 2.0 * (double)z.copy_bytes +
                  3.0 * ln * sizeof(float) + (double)z.ln_rows * sizeof(float) +
                  2.0 * z.ln_h * sizeof(float) + (double)z.coll_max;
    return bufs;
}

mp_status mp_calibrate(const mp_runtime *rt, const mp_backend *be, const char *name,
                       const mp_calib_device *dev, mp_calibration *out, mp_error *err)
{
    memset(out, 0, sizeof *out);
    int n = rt->world.size;
    out->ranks = n;
    out->gemm_kind = dev ? be->precision : "fp32";
    out->cublas_bf16 = dev ? dev->cublas_bf16 : 0;
    mp_status st = MP_OK;
    const int *gemm_sides = dev ? device_sides : cpu_sides;
    calib_sizes z = sizes_for(dev != NULL);
    int big = z.big, ln_rows = z.ln_rows, ln_h = z.ln_h;
    size_t copy_bytes = z.copy_bytes, coll_max = z.coll_max;
    float *a = be->alloc((size_t)big * big * sizeof *a);
    float *b = be->alloc((size_t)big * big * sizeof *b);
    float *c = be->alloc((size_t)big * big * sizeof *c);
    char *src = be->alloc(copy_bytes), *dst = be->alloc(copy_bytes);
    size_t ln = (size_t)ln_rows * ln_h;
    float *x = be->alloc(ln * sizeof *x), *y = be->alloc(ln * sizeof *y);
    float *xh = be->alloc(ln * sizeof *xh), *rs = be->alloc((size_t)ln_rows * sizeof *rs);
    float *gw = be->alloc((size_t)ln_h * sizeof *gw), *gb = be->alloc((size_t)ln_h * sizeof *gb);
    float *coll = be->alloc(coll_max);
    int ok = a && b && c && src && dst && x && y && xh && rs && gw && gb && coll;
    /* src, gb and coll stay as allocated: zeros */
    ok = ok && fill(be, a, (size_t)big * big, 7, 13, 6, 8) &&
         fill(be, b, (size_t)big * big, 5, 11, 5, 8) && fill(be, x, ln, 3, 17, 8, 4) &&
         fill(be, gw, (size_t)ln_h, 0, 0, 1, 1);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, rt->world.comm);
    if (!ok) {
        st = mp_error_set(err, MP_ENOMEM, NULL, 0, 0, NULL, "out of memory for the calibration");
        goto done;
    }

    /* GEMM: the peak is the fastest size; the curve each size's share of it */
    double peak = 0;
    for (int i = 0; i < MP_CALIB_GEMM_POINTS; i++) {
        int s = gemm_sides[i];
        double flops = 2.0 * s * s * s;
        probe_op op = {.kind = OP_GEMM, .be = be, .n = s, .a = a, .b = b, .c = c};
        double rate = slowest_rate(rt, flops / best_time(rt, &op));
        out->gemm_n[i] = s;
        out->gemm_rate[i] = rate;
        peak = rate > peak ? rate : peak;
    }
    out->n_gemm = MP_CALIB_GEMM_POINTS;
    /* the per-call floor: the slowest rank's calls per second, inverted */
    probe_op calls = {.kind = OP_GEMM_CALLS, .be = be, .n = dev ? CALL_SIDE_DEVICE : CALL_SIDE_CPU,
                      .calls = FLOOR_CALLS, .a = a, .b = b, .c = c};
    out->gemm_call = 1.0 / slowest_rate(rt, FLOOR_CALLS / best_time(rt, &calls));
    out->gemm_call_side = calls.n;
    out->gemm_call_count = calls.calls;
    probe_op copy = {.kind = OP_COPY, .be = be, .dst = dst, .src = src, .bytes = copy_bytes};
    out->copy_bw = slowest_rate(rt, 2.0 * (double)copy_bytes / best_time(rt, &copy));
    /* LayerNorm reads x and writes its output and x-hat (and a row's stats) */
    double ln_bytes = 3.0 * (double)ln * sizeof(float) + 8.0 * ln_rows;
    probe_op norm = {.kind = OP_LAYERNORM, .be = be, .c = y, .xhat = xh, .rstd = rs, .x = x,
                     .w = gw, .bias = gb, .rows = ln_rows, .h = ln_h};
    out->layernorm_bw = slowest_rate(rt, ln_bytes / best_time(rt, &norm));

    /* all-reduce over every rank, fitted as a ring: t = A + B bytes */
    double latency = 1e-6, bw = out->copy_bw;
    if (n > 1) {
        double sx = 0, sy = 0, sxx = 0, sxy = 0;
        int k = 0;
        for (size_t bytes = 4096; bytes <= coll_max && k < MP_CALIB_COLL_POINTS; bytes *= 4, k++) {
            double t;
            if ((st = time_allreduce(rt, be, coll, bytes / sizeof(float), &t, err)))
                goto done;
            out->coll_bytes[k] = (double)bytes;
            out->coll_time[k] = t;
            sx += (double)bytes;
            sy += t;
            sxx += (double)bytes * (double)bytes;
            sxy += (double)bytes * t;
        }
        out->n_coll = k;
        double B = (k * sxy - sx * sy) / (k * sxx - sx * sx), A = (sy - B * sx) / k;
        double steps = 2.0 * (n - 1);
        if (A > 0)
            latency = A / steps;
        if (B > 0)
            bw = steps / n / B;
    }

    peak = sig4(peak);
    latency = sig4(latency);
    bw = sig4(bw);
    mp_hw *hw = &out->hw;
    snprintf(hw->name, sizeof hw->name, "%s", name && *name ? name : "cpu-local");
    char cpu[128];
    cpu_model(cpu, sizeof cpu);
    snprintf(hw->description, sizeof hw->description,
             "calibrated by megaplan calibrate: %d rank%s on %.60s (%s backend, %s)", n,
             n == 1 ? "" : "s", dev ? dev->device : cpu, dev ? "CUDA" : "CPU",
             dev ? "bf16 GEMMs" : "fp32");
    double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    hw->memory = phys > 0 ? floor(phys / n / 1048576.0) * 1048576.0 : 1073741824.0; /* whole MiB */
    if (dev && dev->memory > 0)
        hw->memory = floor(dev->memory / 1048576.0) * 1048576.0;
    hw->hbm_bw = sig4(out->copy_bw);
    /* the CPU backend computes in fp32 whatever the plan's precision; on a
     * device the curve is bf16's and fp32 (TF32 off) was measured apart */
    hw->peak_flops[MP_DTYPE_FP32] = hw->peak_flops[MP_DTYPE_TF32] =
        dev && dev->fp32_peak > 0 ? sig4(dev->fp32_peak) : peak;
    hw->peak_flops[MP_DTYPE_BF16] = hw->peak_flops[MP_DTYPE_FP16] = peak;
    hw->gemm_efficiency.n = MP_CALIB_GEMM_POINTS;
    for (int i = 0; i < MP_CALIB_GEMM_POINTS; i++) {
        double s = out->gemm_n[i];
        hw->gemm_efficiency.x[i] = 2.0 * s * s * s;
        double e = sig4(out->gemm_rate[i] / peak);
        hw->gemm_efficiency.y[i] = e > 1 ? 1 : e > 1e-6 ? e : 1e-6;
    }
    double me = out->layernorm_bw / out->copy_bw;
    hw->memory_efficiency = me > 1 ? 1 : me < 1e-3 ? 1e-3 : sig4(me);
    hw->attention_efficiency = 1; /* read only with flash attention, which this backend lacks */
    hw->gpus_per_node = n;
    hw->scale_up = (mp_net_tier){.gpus_per_domain = n, .bw_per_gpu = bw, .latency = latency,
                                 .efficiency = 1, .partial_node_efficiency = 1};
    hw->scale_out = hw->scale_up;
    hw->scale_out.gpus_per_domain = 0;
    hw->runtime_reserve = 0;
    hw->kernel_overhead = dev ? 5e-6 : 0; /* a CPU "kernel" is a function call; a launch ~5 us */
    hw->gemm_call_overhead = sig4(out->gemm_call);
    hw->flash_attention = false;
    st = mp_hw_finish(hw, err);
done:;
    void *bufs[] = {a, b, c, src, dst, x, y, xh, rs, gw, gb, coll};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        if (bufs[i])
            be->free(bufs[i]);
    return st;
}
