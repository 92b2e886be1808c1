#include "core/hw.h"

#include <math.h>
#include <stddef.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "core/embedded.h"
#include "core/io.h"
#include "core/tables.h"

static const char *const dtype_names[] = {"fp32", "tf32", "bf16", "fp16", "fp8"};

const char *mp_dtype_name(mp_dtype d)
{
    return (unsigned)d < MP_DTYPE_COUNT ? dtype_names[d] : "?";
}

double mp_curve_eval(const mp_curve *c, double x)
{
    if (!c || c->n <= 0)
        return 1.0; /* no curve: no derating */
    int n = c->n < MP_CURVE_MAX ? c->n : MP_CURVE_MAX;
    if (!(x > c->x[0]) || n == 1)
        return c->y[0];
    if (x >= c->x[n - 1])
        return c->y[n - 1];
    for (int i = 1; i < n; i++) {
        if (x <= c->x[i]) {
            /* linear in log(x): GEMM efficiency grows roughly per decade of size */
            double t = (log(x) - log(c->x[i - 1])) / (log(c->x[i]) - log(c->x[i - 1]));
            return c->y[i - 1] + t * (c->y[i] - c->y[i - 1]);
        }
    }
    return c->y[n - 1];
}

#define BIG 1e18 /* beyond any real device: refuse as absurd */
/* Below any real device too: a tiny bandwidth, rate or efficiency divides
 * into times of 1e300 s or infinity, printed as garbage. */
#define MIN_MEMORY 1048576.0 /* 1 MiB */
#define MIN_BW 1e6           /* 1 MB/s */
#define MIN_FRACTION 1e-3    /* of peak or of bandwidth */
#define MIN_GEMM_FRACTION 1e-6 /* tiny GEMMs really are slow: fitted curves go to 0.001 */
#define MIN_FLOPS 1e9        /* 1 GFLOP/s, when a data type is supported at all */

#define D(p, member, unitk, lo, open, hi, req)                                                \
    {.path = p, .type = MP_FT_DOUBLE, .offset = offsetof(mp_hw, member), .unit = unitk,       \
     .min = lo, .min_open = open, .max = hi, .required = req}
#define I(p, member, lo, hi, req)                                                             \
    {.path = p, .type = MP_FT_INT, .offset = offsetof(mp_hw, member), .min = lo, .max = hi,   \
     .required = req}

/* Every field of mp_hw, in file order. A field added to mp_hw must be added
 * here so profiles, --hw-set and the writers all see it. */
static const mp_field hw_fields[] = {
    {.path = "name", .type = MP_FT_STRING, .offset = offsetof(mp_hw, name), .size = MP_NAME_MAX,
     .required = true},
    {.path = "description", .type = MP_FT_STRING, .offset = offsetof(mp_hw, description),
     .size = sizeof(((mp_hw *)0)->description)},
    D("memory", memory, MP_UNIT_BYTES, MIN_MEMORY, false, 1e15, true),
    D("hbm_bw", hbm_bw, MP_UNIT_BANDWIDTH, MIN_BW, false, 1e16, true),
    D("peak_flops.fp32", peak_flops[MP_DTYPE_FP32], MP_UNIT_FLOPS, 0, false, BIG, false),
    D("peak_flops.tf32", peak_flops[MP_DTYPE_TF32], MP_UNIT_FLOPS, 0, false, BIG, false),
    D("peak_flops.bf16", peak_flops[MP_DTYPE_BF16], MP_UNIT_FLOPS, 0, false, BIG, false),
    D("peak_flops.fp16", peak_flops[MP_DTYPE_FP16], MP_UNIT_FLOPS, 0, false, BIG, false),
    D("peak_flops.fp8", peak_flops[MP_DTYPE_FP8], MP_UNIT_FLOPS, 0, false, BIG, false),
    {.path = "gemm_efficiency", .type = MP_FT_CURVE, .offset = offsetof(mp_hw, gemm_efficiency),
     .min = MIN_GEMM_FRACTION, .max = 1, .required = true},
    D("memory_efficiency", memory_efficiency, MP_UNIT_NONE, MIN_FRACTION, false, 1, true),
    D("attention_efficiency", attention_efficiency, MP_UNIT_NONE, MIN_FRACTION, false, 1, true),
    I("gpus_per_node", gpus_per_node, 1, 1 << 16, true),
    I("scale_up.gpus_per_domain", scale_up.gpus_per_domain, 1, 1 << 20, true),
    D("scale_up.bw_per_gpu", scale_up.bw_per_gpu, MP_UNIT_BANDWIDTH, MIN_BW, false, 1e16, true),
    D("scale_up.latency", scale_up.latency, MP_UNIT_TIME, 0, false, 1, true),
    D("scale_up.efficiency", scale_up.efficiency, MP_UNIT_NONE, MIN_FRACTION, false, 1, true),
    I("scale_up.nics_per_node", scale_up.nics_per_node, 0, 1024, false),
    /* optional, 1 when absent; the tiers share one struct, but only scale_out's
     * is read (a group inside one scale-up domain uses no NICs) */
    D("scale_up.partial_node_efficiency", scale_up.partial_node_efficiency, MP_UNIT_NONE,
      MIN_FRACTION, false, 1, false),
    I("scale_out.gpus_per_domain", scale_out.gpus_per_domain, 0, 1 << 24, true),
    D("scale_out.bw_per_gpu", scale_out.bw_per_gpu, MP_UNIT_BANDWIDTH, MIN_BW, false, 1e16, true),
    D("scale_out.latency", scale_out.latency, MP_UNIT_TIME, 0, false, 1, true),
    D("scale_out.efficiency", scale_out.efficiency, MP_UNIT_NONE, MIN_FRACTION, false, 1, true),
    I("scale_out.nics_per_node", scale_out.nics_per_node, 0, 1024, false),
    /* optional, 1 when absent (mp_hw_decode): no derating of partial-node groups */
    D("scale_out.partial_node_efficiency", scale_out.partial_node_efficiency, MP_UNIT_NONE,
      MIN_FRACTION, false, 1, false),
    D("runtime_reserve", runtime_reserve, MP_UNIT_BYTES, 0, false, 1e15, true),
    D("kernel_overhead", kernel_overhead, MP_UNIT_TIME, 0, false, 1, true),
    D("gemm_call_overhead", gemm_call_overhead, MP_UNIT_TIME, 0, false, 1, false),
    /* optional, false when absent: the attention core runs unfused */
    {.path = "flash_attention", .type = MP_FT_BOOL, .offset = offsetof(mp_hw, flash_attention)},
    {.path = "mxfp8", .type = MP_FT_BOOL, .offset = offsetof(mp_hw, mxfp8)},
    {.path = "fp8_any_layout", .type = MP_FT_BOOL, .offset = offsetof(mp_hw, fp8_any_layout)},
    /* optional, 0 when absent (mp_hw in hw.h says what 0 means) */
    D("collective_local_pass", collective_local_pass, MP_UNIT_NONE, 0, false, 10, false),
    D("allocator_fragmentation", allocator_fragmentation, MP_UNIT_NONE, 0, false, 1, false),
    D("attention_half_rate_keys", attention_half_rate_keys, MP_UNIT_NONE, 0, false, 1e7, false),
    D("attention_efficiency_fused", attention_efficiency_fused, MP_UNIT_NONE, 0, false, 1, false),
    D("attention_half_rate_keys_fused", attention_half_rate_keys_fused, MP_UNIT_NONE, 0, false, 1e7,
      false),
    D("attention_query_tile", attention_query_tile, MP_UNIT_NONE, 0, false, 4096, false),
    D("p2p_host_kernels", p2p_host_kernels, MP_UNIT_NONE, 0, false, 1000, false),
    D("sm_count", sm_count, MP_UNIT_NONE, 0, false, 1e5, false),
    D("gemm_tile.m", gemm_tile_m, MP_UNIT_NONE, 0, false, 4096, false),
    D("gemm_tile.n", gemm_tile_n, MP_UNIT_NONE, 0, false, 4096, false),
    D("nccl_ctas", nccl_ctas, MP_UNIT_NONE, 0, false, 1e5, false),
    D("matmul_achievable", matmul_achievable, MP_UNIT_FLOPS, 0, false, BIG, false),
    D("curve_matmul_efficiency", curve_matmul_efficiency, MP_UNIT_NONE, 0, false, 1, false),
    D("matmul_achievable_fp8_split", matmul_achievable_fp8_split, MP_UNIT_FLOPS, 0, false, BIG,
      false),
    D("mxfp8_gemm_rate", mxfp8_gemm_rate, MP_UNIT_NONE, 0, false, 1, false),
    D("error_band.low", error_band_low, MP_UNIT_NONE, -0.99, false, 10, false),
    D("error_band.high", error_band_high, MP_UNIT_NONE, -0.99, false, 10, false),
    D("moe_error_band.low", moe_error_band_low, MP_UNIT_NONE, -0.99, false, 10, false),
    D("moe_error_band.high", moe_error_band_high, MP_UNIT_NONE, -0.99, false, 10, false),
    /* optional, 0 when absent: cost and energy are then not known */
    D("price_per_gpu_hour", price_per_gpu_hour, MP_UNIT_NONE, 0, false, 1e4, false),
    {.path = "price_date", .type = MP_FT_STRING, .offset = offsetof(mp_hw, price_date),
     .size = sizeof(((mp_hw *)0)->price_date)},
    D("power.gpu_watts", gpu_watts, MP_UNIT_NONE, 0, false, 1e5, false),
    D("power.node_watts", node_watts, MP_UNIT_NONE, 0, false, 1e7, false),
};

const mp_field *mp_hw_field_table(size_t *n)
{
    *n = sizeof hw_fields / sizeof hw_fields[0];
    return hw_fields;
}

mp_status mp_hw_finish(mp_hw *hw, mp_error *err)
{
    size_t n;
    const mp_field *tab = mp_hw_field_table(&n);
    mp_status st = mp_fields_check(tab, n, hw, "", err);
    if (st != MP_OK)
        return st;
    if (!hw->name[0])
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "name", "missing");
    /* shown beside the price as when it was read: YYYY-MM, as the profiles
     * and docs/choosing.md write it ("yesterday" and 2026-13 were taken) */
    const char *d = hw->price_date;
    if (d[0] && !(strlen(d) == 7 && isdigit((unsigned char)d[0]) &&
                  isdigit((unsigned char)d[1]) && isdigit((unsigned char)d[2]) &&
                  isdigit((unsigned char)d[3]) && d[4] == '-' &&
                  ((d[5] == '0' && d[6] >= '1' && d[6] <= '9') ||
                   (d[5] == '1' && d[6] >= '0' && d[6] <= '2'))))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "price_date",
                            "expected the month the price was read, YYYY-MM (got '%s')", d);
    if (hw->error_band_low > hw->error_band_high)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "error_band.low",
                            "must not exceed error_band.high");
    if (hw->moe_error_band_low > hw->moe_error_band_high)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "moe_error_band.low",
                            "must not exceed moe_error_band.high");
    if (hw->runtime_reserve >= hw->memory)
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "runtime_reserve",
                            "must be less than memory (%.4g GiB)", hw->memory / 1073741824.0);
    if (hw->nccl_ctas > 0 && !(hw->sm_count > hw->nccl_ctas))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "nccl_ctas",
                            "needs sm_count, and must be less than it (got %.10g of %.10g SMs)",
                            hw->nccl_ctas, hw->sm_count);
    if ((hw->gemm_tile_m > 0 || hw->gemm_tile_n > 0) &&
        !(hw->gemm_tile_m >= 64 && hw->gemm_tile_n >= 64 && hw->sm_count >= 1))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "gemm_tile",
                            "needs m and n of at least 64 and sm_count (got %.10g x %.10g, %.10g SMs)",
                            hw->gemm_tile_m, hw->gemm_tile_n, hw->sm_count);
    for (int d = 0; d < MP_DTYPE_COUNT; d++)
        if (hw->peak_flops[d] > 0 && hw->peak_flops[d] < MIN_FLOPS) {
            char field[32];
            snprintf(field, sizeof field, "peak_flops.%s", mp_dtype_name((mp_dtype)d));
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, field,
                                "absurdly small: at least 1 GFLOP/s, or 0 for unsupported "
                                "(got %.4g FLOP/s)", hw->peak_flops[d]);
        }
    /* optional rates and fractions, 0 when absent. The measured GEMM
     * ceilings divide FLOPs as the peaks do: 1e-308 gave an estimate of
     * "inf -nan%" and a search of -nan steps. The fractions scale a GEMM's
     * rate: 1e-300 gave an MXFP8 step of 10^300 s, and a curve scaled
     * 10^300 times up to its cap. */
    const struct {
        const char *field, *least, *unit;
        double v, min;
    } floors[] = {
        {"matmul_achievable", "1 GFLOP/s", " FLOP/s", hw->matmul_achievable, MIN_FLOPS},
        {"matmul_achievable_fp8_split", "1 GFLOP/s", " FLOP/s", hw->matmul_achievable_fp8_split,
         MIN_FLOPS},
        {"mxfp8_gemm_rate", "0.001", "", hw->mxfp8_gemm_rate, MIN_FRACTION},
        {"curve_matmul_efficiency", "0.001", "", hw->curve_matmul_efficiency, MIN_FRACTION}};
    for (size_t i = 0; i < sizeof floors / sizeof floors[0]; i++)
        if (floors[i].v > 0 && floors[i].v < floors[i].min)
            return mp_error_set(err, MP_EINPUT, NULL, 0, 0, floors[i].field,
                                "absurdly small: at least %s, or 0 for none (got %.4g%s)",
                                floors[i].least, floors[i].v, floors[i].unit);
    if (!(hw->peak_flops[MP_DTYPE_BF16] > 0 || hw->peak_flops[MP_DTYPE_FP16] > 0 ||
          hw->peak_flops[MP_DTYPE_FP32] > 0))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "peak_flops",
                            "needs a positive rate for bf16, fp16 or fp32");
    return MP_OK;
}

int mp_hw_preset_count(void)
{
    return mp_hwprofile_count;
}

const char *mp_hw_preset_name(int index)
{
    return index >= 0 && index < mp_hwprofile_count ? mp_hwprofile_files[index].name : NULL;
}

mp_status mp_hw_preset(const char *name, mp_hw *out, mp_error *err)
{
    for (int i = 0; i < mp_hwprofile_count; i++) {
        const mp_embedded_file *f = &mp_hwprofile_files[i];
        if (strcmp(f->name, name))
            continue;
        char origin[96];
        snprintf(origin, sizeof origin, "hwprofiles/%s.yaml", f->name);
        return mp_hw_parse_yaml(f->text, f->len, origin, out, err);
    }
    char known[256] = "";
    size_t len = 0;
    for (int i = 0; i < mp_hwprofile_count; i++) {
        int w = snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "",
                         mp_hwprofile_files[i].name);
        if (w < 0 || (size_t)w >= sizeof known - len)
            break;
        len += (size_t)w;
    }
    return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "hw",
                        "unknown hardware profile '%.64s' (known: %s)", name, known);
}

mp_status mp_hw_set_field(mp_hw *hw, const char *path, const char *value, mp_error *err)
{
    size_t n;
    const mp_field *tab = mp_hw_field_table(&n);
    return mp_fields_set_text(tab, n, hw, path, value, err);
}
