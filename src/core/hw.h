/* hw.h — a hardware profile: one accelerator type and the network around it.
 * All quantities are SI base units: bytes, bytes/s, FLOP/s, seconds. Files may
 * write units ("80 GiB", "450 GB/s", "312 TFLOP/s", "2 us"); core/units.c parses
 * them. Every number in each hwprofiles/ YAML file carries its source in a comment. */
#ifndef MP_HW_H
#define MP_HW_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "core/model.h"

typedef enum { MP_DTYPE_FP32, MP_DTYPE_TF32, MP_DTYPE_BF16, MP_DTYPE_FP16, MP_DTYPE_FP8, MP_DTYPE_COUNT } mp_dtype;
const char *mp_dtype_name(mp_dtype d);

/* A monotone curve y(x) given by points, interpolated linearly in log(x),
 * clamped at the ends. Used for GEMM efficiency as a function of a GEMM's
 * size and for collective efficiency as a function of message bytes. */
#define MP_CURVE_MAX 16
typedef struct mp_curve {
    int n;
    double x[MP_CURVE_MAX];
    double y[MP_CURVE_MAX];
} mp_curve;
double mp_curve_eval(const mp_curve *c, double x);

/* One tier of the network. Tier 0 is the scale-up domain (NVLink / NVSwitch),
 * tier 1 the scale-out fabric (InfiniBand / RoCE). */
typedef struct mp_net_tier {
    int64_t gpus_per_domain; /* GPUs that reach each other on this tier (8 per DGX; 72 for NVL72) */
    double bw_per_gpu;       /* bytes/s per GPU per direction */
    double latency;          /* seconds per message / ring step */
    double efficiency;       /* fraction of bw_per_gpu a large collective achieves */
    int64_t nics_per_node;   /* scale-out tier: NICs per node (shared by the node's groups) */
    double partial_node_efficiency; /* scale-out tier: fraction of the bandwidth a collective reaches
                                       when its group holds more than one but not all of each
                                       node's GPUs (NCCL ring placement over shared NICs; fitted,
                                       docs/cost-model.md §5). 1 when absent from a file; 0 (a
                                       struct built in code) reads as 1 */
} mp_net_tier;

typedef struct mp_hw {
    char name[MP_NAME_MAX];
    char description[160];
    double memory;                       /* bytes of device memory per GPU */
    double hbm_bw;                       /* bytes/s */
    double peak_flops[MP_DTYPE_COUNT];   /* dense FLOP/s per dtype (0 = unsupported) */
    mp_curve gemm_efficiency;            /* x: FLOPs of one GEMM, y: fraction of peak */
    double memory_efficiency;            /* fraction of hbm_bw memory-bound kernels reach */
    double attention_efficiency;         /* fraction of peak for the attention core (flash) */
    int64_t gpus_per_node;
    mp_net_tier scale_up;                /* tier 0 */
    mp_net_tier scale_out;               /* tier 1 */
    double runtime_reserve;              /* bytes per GPU the CUDA context, NCCL and allocator take */
    double kernel_overhead;              /* seconds of launch/sync overhead per kernel */
    double gemm_call_overhead;           /* seconds one more cuBLAS GEMM call costs on the stream
                                            beyond its FLOPs (a tiny product's time, measured);
                                            charged per split GEMM of TE's userbuffers overlap
                                            (docs/cost-model.md §5); 0 when absent: none */
    bool flash_attention;                /* software stack fuses attention (FlashAttention/cuDNN);
                                            false: unfused QK^T, softmax, dropout, AV (Megatron 2021-22,
                                            Megatron-DeepSpeed); YAML key flash_attention (cost model) */
    bool mxfp8;                          /* tensor cores run MXFP8 (32-element blocks with E8M0
                                            scales): Blackwell and later; fp8_recipe mxfp8 needs it */
    bool fp8_any_layout;                 /* FP8 GEMMs take either operand transposed (Blackwell);
                                            false: only the TN layout (Hopper), so Transformer
                                            Engine keeps a transposed FP8 copy of each per-tensor
                                            scaled operand (fp8.c). YAML fp8_any_layout */
    /* Optional constants of the cost model, each fitted or sourced in the
     * profile that sets it (docs/cost-model.md); absent, each is 0, its
     * physically neutral value: */
    double collective_local_pass;        /* all-reduce: extra passes of the buffer through the
                                            GPU (reduction, copies), as a fraction of the buffer
                                            over the scale-up link rate; all-gather and
                                            reduce-scatter take half. YAML collective_local_pass */
    double allocator_fragmentation;      /* fraction of the activation bytes the caching
                                            allocator holds on top of them */
    double attention_half_rate_keys;     /* keys per fused-attention call at which the call runs
                                            at half its long-sequence rate (0: no length effect) */
    double attention_efficiency_fused;   /* the same for cuDNN's fused attention (Transformer
                                            Engine's FusedAttention; 0: the profile gives none,
                                            training.attention_backend auto runs flash) */
    double attention_half_rate_keys_fused; /* attention_half_rate_keys of cuDNN's fused
                                            attention (0: attention_half_rate_keys) */
    double attention_query_tile;         /* query rows one CTA of cuDNN's fused attention
                                            kernel owns (0: 128) */
    double p2p_host_kernels;             /* host work of one pipeline p2p exchange, in kernel
                                            launches: the schedule's send/receive bookkeeping
                                            (Megatron's p2p_communicate, DeepSpeed's pipeline
                                            instructions) around the NCCL call */
    double sm_count;                     /* streaming multiprocessors of one GPU; with the
                                            counts below, the share of them a communication
                                            kernel takes from compute it overlaps
                                            (docs/cost-model.md, "SM contention"). YAML sm_count */
    double gemm_tile_m, gemm_tile_n;     /* the largest CTA tile (output rows x columns) cuBLAS
                                            uses on this GPU; with sm_count, GEMMs pay tile and
                                            wave quantisation (docs/cost-model.md §4, "GEMM
                                            shape"). YAML gemm_tile.m/n; 0: FLOPs alone */
    double nccl_ctas;                    /* CTAs (one per SM) an NCCL collective or all-to-all
                                            kernel occupies on this system: its channel count.
                                            YAML nccl_ctas; 0: no contention of NCCL kernels */
    double matmul_achievable;            /* measured maximum achievable BF16 matmul rate of this
                                            GPU (FLOP/s, the best shape of a brute-force search);
                                            YAML matmul_achievable */
    double curve_matmul_efficiency;      /* that measurement over the BF16 peak on the GPU the
                                            gemm_efficiency curve was fitted on: with both set,
                                            the curve is scaled by (matmul_achievable / bf16
                                            peak) / this (docs/cost-model.md §4) */
    double matmul_achievable_fp8_split;  /* measured maximum achievable FP8 matmul rate with the
                                            split (FP32-promoted) accumulator, cuBLASLt's
                                            FAST_ACCUM off (FLOP/s): what Transformer Engine's
                                            input- and weight-gradient FP8 GEMMs run on Hopper;
                                            with matmul_achievable set, those GEMMs run at this
                                            over the FP8 peak relative to the BF16 ratio
                                            (docs/cost-model.md §13). YAML
                                            matmul_achievable_fp8_split; 0: no penalty */
    double mxfp8_gemm_rate;              /* an MXFP8 (block-scaled) GEMM's measured rate over a
                                            per-tensor-scaled FP8 GEMM's of the same shapes on
                                            this GPU (fraction): the block-scaled MMA's scale
                                            loads (docs/cost-model.md §13). YAML
                                            mxfp8_gemm_rate; 0: the same rate */
    double error_band_low, error_band_high; /* range of predicted/measured - 1 on the held-out
                                            rows of this hardware class (docs/validation.md);
                                            YAML error_band.low/high; both 0: no band known */
    double moe_error_band_low, moe_error_band_high; /* the same over the held-out mixture-of-
                                            experts rows of this class (the pooled MoE rows of
                                            every class where it has none): the band of plans
                                            of a model with routed experts (planner/band.h).
                                            YAML moe_error_band.low/high; both 0: MoE plans
                                            get no band */
    /* What an hour of the hardware costs and what it draws, for choosing
     * hardware by cost and energy (search/hwchoice.h). 0 = not known. */
    double price_per_gpu_hour;           /* USD per GPU-hour, list price (dated, sourced in the file) */
    char price_date[16];                 /* when that price was read, "YYYY-MM" */
    double gpu_watts;                    /* GPU board power at full load (TDP), W */
    double node_watts;                   /* the rest of a node at full load (CPUs, NICs, switches,
                                            fans), W per node of gpus_per_node GPUs */
    /* A field added here must be added to the field table in core/hw.c so
     * files, overrides and writers see it. */
} mp_hw;

/* Checks a profile read from a file or overridden: positive sizes, efficiencies
 * in (0, 1], curves sorted, ... */
mp_status mp_hw_finish(mp_hw *hw, mp_error *err);

/* Built-in profiles: the YAML files of hwprofiles/ compiled into the binary.
 * Lookup by name ("dgx-a100", "a100-4xhdr", "dgx-h100", "h200", "h800", "b200",
 * "gb200-nvl72").
 * Returns MP_EINPUT when unknown. */
mp_status mp_hw_preset(const char *name, mp_hw *out, mp_error *err);
int mp_hw_preset_count(void);
const char *mp_hw_preset_name(int index);

/* Sets one field by its dotted YAML path from a string with optional units,
 * e.g. ("scale_out.bw_per_gpu", "25 GB/s"). Used for --hw-set KEY=VALUE. */
mp_status mp_hw_set_field(mp_hw *hw, const char *path, const char *value, mp_error *err);

#endif
