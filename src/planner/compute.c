/* compute.c — seconds per micro-batch of each layer item on one GPU
 * (docs/cost-model.md §4).
 *
 * A GEMM takes FLOPs / (peak x efficiency(FLOPs)) plus one kernel launch: the
 * efficiency curve of the profile makes small GEMMs (small h, large t, small
 * micro-batch) slower. Elementwise kernels (norms, bias+GeLU, bias+dropout+
 * residual, softmax, cross entropy, Adam) are memory-bound: bytes moved /
 * (HBM bandwidth x memory efficiency), plus a launch each. The attention core
 * is either one fused (flash) kernel at the profile's attention efficiency,
 * skipping the masked half of a causal score matrix, or - as in Megatron
 * 2021-22 and Megatron-DeepSpeed - two batched GEMMs with the scaled-masked
 * softmax and dropout between them, whose s² score matrix goes through HBM. */
#include <math.h>

#include "planner/cost_internal.h"

double mp_gemm_transfer(const mp_hw *hw)
{
    /* The GEMM curve of a profile without fit rows of its own GPU is another
     * GPU's fit (tools/fit_profile.py's transfer rule): it carries that GPU's
     * ratio of achievable to datasheet rate. A GPU whose datasheet peak is
     * further above what its tensor cores sustain (clocks under the power
     * limit: the datasheet's figure is at boost clock) reaches
     * proportionally less of it. Both ratios are measured the same way (the
     * best BF16 matmul of a brute-force shape search); the tensor cores' FP8
     * rate is twice the BF16 rate per clock on every profiled GPU, so the
     * same ratio holds for FP8 GEMMs (docs/cost-model.md §4). */
    double peak = hw->peak_flops[MP_DTYPE_BF16] > 0.0 ? hw->peak_flops[MP_DTYPE_BF16]
                                                      : hw->peak_flops[MP_DTYPE_FP16];
    if (!(hw->matmul_achievable > 0.0) || !(hw->curve_matmul_efficiency > 0.0) || !(peak > 0.0))
        return 1.0;
    return hw->matmul_achievable / peak / hw->curve_matmul_efficiency;
}

double mp_gemm_efficiency(const mp_hw *hw, double curve_flops)
{
    double eff = mp_curve_eval(&hw->gemm_efficiency, curve_flops) * mp_gemm_transfer(hw);
    if (eff > 1.0)
        eff = 1.0;
    return eff > 0.0 ? eff : 1e-3;
}

double mp_gemm_time(const mp_hw *hw, double peak, double flops)
{
    if (flops <= 0.0)
        return 0.0;
    return flops / (peak * mp_gemm_efficiency(hw, flops));
}

double mp_gemm_grouped_time(const mp_hw *hw, double peak, double dt, double groups, double m,
                            double n, double k)
{
    if (!(groups > 0.0))
        return 0.0;
    /* roofline: a GEMM with a thin dimension (k = h/t for the projection at
     * large t) is bound by moving its operands, not by its FLOPs; the
     * compute side pays its tiles' padding and its last partial wave */
    double compute = groups * mp_gemm_time(hw, peak, 2.0 * m * n * k) /
                     mp_gemm_shape_efficiency(hw, groups, m, n);
    double memory = groups * dt * (m * k + k * n + m * n) / (hw->hbm_bw * hw->memory_efficiency);
    return compute > memory ? compute : memory;
}

double mp_gemm_mnk_time(const mp_hw *hw, double peak, double dt, double m, double n, double k)
{
    return mp_gemm_grouped_time(hw, peak, dt, 1.0, m, n, k);
}

double mp_membound_time(const mp_hw *hw, double bytes, double kernels)
{
    (void)kernels; /* launches are counted per item against the host (mp_host_bound) */
    return bytes / (hw->hbm_bw * hw->memory_efficiency);
}

/* Host time of one eager PyTorch op, measured (tests/data/host): a call
 * from Python with autograd recording 6.8 us (eager_op_overhead.csv,
 * PyTorch issue #41383: y = 2*x, requires_grad), one from C++ (the autograd
 * engine's backward nodes) 1.0 us, and the driver's cuLaunchKernel 3.0 us
 * (cuda_launch.csv, tritonbench PR #1017 on GB200). The profiles'
 * kernel_overhead is the fitted host time of one counted launch of a
 * Megatron layer, which stands for several ops and nn.Module calls (57.2 us
 * against a counted prior of 34.3 us, docs/validation.md "Protocol"); an
 * eager chain that the model counts op by op costs the host its ops. */
#define EAGER_OP_PYTHON_GRAD_S 6.8e-6
#define EAGER_OP_CPP_S 1.0e-6
#define CUDA_LAUNCH_S 3.0e-6

double mp_eager_op_launches(const mp_hw *hw, bool backward)
{
    if (!(hw->kernel_overhead > 0.0))
        return 0.0;
    double op = backward ? EAGER_OP_CPP_S : EAGER_OP_PYTHON_GRAD_S;
    return (op + CUDA_LAUNCH_S) / hw->kernel_overhead;
}

double mp_host_bound(const mp_hw *hw, double gpu, double kernels)
{
    double host = kernels * hw->kernel_overhead;
    return gpu > host ? gpu : host;
}

/* the rate of what is not a linear layer's GEMM (bf16 under fp8: fp8.c) */
static double peak_of(const mp_config *c)
{
    return mp_high_peak(c);
}

double mp_grad_reduce_bytes(const mp_config *c)
{
    if (c->training.grad_reduce_bf16)
        return 2.0; /* main grads in bf16 (Megatron --grad-reduce-in-bf16) */
    return c->training.precision == MP_DTYPE_FP16 ? 2.0 : 4.0;
}

/* Exposed part of a TP collective that Megatron's --tp-comm-overlap pipelines
 * with the adjacent GEMMs in t chunks: one chunk, plus what the GEMMs cannot
 * hide, which is never less than the SMs' share the userbuffers kernels take
 * from those GEMMs while they run (kernel: the forward's or the backward's). */
static double tp_exposed(const mp_config *c, double comm, double gemm, mp_comm_kernel kernel)
{
    if (!c->parallel.tp_overlap || c->parallel.tp <= 1)
        return comm;
    double chunk = comm / (double)c->parallel.tp;
    return chunk + mp_overlap_excess(comm, gemm, mp_comm_sm_share(c, kernel));
}

/* Transformer Engine's userbuffers overlap (--tp-comm-overlap) runs a
 * collective's GEMM as several cuBLAS calls, each on the part of the tensor
 * that has arrived (or is to be sent), so that the transfers of one part run
 * under the GEMM of another (transformer_engine/pytorch/module/base.py,
 * initialize_ub, get_default_config; the C++ split_overlap_ag/_rs of
 * comm_gemm_overlap.cpp): ring_exchange in tp parts, pipeline in num_splits
 * = 4, bulk not split. The default methods: ring_exchange for qkv_fprop,
 * fc1_fprop, proj_dgrad and fc2_dgrad, pipeline for proj_fprop and
 * fc2_fprop, bulk for QKV's and FC1's dgrad and wgrad; NVIDIA's FP8
 * recipes run proj_fprop and fc2_fprop as ring_exchange too (as
 * contention.c reads them). Shape i (compute.c's order: 0 QKV, 1 the
 * projection, 2 FC1, 3 FC2): the calls beyond one in its forward (*fwd) and
 * in its input gradient (*bwd); its weight gradient is one call. */
void mp_ub_split_calls(const mp_config *c, int shape, double *fwd, double *bwd)
{
    *fwd = *bwd = 0.0;
    const mp_parallel *pp = &c->parallel;
    if (!pp->tp_overlap || pp->tp <= 1 || shape < 0 || shape > 3)
        return;
    double ring = (double)pp->tp, pipeline = 4.0;
    bool column = shape == 0 || shape == 2; /* gathered input: qkv_fprop, fc1_fprop */
    if (column) {
        *fwd = ring - 1.0;
        return; /* dgrad and wgrad: bulk */
    }
    *fwd = (mp_fp8_on(c) ? ring : pipeline) - 1.0;
    *bwd = ring - 1.0; /* proj_dgrad, fc2_dgrad */
}

/* One TP "all-reduce" of bytes: an all-reduce, or with SP an all-gather plus
 * a reduce-scatter of the same tensor (Korthikanti 2022: same volume). */
static double tp_collective(const mp_config *c, const mp_group_place *g, double bytes)
{
    if (c->parallel.sp)
        return mp_coll_time(&c->hw, g, MP_COLL_ALLGATHER, bytes) +
               mp_coll_time(&c->hw, g, MP_COLL_REDUCESCATTER, bytes);
    return mp_coll_time(&c->hw, g, MP_COLL_ALLREDUCE, bytes);
}

/* Keys per fused-attention call at which the profile's attention_efficiency
 * holds. A call's fixed work (loading the query tile, the softmax rescaling,
 * writing the output) is amortised over its keys: its rate is
 * kv / (kv + attention_half_rate_keys) of the long-sequence rate (the
 * profile's constant and its source, docs/cost-model.md §4). */
#define ATTN_REFERENCE_KEYS 4096.0

/* Key tile of the fused kernels: FlashAttention-2 and cuDNN's fused
 * attention step over keys in blocks of 128 (64 at large head dims). */
#define ATTN_KEY_TILE 128.0

/* Share of a causal s_kv-key score matrix a fused kernel computes when
 * queries see only the last `window` keys (window > 0), and the keys one
 * query tile's call runs over. FlashAttention-2 visits, per 128-query tile,
 * the key tiles that meet the band (n_block_min from window_size_left =
 * window - 1): ceil((window-1)/128) + 1 tiles. With attention sinks
 * Transformer Engine runs cuDNN's fused attention (FlashAttention is
 * disabled for softmax_type != vanilla, dot_product_attention/utils.py
 * get_attention_backend, TE v2.9-v2.12; on Hopper and later TE prefers it
 * anyway), which gets the band as diagonal_band_left_bound = window_size_left
 * + 1 = window (fused_attn_f16_arbitrary_seqlen.cu) and bounds each CTA's
 * key loop at (row - window) / 128 .. ceil((row + M) / 128) for its M query
 * rows (compute_kv_loop_bounds in cuDNN's open-sourced SDPA kernels,
 * cudnn-frontend generated/sdpa/sm90 and sm100): M/128 + ceil(window/128)
 * key tiles per M rows, M = the profile's attention_query_tile (128 on
 * SM90, 256 on SM100). Never more than the causal half (docs/cost-model.md
 * §12a). */
static double window_share(const mp_config *c, double window, double s_kv,
                           double *keys_per_call)
{
    double keys = ATTN_KEY_TILE * (ceil((window - 1.0) / ATTN_KEY_TILE) + 1.0);
    if (c->model.attn.sinks) {
        double rows = c->hw.attention_query_tile > 0.0 ? c->hw.attention_query_tile
                                                       : ATTN_KEY_TILE;
        double tiles = rows / ATTN_KEY_TILE + ceil(window / ATTN_KEY_TILE);
        keys = ATTN_KEY_TILE * tiles * ATTN_KEY_TILE / rows; /* per query row */
    }
    *keys_per_call = keys < s_kv ? keys : s_kv;
    double share = keys / s_kv;
    return share < 0.5 ? share : 0.5;
}

/* The fused kernel Transformer Engine runs (mp_attention_backend_of):
 * FlashAttention at the profile's attention_efficiency and
 * attention_half_rate_keys, cuDNN's fused attention at its own measured
 * rate and length curve (docs/cost-model.md §4, "Attention kernel"). */
double mp_attention_efficiency_of(const mp_config *c)
{
    return mp_attention_backend_of(c) == MP_ATTN_FUSED ? c->hw.attention_efficiency_fused
                                                        : c->hw.attention_efficiency;
}

double mp_attention_half_rate_keys_of(const mp_config *c)
{
    if (mp_attention_backend_of(c) == MP_ATTN_FUSED && c->hw.attention_half_rate_keys_fused > 0.0)
        return c->hw.attention_half_rate_keys_fused;
    return c->hw.attention_half_rate_keys;
}

/* Attention core over n_scores score elements per GPU with head_dim hd, sq
 * queries per sequence and head, each fused call running over kv keys (CP:
 * one ring step's chunk); window > 0: a sliding window over a sequence of
 * s_kv keys. */
static void attention_core(const mp_config *c, double n_scores, double sq, double hd, double kv,
                           bool causal, double window, double s_kv, bool dropout, double *fwd,
                           double *bwd, double *kernels)
{
    const mp_hw *hw = &c->hw;
    double peak = peak_of(c);
    double flops = 4.0 * n_scores * hd; /* QK^T and AV */
    if (hw->flash_attention) {
        double done = causal ? 0.5 * flops : flops; /* masked blocks are skipped */
        bool triangle = causal; /* query rows visit kv/2 keys on average */
        if (window > 0.0 && causal) {
            double share = window_share(c, window, s_kv, &kv); /* and blocks outside the band */
            done = share * flops;
            triangle = share >= 0.5; /* a band: each row visits about kv keys */
        }
        double eff = mp_attention_efficiency_of(c), half = mp_attention_half_rate_keys_of(c);
        /* cuDNN's law is read off causal calls, whose query rows visit kv/2
         * keys on average: an unmasked call (or a band) whose rows visit kv
         * keys runs as a causal one over 2 kv (the measured unmasked H200
         * and GB200 rates at kv keys are within 6% of the causal ones at
         * 2 kv: tests/data/hw/cudnn_sdpa_llama31.csv) */
        double law_kv = kv;
        if (!triangle && mp_attention_backend_of(c) == MP_ATTN_FUSED)
            law_kv = 2.0 * kv;
        double length =
            (law_kv / (law_kv + half)) / (ATTN_REFERENCE_KEYS / (ATTN_REFERENCE_KEYS + half));
        double f = done / (peak * eff * length);
        *fwd = f;
        /* backward recomputes QK^T: 5 matmuls against 2 (Dao 2023) */
        *bwd = 2.5 * f;
        *kernels = 1.0;
        return;
    }
    /* the two batched GEMMs, one sq x s_kv score matrix per sequence and
     * head: QK^T (sq x s_kv outputs) and AV (sq x hd); the backward's dP
     * has QK^T's outputs, dQ, dK and dV AV's shape (s_kv x hd for dK, dV) */
    double groups = n_scores / (sq * s_kv);
    double bmm = mp_gemm_time(hw, peak, 0.5 * flops); /* one of them at FLOPs alone */
    double qk = bmm / mp_gemm_shape_efficiency(hw, groups, sq, s_kv);
    double av = bmm / mp_gemm_shape_efficiency(hw, groups, sq, hd);
    double kv_grad = bmm / mp_gemm_shape_efficiency(hw, groups, s_kv, hd);
    /* score elements through HBM (16-bit): QK^T write 2, softmax r2 w2, dropout r2 w2
     * + mask 1, AV read 2; backward: dP write 2, dropout r3 w2, softmax r4 w2,
     * dQ/dK read 2 each, dV read 2. Without attention dropout (attention_dropout
     * 0) its kernel and mask are not there: 8 and 12 bytes, one kernel fewer */
    double fb = dropout ? 13.0 : 8.0, bb = dropout ? 19.0 : 12.0;
    *fwd = qk + av + mp_membound_time(hw, n_scores * fb, dropout ? 2.0 : 1.0);
    *bwd = qk + av + 2.0 * kv_grad + mp_membound_time(hw, n_scores * bb, dropout ? 2.0 : 1.0);
    *kernels = dropout ? 4.0 : 3.0;
}

/* Transformer Engine's ring attention (cp_comm_type "p2p", the one
 * Megatron-Core passes when the config leaves cp_comm_type unset:
 * AttnFuncWithCPAndKVP2P in transformer_engine/pytorch/attention/
 * dot_product_attention/context_parallel.py, TE 2.7-2.9) splits the sequence
 * into 2c chunks, rank r holding chunks r and 2c-1-r, and runs one fused
 * attention call per ring step. Under a causal mask step 0 is the "diagonal"
 * call, causal, over the rank's own s/c queries and s/c keys; every later
 * step is unmasked over half of one side: the "lower-triangle" call (step
 * i <= r) takes all s/c queries against the first s/(2c) keys received, the
 * "upper-triangle" one (i > r) the second s/(2c) queries against all s/c
 * keys (cp_p2p_fwd_prepare_qkv, cp_p2p_fwd_fused_attn: max_seqlen_kv // 2,
 * max_seqlen_q // 2). Each step does 1/c of the rank's causal work. Rank
 * c - 1 runs lower-triangle calls only, over s/(2c) keys, the slowest at a
 * rate that grows with the keys per call (attention_core), and the ring's
 * receive before each step ties every rank to it. rows = b x local heads. */
void mp_cp_causal_attention(const mp_config *c, double rows, double s, double cp, double hd,
                            bool dropout, double *fwd, double *bwd)
{
    double q = s / cp, f0, b0, k0, f1, b1, k1;
    attention_core(c, rows * q * q, q, hd, q, true, 0.0, q, dropout, &f0, &b0, &k0);
    attention_core(c, rows * q * 0.5 * q, q, hd, 0.5 * q, false, 0.0, 0.5 * q, dropout, &f1, &b1,
                   &k1);
    *fwd = f0 + (cp - 1.0) * f1;
    *bwd = b0 + (cp - 1.0) * b1;
}

/* The memory-bound work the same ring adds on its slowest rank (c - 1),
 * elt bytes per element (the attention's 16-bit activations), n_q elements
 * of Q (and dQ), n_out of the output, n_kv of K and V together; every pass
 * below is one kernel reading and writing the elements once (the merges are
 * torch.compile'd functions, jit_fuser in transformer_engine/pytorch/jit.py;
 * the accumulations in-place copy_/add_). Forward: K and V concatenated into
 * the send buffer (torch.cat: r1 w1 of n_kv), the first step's output
 * rescaled into the running output (flash_attn_fwd_out_correction_init: r1
 * w1 of n_out), and each later step's output rescaled and added to it
 * (flash_attn_fwd_out_correction, out.add_: r2 w1; full rows on rank c - 1,
 * whose steps all satisfy i <= rank). Backward: K and V copied into the
 * double buffer (p2p_comm_buffers[0][0].copy_: r1 w1), each step's dQ
 * copied (first step: r1 w1) or added (r2 w1) into the dQ buffer, and its
 * dK, dV into the dK/dV buffer that travels the ring: a copy into the first
 * half at step 0 (r1 w1 of n_kv/2), adds into that half for steps 1 .. c-2
 * (r2 w1 of n_kv/2) and a full add at the last, diagonal step (r2 w1).
 * The log-sum-exp merges run on b x heads x s/c fp32 values, 1/hd of the
 * output's, and are left out. */
void mp_cp_ring_merge(double cp, double n_q, double n_out, double n_kv, double elt,
                      mp_pass_cost *out)
{
    double steps = cp - 1.0;
    out->bytes_f = elt * (2.0 * n_kv + n_out * (2.0 + 3.0 * steps));
    out->bytes_b = elt * (2.0 * n_kv + n_q * (2.0 + 3.0 * steps) +
                          n_kv * (1.0 + 1.5 * (cp - 2.0) + 3.0));
    out->kernels_f = out->kernels_b = 0.0; /* counted with the ring's steps (ak) */
}

/* Context parallelism other than the ring (docs/cost-model.md §5 CP), on
 * one rank of the CP group: q_bytes of this rank's queries (its s/c tokens,
 * its heads/t heads) and kv_bytes of its K and V together; the output is
 * q_bytes too. all_gather (Transformer Engine's AttnFuncWithCPAndKVAllGather,
 * TE 2.9): K and V all-gathered before the attention on the compute stream,
 * so exposed; the backward gathers them again and reduce-scatters dK and dV
 * after it. a2a (AttnFuncWithCPAndQKVOA2A): Q, K and V all-to-all before the
 * attention and the output after it; the backward dO before and dQ, dK, dV
 * after, every one waited on before the next kernel (flash_attn_a2a_communicate:
 * current_stream().wait_stream(cp_stream)), so exposed. An all-to-all in
 * which each of the n ranks keeps 1/n of its x bytes and sends the rest
 * moves what a ring all-gather of an x-byte result moves: timed as that. */
void mp_cp_other_comm(const mp_hw *hw, const mp_group_place *g, mp_cp_comm k, double q_bytes,
                      double kv_bytes, double *fwd, double *bwd)
{
    double n = (double)g->n;
    *fwd = *bwd = 0.0;
    if (k == MP_CP_ALL_GATHER) {
        double ag = mp_coll_time(hw, g, MP_COLL_ALLGATHER, n * kv_bytes);
        *fwd = ag;
        *bwd = ag + mp_coll_time(hw, g, MP_COLL_REDUCESCATTER, n * kv_bytes);
    } else if (k == MP_CP_A2A) {
        *fwd = mp_coll_time(hw, g, MP_COLL_ALLGATHER, q_bytes + kv_bytes) +
               mp_coll_time(hw, g, MP_COLL_ALLGATHER, q_bytes);
        *bwd = mp_coll_time(hw, g, MP_COLL_ALLGATHER, q_bytes) +
               mp_coll_time(hw, g, MP_COLL_ALLGATHER, q_bytes + kv_bytes);
    }
}

/* The copies the same two add, elt bytes per element, n_q elements of this
 * rank's Q (and output), n_kv of its K and V together; each pass reads and
 * writes its elements once. all_gather: the gathered K and V reordered into
 * sequence order (torch.index_select, r1 w1 of c x n_kv) in the forward and
 * again in the backward; the backward's c x n_kv dK/dV buffers zero-filled
 * (w1), each of the two local chunks' dK/dV added into the prefix of keys it
 * saw ((r+1)/(2c) and (2c-r)/(2c) of the sequence: (2c+1)/2 x n_kv, r2 w1)
 * and reordered back (r1 w1 of c x n_kv). a2a: every tensor through the
 * all-to-all is made contiguous before it and reordered after it (r1 w1
 * each): forward Q, K, V and the output, backward dO, dQ, dK and dV. */
void mp_cp_other_copies(mp_cp_comm k, double cp, double n_q, double n_kv, double elt,
                        mp_pass_cost *out)
{
    out->bytes_f = out->bytes_b = 0.0;
    if (k == MP_CP_ALL_GATHER) {
        out->bytes_f = elt * 2.0 * cp * n_kv;
        out->bytes_b = elt * n_kv * (2.0 * cp + cp + 1.5 * (2.0 * cp + 1.0) + 2.0 * cp);
    } else if (k == MP_CP_A2A) {
        out->bytes_f = elt * 2.0 * 2.0 * (2.0 * n_q + n_kv);
        out->bytes_b = elt * 2.0 * 2.0 * (2.0 * n_q + n_kv);
    }
    out->kernels_f = out->kernels_b = 0.0; /* counted with the attention's launches */
}

/* RoPE on this rank's Q and K, `elts` 16-bit elements. Fused (Transformer
 * Engine's fused_apply_rotary_pos_emb, which Megatron uses with
 * --apply-rope-fusion): one kernel reading and writing each element, its
 * backward twice that. YaRN (attn.rope_yarn): Megatron-Bridge turns the
 * fusion off for position_embedding_type "yarn" (utils/fusions.py,
 * validate_rope_fusion_compatibility, v0.2.2 and v0.3.1), and Megatron-Core
 * falls back to the unfused path for mscale != 1 in any case (core_v0.16.0
 * rope_utils.py apply_rotary_pos_emb). That path (rope_utils.py
 * _apply_rotary_pos_emb_bshd, core_v0.15.0 and core_v0.16.0) is eager
 * PyTorch, per tensor: forward -x2 (r 1/2 w 1/2), the rotated half's cat
 * (r1 w1), t*cos and rot*sin (r1 w1 each), their sum (r2 w1), the cat with
 * the empty pass-through part (r1 w1): 12 passes of 2 bytes, 6 kernels, and
 * 6 more on the [s, d] frequency table (cos, sin, the mscale product, the
 * cast); backward (autograd) grad*cos and grad*sin (r1 w1 each), the neg
 * (r 1/2 w 1/2), the split's cat (r1 w1), the two paths' sum (r2 w1), the
 * slice's zero fill and copy (w1; r1 w1): 13 passes, 7 kernels
 * (docs/cost-model.md §12a). */
static void rope_cost(const mp_model *m, double elts, mp_pass_cost *out)
{
    if (!m->attn.rope_yarn) {
        out->bytes_f += 4.0 * elts;
        out->bytes_b += 8.0 * elts;
        out->kernels_f += 1.0;
        out->kernels_b += 2.0;
        return;
    }
    out->bytes_f += 2.0 * 12.0 * elts;
    out->bytes_b += 2.0 * 13.0 * elts;
    out->kernels_f += 2.0 * 12.0; /* Q and K */
    out->kernels_b += 2.0 * 7.0;
}

/* QK-norm (attn.qk_norm, Qwen3): Megatron-Core's q_layernorm and
 * k_layernorm (--qk-layernorm; the TE spec builds them as TENorm, an RMSNorm
 * here) run on this rank's query heads and key heads, `elts` 16-bit
 * elements, over head_dim (megatron/core/transformer/attention.py,
 * get_query_key_value_tensors). Each is one Transformer Engine norm kernel:
 * forward reads and writes each element (4 bytes); backward reads the
 * gradient and the saved input and writes the input gradient (6 bytes), in
 * two launches (the norm's backward and its weight-gradient reduction
 * across the CTAs' partial sums). The per-row statistics and the head_dim
 * weights are negligible beside them (docs/cost-model.md §12a). */
static void qk_norm_cost(const mp_model *m, double elts, mp_pass_cost *out)
{
    if (!m->attn.qk_norm)
        return;
    out->bytes_f += 4.0 * elts;
    out->bytes_b += 6.0 * elts;
    out->kernels_f += 2.0; /* Q and K */
    out->kernels_b += 4.0;
}

/* What recomputing each module re-runs (Megatron-Core's checkpoints,
 * docs/cost-model.md "Selective recompute by module"): fwd_of = the block's
 * forward GEMM times (QKV, projection, FC1, FC2 = the dense MLP or the
 * shared experts), tp_one = one TP collective of the block's tokens. */
static void module_times(const mp_config *c, const mp_block_shape *bs, const mp_moe_time *mt,
                         const double *fwd_of, double tp_one, mp_block_time *out)
{
    const mp_model *m = &c->model;
    const mp_hw *hw = &c->hw;
    const mp_parallel *pp = &c->parallel;
    double t = (double)pp->tp, h = (double)m->hidden;
    double T = (double)pp->micro_batch * bs->s / (double)pp->cp;
    bool moe = bs->kind == MP_BLOCK_MOE, swiglu = mp_activation_is_gated(m->activation);
    double comm = pp->tp > 1 ? tp_one : 0.0;
    double *mf = out->module_fwd;
    for (int k = 0; k < MP_RCM_COUNT; k++)
        mf[k] = 0.0;
    mf[MP_RCM_CORE_ATTN] = out->attn_core_fwd;
    /* the norms layernorm checkpoints (memory.c): read and write their
     * tokens (SP-sharded); none where the spec fuses both into the linear
     * layers after them */
    unsigned norms = mp_block_checkpointed_norms(m, bs);
    double n_norm = (double)((norms & MP_NORM_INPUT ? 1 : 0) + (norms & MP_NORM_PRE_MLP ? 1 : 0));
    double one_norm = mp_membound_time(hw, 4.0 * T * h / (pp->sp ? t : 1.0), 1.0);
    if (n_norm > 0.0)
        mf[MP_RCM_LAYERNORM] =
            mp_host_bound(hw, mp_membound_time(hw, 4.0 * n_norm * T * h / (pp->sp ? t : 1.0),
                                               n_norm),
                          n_norm);
    /* the dense MLP or the shared experts: FC1, activation, FC2 and their
     * TP all-gather and reduce-scatter */
    double f = moe ? (double)(m->moe.shared_experts * m->moe.shared_ffn)
                   : (m->ffn_hidden > 0 ? (double)m->ffn_hidden : 4.0 * h);
    double mlp = 0.0;
    if (f > 0.0 && moe)
        mlp = mp_host_bound(hw, fwd_of[2] + fwd_of[3] +
                                    mp_membound_time(hw, (swiglu ? 6.0 : 4.0) * T * f / t, 1.0),
                            3.0) + comm;
    else if (f > 0.0)
        /* a dense block's: FC1 is a LayerNormLinear, its pre-MLP norm re-run
         * inside the checkpoint too */
        mlp = mp_host_bound(hw, fwd_of[2] + fwd_of[3] + one_norm +
                                    mp_membound_time(hw, (swiglu ? 6.0 : 4.0) * T * f / t, 1.0),
                            4.0) + comm;
    mf[moe ? MP_RCM_SHARED_EXPERTS : MP_RCM_MLP] = mlp;
    if (moe) {
        /* the whole MoE layer: router, dispatch, experts, combine, shared experts */
        double ew_moe = mt->ew_bytes + mt->bias.bytes_f + mt->clamp.bytes_f;
        double k_moe =
            mt->kernels + mt->bias.kernels_f + mt->clamp.kernels_f + mt->expert_launches_f;
        double sync = mt->clamp_syncs * hw->kernel_overhead; /* oss_cost.c */
        /* its dispatcher waits for the counts again (moe.c dispatch_syncs) */
        mf[MP_RCM_MOE] = mlp +
                         mp_host_bound(hw, mt->gemm_f + mp_membound_time(hw, ew_moe, k_moe), k_moe) +
                         mt->comm_f + sync + mt->dispatch_sync_s;
        /* the activation, with GPT-OSS's eager clamp in front of it */
        double k_act = 1.0 + mt->clamp.kernels_f;
        double act = mp_membound_time(hw, mt->act_bytes + mt->clamp.bytes_f, k_act);
        mf[MP_RCM_MOE_ACT] = mp_host_bound(hw, act, k_act) + sync;
    }
    if (mp_model_is_mla(m)) {
        /* the up-projections from the latents, and RoPE on Q and K */
        double a = (double)m->heads / t;
        double nope = (double)m->mla.qk_nope_head_dim, rope = (double)m->mla.qk_rope_head_dim;
        double qr = m->mla.q_lora_rank > 0 ? (double)m->mla.q_lora_rank : h;
        double kvr = (double)m->mla.kv_lora_rank;
        double up = mp_linear_gemm_time(c, T, a * (nope + rope), qr) +
                    mp_linear_gemm_time(c, T, a * (nope + (double)m->mla.v_head_dim), kvr);
        double ew = mp_membound_time(hw, 4.0 * T * 2.0 * a * (nope + rope), 1.0);
        /* and the latent norms fused into the up-projections (TE
         * LayerNormLinear, inside the checkpoint: memory.c), reading and
         * writing the latents (SP-sharded), two kernels */
        double lat = (m->mla.q_lora_rank > 0 ? (double)m->mla.q_lora_rank : 0.0) + kvr;
        double norms = mp_membound_time(hw, 4.0 * T * lat / (pp->sp ? t : 1.0), 2.0);
        mf[MP_RCM_MLA_UP_PROJ] = mp_host_bound(hw, up + ew + norms, 5.0);
    }
}

double mp_block_modules_time(const mp_block_time *bt, uint32_t mask)
{
    double t = 0.0;
    for (int k = 0; k < MP_RCM_COUNT; k++)
        if ((mask & (1u << k)) &&
            !((mask & (1u << MP_RCM_MOE)) && (k == MP_RCM_MOE_ACT || k == MP_RCM_SHARED_EXPERTS)))
            t += bt->module_fwd[k];
    return t;
}

void mp_block_time_of(const mp_config *c, const mp_block_shape *bs, mp_block_time *out)
{
    const mp_model *m = &c->model;
    const mp_hw *hw = &c->hw;
    const mp_parallel *pp = &c->parallel;
    double dt = mp_dtype_bytes(c->training.precision);
    double t = (double)pp->tp, cp = (double)pp->cp, b = (double)pp->micro_batch;
    double h = (double)m->hidden;
    double hd = m->head_dim > 0 ? (double)m->head_dim : h / (double)m->heads;
    double qd = (double)m->heads * hd;
    double kvd = (double)(m->kv_heads > 0 ? m->kv_heads : m->heads) * hd;
    double f = m->ffn_hidden > 0 ? (double)m->ffn_hidden : 4.0 * h;
    bool moe = bs->kind == MP_BLOCK_MOE;
    if (moe) /* the dense MLP of an MoE block: its shared experts (moe.c times the rest) */
        f = (double)(m->moe.shared_experts * m->moe.shared_ffn);
    /* attention widths: QKV's output and the projection's input; latent
     * attention as the GEMMs of equal work (moe.c counts its matrices) */
    double qkv_out = qd + 2.0 * kvd, proj_in = qd;
    if (mp_model_is_mla(m)) {
        proj_in = (double)m->heads * (double)m->mla.v_head_dim;
        qkv_out = (mp_mla_attn_params(m) - proj_in * h) / h;
    }
    bool swiglu = mp_activation_is_gated(m->activation);
    bool cross = bs->s_cross > 0;
    double T = b * bs->s / cp; /* tokens of this rank */

    /* GEMMs (m tokens x k in -> n out): forward once; backward the input
     * gradient (m x n -> k) and the weight gradient (k x m -> n) */
    double shape[7][3];
    int ng = 0;
    double Tx = b * bs->s_cross / cp;
    shape[ng][0] = T, shape[ng][1] = qkv_out / t, shape[ng++][2] = h;          /* QKV */
    shape[ng][0] = T, shape[ng][1] = h, shape[ng++][2] = proj_in / t;           /* projection */
    shape[ng][0] = T, shape[ng][1] = f * (swiglu ? 2.0 : 1.0) / t, shape[ng++][2] = h; /* FC1 */
    shape[ng][0] = T, shape[ng][1] = h, shape[ng++][2] = f / t;                 /* FC2 */
    if (cross) {
        shape[ng][0] = T, shape[ng][1] = qd / t, shape[ng++][2] = h;
        shape[ng][0] = Tx, shape[ng][1] = 2.0 * kvd / t, shape[ng++][2] = h;
        shape[ng][0] = T, shape[ng][1] = h, shape[ng++][2] = qd / t;
    }
    double gemm = 0.0, gemm_b = 0.0, wgrad = 0.0;
    double dgrad_of[7], wgrad_of[7], fwd_of[7];
    double cast_f = 0.0, cast_b = 0.0, n_cast = 0.0; /* FP8 casts of the operands */
    double cast_of[7] = {0};                          /* cast launches of each GEMM */
    for (int i = 0; i < ng; i++) {
        double gm = shape[i][0], gn = shape[i][1], gk = shape[i][2];
        if (gn <= 0.0 || gk <= 0.0) { /* an MoE block without shared experts */
            dgrad_of[i] = wgrad_of[i] = fwd_of[i] = 0.0;
            continue;
        }
        double w = mp_linear_gemm_pass_time(c, MP_GEMM_WGRAD, gk, gn, gm);
        double dg = mp_linear_gemm_pass_time(c, MP_GEMM_DGRAD, gm, gk, gn);
        fwd_of[i] = mp_linear_gemm_time(c, gm, gn, gk);
        gemm += fwd_of[i];
        gemm_b += dg + w;
        wgrad += w;
        dgrad_of[i] = dg;
        wgrad_of[i] = w;
        /* FP8 casts: the input (QKV's, FC1's and cross attention's Q are
         * column-parallel, gathered under SP) and the output gradient (the
         * projection's and FC2's are row-parallel, gathered under SP); an
         * MoE block's shared experts are left as they were */
        bool dense_mlp = !moe || i < 2;
        double sps = pp->sp && pp->tp > 1 ? t : 1.0;
        bool col = (i == 0 || i == 2 || i == 4) && dense_mlp;
        bool row = (i == 1 || i == 3 || i == 6) && dense_mlp;
        bool fused = i == 0 || (i == 2 && !moe); /* the norm's output: amax fused */
        double qf = mp_fp8_operand_cast_bytes(c, gm * gk, col ? sps : 1.0, fused);
        double qb = mp_fp8_operand_cast_bytes(c, gm * gn, row ? sps : 1.0, false);
        cast_f += qf;
        cast_b += qb;
        cast_of[i] = qf > 0.0 ? 1.0 : 0.0;
        n_cast += cast_of[i];
    }
    /* TP overlap splits the GEMMs it hides collectives under: each split is
     * one more cuBLAS call, charged at the profile's measured per-call time */
    for (int i = 0; i < 4 && i < ng; i++) {
        if (!(shape[i][1] > 0.0) || !(shape[i][2] > 0.0))
            continue;
        double xf, xb;
        mp_ub_split_calls(c, i, &xf, &xb);
        fwd_of[i] += xf * hw->gemm_call_overhead;
        dgrad_of[i] += xb * hw->gemm_call_overhead;
        gemm += xf * hw->gemm_call_overhead;
        gemm_b += xb * hw->gemm_call_overhead;
    }

    /* attention core: this rank's queries against the whole sequence */
    double heads_local = (double)m->heads / t;
    double af, ab, ak;
    double core_hd = hd;
    if (mp_model_is_mla(m)) /* QK^T at head_dim, AV at v_head_dim */
        core_hd = 0.5 * (hd + (double)m->mla.v_head_dim);
    mp_cp_comm cpk = pp->cp > 1 ? pp->cp_comm_type : MP_CP_P2P;
    if (cpk == MP_CP_A2A) /* Ulysses: the whole sequence, heads/cp of the rank's heads */
        attention_core(c, b * heads_local / cp * bs->s * bs->s, bs->s, core_hd, bs->s, bs->causal,
                       bs->window, bs->s, bs->attn_dropout, &af, &ab, &ak);
    else
        attention_core(c, b * heads_local * (bs->s / cp) * bs->s, bs->s / cp, core_hd,
                       bs->s / cp, bs->causal, bs->window, bs->s, bs->attn_dropout, &af, &ab, &ak);
    if (pp->cp > 1 && cpk == MP_CP_P2P)
        /* ring attention runs one attention call per ring step (c of them,
         * against the chunk that has arrived), each followed by the
         * log-sum-exp correction of the partial output and the send/receive
         * of the next K/V chunk: 3 more launches per extra step */
        ak += 3.0 * (cp - 1.0);
    /* the ring's steps and merges (mp_cp_causal_attention, mp_cp_ring_merge);
     * a sliding window is not Transformer Engine's p2p ring (its
     * attn_forward_func_with_cp asserts all_gather or a2a for one), and stays
     * the single call above (docs/cost-model.md §12a) */
    mp_pass_cost ring = {0};
    if (pp->cp > 1 && cpk != MP_CP_P2P) {
        double tok = b * bs->s / cp;
        mp_cp_other_copies(cpk, cp, tok * heads_local * hd, tok * 2.0 * kvd / t, dt, &ring);
        /* launches: a2a's 4 all-to-alls and 8 copies; all_gather's 2
         * gathers, 2 reorders and its second attention call */
        ak += cpk == MP_CP_A2A ? 12.0 : 5.0;
    } else if (pp->cp > 1 && !(bs->window > 0.0)) {
        if (bs->causal && hw->flash_attention)
            mp_cp_causal_attention(c, b * heads_local, bs->s, cp, core_hd, bs->attn_dropout, &af, &ab);
        bool mla = mp_model_is_mla(m);
        double hd_v = mla ? (double)m->mla.v_head_dim : hd;
        double n_kv = mla ? heads_local * (hd + hd_v) : 2.0 * kvd / t;
        double tok = b * bs->s / cp;
        mp_cp_ring_merge(cp, tok * heads_local * hd, tok * heads_local * hd_v, tok * n_kv, dt,
                         &ring);
    }
    double ak_self = ak;
    if (cross) {
        double cf, cb, ck;
        attention_core(c, b * heads_local * (bs->s / cp) * bs->s_cross, bs->s / cp, hd,
                       bs->s_cross, false, 0.0, bs->s_cross, bs->attn_dropout, &cf, &cb, &ck);
        af += cf;
        ab += cb;
        ak += ck;
    }

    /* elementwise, bytes per element: norm r2 w2; bias+dropout+residual r4 w2
     * + mask 1 (hidden_dropout 0: no mask, bias+residual r4 w2); bias+GeLU r2 w2
     * (SwiGLU r4 w2) per FFN element; RoPE r2 w2 on Q, K */
    double n_norm = cross ? 3.0 : 2.0;
    double outside = T * h / (pp->sp ? t : 1.0);
    double ew = outside * (4.0 * n_norm + (bs->hidden_dropout ? 7.0 : 6.0) * n_norm);
    ew += (swiglu ? 6.0 : 4.0) * T * f / t;
    double kernels = 2.0 * n_norm + 1.0;
    /* elementwise work whose backward is not twice its forward (bytes and
     * launches of each pass): RoPE, the routed experts' output bias, GPT-OSS's clamp */
    mp_pass_cost rope = {0};
    if (m->position == MP_POS_ROPE)
        rope_cost(m, T * (qd + kvd) / t, &rope);
    if (m->attn.rope_yarn) { /* eager ops: their own host cost */
        rope.kernels_f *= mp_eager_op_launches(hw, false);
        rope.kernels_b *= mp_eager_op_launches(hw, true);
    }
    qk_norm_cost(m, T * (qd + kvd) / t, &rope); /* beside RoPE, on the same heads */
    mp_pass_cost odd = rope;
    odd.bytes_f += ring.bytes_f; /* CP's merges (above) */
    odd.bytes_b += ring.bytes_b;
    /* training.fp8_act_cache: the dense MLP's or shared experts' SwiGLU input
     * cast to its stored type and back, one kernel each pass (fp8.c) */
    double store = mp_swiglu_input_store_cast_bytes(c, moe, 2.0 * T * f / t);
    if (store > 0.0 && f > 0.0) {
        odd.bytes_f += store;
        odd.bytes_b += store;
        odd.kernels_f += 1.0;
        odd.kernels_b += 1.0;
    }
    mp_moe_time mt = {0};
    if (moe) {
        mp_moe_block_time(c, bs, &mt);
        if (pp->shared_expert_overlap) {
            /* Megatron-Core --moe-shared-expert-overlap: the shared experts
             * (FC1, FC2: shapes 2 and 3) run on a side stream while the
             * dispatch and combine are in flight; what they cover of the
             * communication is hidden, min(comm, shared compute) per pass */
            double sf = fwd_of[2] + fwd_of[3];
            double sb = dgrad_of[2] + wgrad_of[2] + dgrad_of[3] + wgrad_of[3];
            double share = mp_comm_sm_share(c, MP_COMM_EP); /* SM contention */
            mt.comm_f = mp_overlap_excess(mt.comm_f, sf, share);
            mt.comm_b = mp_overlap_excess(mt.comm_b, sb, share);
        }
        gemm += mt.gemm_f;
        gemm_b += mt.gemm_b;
        wgrad += mt.wgrad;
        ew += mt.ew_bytes;
        kernels += mt.kernels;
        odd.bytes_f += mt.bias.bytes_f;
        odd.bytes_b += mt.bias.bytes_b;
        odd.kernels_f += mt.bias.kernels_f;
        odd.kernels_b += mt.bias.kernels_b;
        odd.bytes_f += mt.clamp.bytes_f; /* GPT-OSS's clamp (oss_cost.c) */
        odd.bytes_b += mt.clamp.bytes_b;
        odd.kernels_f += mt.clamp.kernels_f;
        odd.kernels_b += mt.clamp.kernels_b;
        odd.bytes_f += mt.pad.bytes_f; /* FP8 row padding (moe.c) */
        odd.bytes_b += mt.pad.bytes_b;
        odd.kernels_f += mt.pad.kernels_f;
        odd.kernels_b += mt.pad.kernels_b;
        cast_f += mt.cast_f;
        cast_b += mt.cast_b;
        n_cast += mt.cast_f > 0.0 ? 2.0 : 0.0;
    }
    kernels += n_cast; /* one cast kernel per FP8 GEMM and pass */
    double ew_f = mp_membound_time(hw, ew + cast_f + odd.bytes_f, kernels + odd.kernels_f);
    double ew_b =
        mp_membound_time(hw, 2.0 * ew + cast_b + odd.bytes_b, 2.0 * kernels + odd.kernels_b);
    /* TP collectives of a pass: attention's, the MLP's and cross attention's.
     * An MoE block's MLP has one only for its shared experts (Megatron-Core's
     * SharedExpertMLP gathers its sequence-parallel input over TP and
     * reduce-scatters its output): the routed experts take their tokens from
     * the sequence-parallel shard through the dispatcher, whose only TP-like
     * traffic is the etp gather moe.c charges (token_dispatcher.py,
     * MoEAlltoAllTokenDispatcher: tp_group is the expert TP group;
     * moe_layer.py requires SP with tp > 1 and gathers nothing). */
    bool mlp_tp = !(moe && !(f > 0.0));
    double n_ar = (cross ? 3.0 : 2.0) - (mlp_tp ? 0.0 : 1.0);
    /* the launches of each pass, by the part of the layer a CUDA-graph scope
     * captures (cudagraph.c): the same counts as the times above, one place
     * (a norm and a residual add around attention and around the MLP; each
     * GEMM with its FP8 cast; attention's core and RoPE; the MoE layer's
     * kernels, moe.c; one TP collective per part); the backward twice the
     * forward but for the odd kernels' own counts (RoPE, the experts' bias) */
    double tp1 = pp->tp > 1 ? 1.0 : 0.0;
    double ffn = f > 0.0 ? 3.0 + cast_of[2] + cast_of[3] : 0.0; /* FC1, activation, FC2 */
    mp_layer_launches ll = {0};
    ll.attn.fwd = 4.0 + cast_of[0] + cast_of[1] + ak_self + tp1 + rope.kernels_f;
    ll.attn.bwd = 2.0 * (ll.attn.fwd - rope.kernels_f) + rope.kernels_b;
    if (moe) {
        ll.router.fwd = 1.0 + mt.router_kernels + (pp->shared_expert_overlap ? 0.0 : ffn);
        ll.moe.fwd = 2.0 + mt.kernels + (mt.cast_f > 0.0 ? 2.0 : 0.0) + ffn +
                     (mlp_tp ? tp1 : 0.0) + mt.bias.kernels_f + mt.clamp.kernels_f +
                     mt.pad.kernels_f;
        ll.moe.bwd =
            2.0 * (ll.moe.fwd - mt.bias.kernels_f - mt.clamp.kernels_f - mt.pad.kernels_f) +
            mt.bias.kernels_b + mt.clamp.kernels_b + mt.pad.kernels_b + mt.expert_launches_b;
        ll.moe.fwd += mt.expert_launches_f; /* not doubled: moe.c counts the backward's */
        ll.router.bwd = 2.0 * ll.router.fwd;
    } else {
        ll.mlp.fwd = 2.0 + ffn + tp1;
        ll.mlp.bwd = 2.0 * ll.mlp.fwd;
    }
    if (cross) { /* its norm and residual add, Q, KV and output GEMMs, core, collective */
        ll.rest.fwd = 5.0 + cast_of[4] + cast_of[5] + cast_of[6] + (ak - ak_self) + tp1;
        ll.rest.bwd = 2.0 * ll.rest.fwd;
    }
    double k_fwd = mp_block_launches(c, &ll, false), k_bwd = mp_block_launches(c, &ll, true);

    /* TP: 2 (3 with cross attention) all-reduces of T*h forward, as many backward */
    mp_group_place tpg;
    mp_group_place_of(c, MP_GROUP_TP, &tpg);
    double one = tp_collective(c, &tpg, T * h * dt);
    /* Under a per-tensor FP8 recipe with SP, Transformer Engine gathers the
     * column-parallel layers' inputs in FP8 (quantized on the rank's share
     * before the gather, as the casts above): the forward's all-gathers of
     * the self-attention's and a dense MLP's inputs move 1 byte per element,
     * their reduce-scatters (the row-parallel outputs) stay BF16. The
     * backward's four gathers (QKV's and FC1's inputs again for the weight
     * gradients, the projection's and FC2's output gradients) in FP8 and its
     * two BF16 reduce-scatters move as much as the two BF16 pairs counted
     * there, which stay. */
    mp_fp8_recipe rcp = c->training.fp8_recipe;
    double one_f = one, n_fp8 = 0.0;
    if (mp_fp8_on(c) && pp->sp && pp->tp > 1 &&
        (rcp == MP_FP8_DELAYED || rcp == MP_FP8_TENSORWISE)) {
        one_f = mp_coll_time(hw, &tpg, MP_COLL_ALLGATHER, T * h) +
                mp_coll_time(hw, &tpg, MP_COLL_REDUCESCATTER, T * h * dt);
        n_fp8 = fmin(n_ar, moe ? 1.0 : 2.0);
    }
    out->tp_fwd = tp_exposed(c, n_fp8 * one_f + (n_ar - n_fp8) * one, gemm, MP_COMM_TP_UB_FWD);
    if (c->parallel.tp_overlap || pp->tp <= 1) {
        out->tp_bwd = tp_exposed(c, (n_ar + (cross ? 1.0 : 0.0)) * one, gemm_b, MP_COMM_TP_UB_BWD);
    } else if (c->training.stack != MP_STACK_MEGATRON_LM) {
        /* Megatron-DeepSpeed before its 2023 sync with Megatron-LM has no
         * asynchronous variant: its ColumnParallelLinear sets up the
         * input-gradient all-reduce with copy_to_tensor_model_parallel_region,
         * an autograd function that all-reduces in its backward after the
         * GEMMs (megatron/mpu/layers.py in bigscience-workshop/Megatron-DeepSpeed
         * 8387ae17, and in microsoft/Megatron-DeepSpeed's main branch through
         * 2021, e.g. 1ac4a442 of 2021-12-10), so every backward all-reduce is
         * exposed */
        out->tp_bwd = (n_ar + (cross ? 1.0 : 0.0)) * one;
    } else {
        /* The backward collectives belong to the column-parallel GEMMs (QKV,
         * FC1; cross attention's Q and KV), and Megatron issues them
         * asynchronously beside that GEMM's other backward half
         * (--async-tensor-model-parallel-allreduce, on by default since 2021
         * in Megatron-LM and Megatron-DeepSpeed): the input-gradient all-reduce
         * runs under the weight-gradient GEMM. With SP the all-gather of the
         * input runs under the input-gradient GEMM and the reduce-scatter of
         * the input gradient under the weight-gradient GEMM (Korthikanti 2022
         * §4.2.2). Only what exceeds its GEMM is exposed, and never less
         * than the SMs' share NCCL's kernel takes from the GEMM. */
        int column[4] = {0, 2, 4, 5};
        int n_col = cross ? 4 : 2;
        double bytes = T * h * dt, exposed = 0.0;
        double share = mp_comm_sm_share(c, MP_COMM_NCCL);
        for (int j = 0; j < n_col; j++) {
            int i = column[j];
            if (i == 2 && !mlp_tp) /* no shared experts: no FC1 under TP */
                continue;
            if (i == 5) /* cross attention's KV runs on the encoder's tokens */
                bytes = Tx * h * dt;
            if (pp->sp) {
                double ag = mp_coll_time(hw, &tpg, MP_COLL_ALLGATHER, bytes);
                double rs = mp_coll_time(hw, &tpg, MP_COLL_REDUCESCATTER, bytes);
                exposed += mp_overlap_excess(ag, dgrad_of[i], share) +
                           mp_overlap_excess(rs, wgrad_of[i], share);
            } else {
                double ar = mp_coll_time(hw, &tpg, MP_COLL_ALLREDUCE, bytes);
                exposed += mp_overlap_excess(ar, wgrad_of[i], share);
            }
        }
        out->tp_bwd = exposed;
    }
    /* the MoE dispatch and combine, exposed (reported with the TP
     * communication: both are the block's tensor traffic) */
    out->tp_fwd += mt.comm_f;
    out->tp_bwd += mt.comm_b;
    out->ep_fwd = mt.comm_f;
    out->ep_bwd = mt.comm_b;
    out->mlp_fwd = out->mlp_bwd = out->mlp_wgrad = 0.0;
    if (moe) {
        /* the merged pass's expert node (Megatron-Core fine_grained_callables.py,
         * submodule_moe_forward: routed_experts_compute) runs the dispatcher's
         * sort by local expert, the grouped GEMMs with their FP8 casts and
         * activation, and the sort back: its elementwise work with its GEMMs */
        double node_f = mt.sort_bytes + mt.act_bytes + mt.cast_f + mt.pad.bytes_f;
        double node_b = 2.0 * (mt.sort_bytes + mt.act_bytes) + mt.cast_b + mt.pad.bytes_b;
        out->mlp_fwd = mt.gemm_f + fwd_of[2] + fwd_of[3] + mp_membound_time(hw, node_f, 0.0);
        out->mlp_bwd = mt.gemm_b + dgrad_of[2] + wgrad_of[2] + dgrad_of[3] + wgrad_of[3] +
                       mp_membound_time(hw, node_b, 0.0);
        out->mlp_wgrad = mt.wgrad + wgrad_of[2] + wgrad_of[3];
    }

    /* The host issues kernels asynchronously: a pass takes the GPU's time or
     * the host's dispatch time, whichever is longer (small models, large t).
     * A host-bound excess is reported as compute. */
    double gpu_f = gemm + af + ew_f, gpu_b = gemm_b + ab + ew_b;
    out->fwd_compute = mp_host_bound(hw, gpu_f + out->tp_fwd, k_fwd) - out->tp_fwd;
    /* a stream synchronisation drains the GPU's queue, which then waits for
     * the host's next dispatch (GPT-OSS's clamp, oss_cost.c) */
    out->fwd_compute += mt.clamp_syncs * hw->kernel_overhead;
    /* and the token dispatcher's wait for its counts (moe.c dispatch_syncs) */
    out->fwd_compute += mt.dispatch_sync_s;
    out->bwd_compute = mp_host_bound(hw, gpu_b + out->tp_bwd, k_bwd) - out->tp_bwd;
    /* CP: c-1 ring steps passing this rank's K and V (backward also dK, dV),
     * each hidden under the attention of the chunk already there */
    out->cp_fwd = out->cp_bwd = 0.0;
    if (pp->cp > 1 && cpk != MP_CP_P2P) {
        mp_group_place cpg;
        mp_group_place_of(c, MP_GROUP_CP, &cpg);
        double tok = b * bs->s / cp;
        mp_cp_other_comm(hw, &cpg, cpk, tok * (double)m->heads / t * hd * dt,
                         2.0 * tok * kvd / t * dt, &out->cp_fwd, &out->cp_bwd);
    } else if (pp->cp > 1) {
        mp_group_place cpg;
        mp_group_place_of(c, MP_GROUP_CP, &cpg);
        mp_group_place pair = cpg;
        pair.n = 2;
        double kv_bytes = 2.0 * (b * bs->s / cp) * kvd / t * dt;
        double step_f = mp_coll_time(hw, &pair, MP_COLL_ALLGATHER, 2.0 * kv_bytes);
        double step_b = mp_coll_time(hw, &pair, MP_COLL_ALLGATHER, 4.0 * kv_bytes);
        double share = mp_comm_sm_share(c, MP_COMM_NCCL); /* SM contention */
        out->cp_fwd = (cp - 1.0) * mp_overlap_excess(step_f, af / cp, share);
        out->cp_bwd = (cp - 1.0) * mp_overlap_excess(step_b, ab / cp, share);
    }
    /* selective recompute of core_attn re-runs the whole forward call: with
     * CP its ring's steps, merges and exposed exchange too */
    out->attn_core_fwd =
        mp_host_bound(hw, af + mp_membound_time(hw, ring.bytes_f, 0.0), ak) + out->cp_fwd;
    out->wgrad = wgrad;
    if (mp_schedule_splits_backward(pp->schedule) && pp->pp > 1) {
        /* ZB-H1 issues W (the weight-gradient GEMMs) as a pass of its own,
         * later: B and W are each host- or GPU-bound by themselves, which is
         * never faster than one backward pass */
        double w = mp_host_bound(hw, wgrad, (double)ng);
        double b_in = mp_host_bound(hw, gpu_b - wgrad + out->tp_bwd, k_bwd - (double)ng);
        out->bwd_compute = b_in + w - out->tp_bwd;
        out->wgrad = w;
    }

    module_times(c, bs, &mt, fwd_of, one, out);
}

static double tokens_embedded(const mp_config *c)
{
    const mp_model *m = &c->model;
    int64_t seq = c->training.seq;
    if (m->arch == MP_ARCH_T5) {
        mp_block_shape enc, dec;
        mp_block_shape_of(m, seq, 1, &enc);
        mp_block_shape_of(m, seq, m->layers, &dec);
        return enc.s + dec.s;
    }
    return (double)(seq > 0 ? seq : m->seq);
}

void mp_embedding_time_of(const mp_config *c, mp_edge_time *out)
{
    const mp_model *m = &c->model;
    const mp_hw *hw = &c->hw;
    const mp_parallel *pp = &c->parallel;
    double t = (double)pp->tp, dt = mp_dtype_bytes(c->training.precision);
    double h = (double)m->hidden;
    double T = (double)pp->micro_batch * tokens_embedded(c) / (double)pp->cp;
    bool dropout = mp_model_hidden_dropout(m) > 0.0; /* the embedding's is the hidden one */
    /* gather rows r2 w2, learned positions r4 w2, dropout r2 w2 + mask 1 */
    double fwd_bytes = T * h * (4.0 + (m->position == MP_POS_LEARNED ? 6.0 : 0.0) +
                                (dropout ? 5.0 : 0.0));
    /* backward: PyTorch's dense embedding gradient (zero fill 2, scatter-add,
     * accumulate into the fp32 main gradient r2 r4 w4) of the V/t x h slice */
    double vslice = mp_padded_vocab(m->vocab, pp->tp) / t * h;
    double bwd_bytes = vslice * 14.0 + T * h * (dropout ? 5.0 : 2.0) * 2.0;
    out->fwd_compute = mp_host_bound(hw, mp_membound_time(hw, fwd_bytes, 3.0), 3.0);
    out->bwd_compute = mp_host_bound(hw, mp_membound_time(hw, bwd_bytes, 4.0), 4.0);
    out->wgrad = mp_membound_time(hw, vslice * 14.0, 3.0); /* the dense embedding gradient */
    /* vocab-parallel embedding: partial rows summed over t. Under SP
     * Megatron-Core reduce-scatters them only when no learned position table
     * is added (language_model_embedding.py lines 48-53 at core_v0.15.0:
     * reduce_scatter_embeddings needs not add_position_embedding); with one,
     * VocabParallelEmbedding all-reduces (tensor_parallel/layers.py lines
     * 286-294), the positions are added to the whole sequence, and
     * scatter_to_sequence_parallel_region (language_model_embedding.py lines
     * 135-139) only takes this rank's part. Backward: an all-gather either way
     * (the reduce-scatter's, or the scatter's) */
    mp_group_place tpg;
    mp_group_place_of(c, MP_GROUP_TP, &tpg);
    bool rs = pp->sp && m->position != MP_POS_LEARNED;
    out->tp_fwd = pp->tp > 1 ? mp_coll_time(hw, &tpg, rs ? MP_COLL_REDUCESCATTER : MP_COLL_ALLREDUCE,
                                            T * h * dt)
                             : 0.0;
    out->tp_bwd = pp->tp > 1 && pp->sp ? mp_coll_time(hw, &tpg, MP_COLL_ALLGATHER, T * h * dt) : 0.0;
}

/* The head's cross entropy, per element of this rank's T x V/t logits (L
 * bytes each: 2 for the bf16/fp16 logits of mixed precision, fp8's output
 * layer included; 4 in fp32 or tf32). Derived from the code that runs
 * (docs/cost-model.md §4, "Head", pins every line):
 *
 * Megatron's default, tensor_parallel.vocab_parallel_cross_entropy
 * (megatron/core/tensor_parallel/cross_entropy.py, core_v0.15.0; the same
 * passes in Megatron-LM v2.5's mpu/cross_entropy.py): the logits cast to
 * fp32 (r L w 4, none when they already are fp32: .float() returns its
 * input), torch.max over the vocabulary (r 4), the in-place subtraction of
 * the max (r 4 w 4), the in-place exp (r 4 w 4), its sum (r 4) and the
 * in-place division by it (r 4 w 4): 32 + (L + 4) bytes, 38 for bf16,
 * in 6 passes. Backward: the target's update (an index_put on T elements),
 * grad_input.mul_(grad_output) (r 4 w 4), then the fp32 gradient cast back
 * to the logits' dtype (autograd casts a Function's gradient to its input's
 * dtype; Megatron-LM v2.5's .float() is an autograd cast: the same) r 4 w L:
 * 8 + (4 + L), 14 for bf16, 3 launches.
 *
 * Transformer Engine's (te_cross_entropy: Megatron-Core's
 * te_parallel_cross_entropy passes the bf16 logits with reduce_loss False;
 * transformer_engine/pytorch/triton/cross_entropy.py, the same passes at
 * v2.3, v2.7, v2.9, v2.12 and v2.14): online_softmax_kernel reads the
 * logits (r L), cross_entropy_kernel reads them again and writes the
 * gradient over them (r L w L): 3L, 6 bytes for bf16, 2 kernels. Backward:
 * torch.equal(grad_output, torch.tensor(1.0, device=...)) is false at once
 * (Megatron's per-token grad_output is [s, b], not a scalar: ATen's
 * cuda_equal compares sizes first), so element_mul_kernel scales the
 * gradient in place (r L w L): 2L, one kernel; but torch.tensor(1.0,
 * device=cuda) copies from pageable host memory and synchronises the
 * stream, one synchronisation per backward call (oss_cost.c charges the same
 * PyTorch call so). Megatron-Core passes is_cg_capturable, which skips it,
 * only under a full-iteration CUDA graph, which megaplan does not model.
 *
 * Megatron-Core's native fused one (native_cross_entropy;
 * megatron/core/fusions/fused_cross_entropy.py, the same steps at
 * core_r0.8.0 through core_v0.16.0): the default's steps grouped into four
 * torch.compile'd functions (jit_fuser), each at most one kernel that reads
 * its tensor inputs and writes its outputs once. calculate_logits_max casts
 * inside (r L, w the fp32 copy it returns, 4; nothing when the logits are
 * fp32: .float() returns its input); calculate_predicted_logits subtracts
 * the max and takes exp in place on that fp32 tensor, whose new value is
 * written back (r 4 w 4); calculate_cross_entropy_loss divides in place
 * (r 4 w 4): L + 4 + 16, 22 for bf16, 3 kernels. Backward,
 * calculate_gradients: reads the saved softmax (4), updates it in place
 * (the target's entry, then the multiply by grad_output: written back, 4)
 * and returns grad_input.to(torch.bfloat16) (2): 10 bytes, 1 kernel; with
 * fp16 or fp32 logits autograd casts that bf16 gradient to the input's
 * dtype (r 2 w L, one more launch). */
void mp_cross_entropy_cost(const mp_config *c, double logits, mp_pass_cost *out, double *syncs)
{
    mp_dtype p = c->training.precision;
    double L = (p == MP_DTYPE_FP32 || p == MP_DTYPE_TF32) ? 4.0 : 2.0;
    if (c->training.te_cross_entropy) {
        out->bytes_f = 3.0 * L * logits;
        out->bytes_b = 2.0 * L * logits;
        out->kernels_f = 2.0;
        out->kernels_b = 1.0;
        *syncs = 1.0;
        return;
    }
    *syncs = 0.0;
    if (c->training.native_cross_entropy) {
        bool bf16 = p == MP_DTYPE_BF16 || p == MP_DTYPE_FP8; /* fp8's head writes bf16 logits */
        out->bytes_f = (L + (L < 4.0 ? 4.0 : 0.0) + 16.0) * logits;
        out->bytes_b = (10.0 + (bf16 ? 0.0 : 2.0 + L)) * logits;
        out->kernels_f = 3.0;
        out->kernels_b = bf16 ? 1.0 : 2.0;
        return;
    }
    /* Megatron's unfused loss moves 32 + L + 4 bytes a logit forward in 6
     * passes and 8 + L + 4 backward in 3 (docs/cost-model.md §4, Head), but
     * the profiles are fitted with 26 and 14 bytes, 5 and 3 launches, which
     * the fit rows (vTrain, Megatron-DeepSpeed) run: charging what the code
     * moves refits the profiles, and that refit failed the protocol's merge
     * criterion (a) on 2026-12-03 (leave-one-source-out multi-node 9.7 ->
     * 15.9 %; tools/validation-protocol.md), so the fitted charge stays until
     * a refit passes */
    (void)L;
    out->bytes_f = 26.0 * logits;
    out->bytes_b = 14.0 * logits;
    out->kernels_f = 5.0;
    out->kernels_b = 3.0;
}

void mp_head_time_of(const mp_config *c, mp_edge_time *out)
{
    const mp_model *m = &c->model;
    const mp_hw *hw = &c->hw;
    const mp_parallel *pp = &c->parallel;
    double peak = peak_of(c), dt = mp_dtype_bytes(c->training.precision);
    double t = (double)pp->tp, h = (double)m->hidden;
    mp_block_shape last;
    mp_block_shape_of(m, c->training.seq, m->layers, &last);
    double T = (double)pp->micro_batch * last.s / (double)pp->cp;
    double V = mp_padded_vocab(m->vocab, pp->tp);
    double gemm = mp_gemm_mnk_time(hw, peak, dt, T, V / t, h);
    if (m->arch == MP_ARCH_BERT)
        gemm += mp_gemm_mnk_time(hw, peak, dt, T, h, h);
    double norm = T * h / (pp->sp ? t : 1.0) * 4.0;
    /* vocab-parallel cross entropy on the T x V/t logits (mp_cross_entropy_cost) */
    mp_pass_cost ce;
    double syncs;
    mp_cross_entropy_cost(c, T * V / t, &ce, &syncs);
    double k_f = ce.kernels_f + 2.0, k_b = ce.kernels_b + 2.0; /* with the norm's and the GEMM's */
    out->fwd_compute =
        mp_host_bound(hw, gemm + mp_membound_time(hw, norm + ce.bytes_f, k_f), k_f + 2.0);
    out->bwd_compute = mp_host_bound(
        hw, 2.0 * gemm + mp_membound_time(hw, 2.0 * norm + ce.bytes_b, k_b), k_b + 3.0);
    /* the synchronisation drains the GPU's queue, which then waits for the
     * host's next dispatch (as GPT-OSS's clamp, compute.c's block) */
    out->bwd_compute += syncs * hw->kernel_overhead;
    out->wgrad = gemm; /* the head's weight gradient: one GEMM of the forward's size */
    out->tp_fwd = out->tp_bwd = 0.0;
    if (pp->tp > 1) {
        mp_group_place tpg;
        mp_group_place_of(c, MP_GROUP_TP, &tpg);
        /* Megatron's: max, sum of exp and target logit, three all-reduces of
         * T floats (cross_entropy.py lines 130, 148, 154 at core_v0.15.0);
         * Transformer Engine's: one all-gather of each rank's max, sum and
         * target logit, 3 T floats a rank (triton/cross_entropy.py,
         * all_gather_into_tensor: v2.9 line 316); Megatron-Core's native
         * fused one: the max (T floats), then the target logit and the sum
         * concatenated, one all-reduce of 2 T floats
         * (fusions/fused_cross_entropy.py lines 94 and 112 at core_v0.15.0) */
        if (c->training.te_cross_entropy)
            out->tp_fwd = mp_coll_time(hw, &tpg, MP_COLL_ALLGATHER, 12.0 * T * t);
        else if (c->training.native_cross_entropy)
            out->tp_fwd = mp_coll_time(hw, &tpg, MP_COLL_ALLREDUCE, 4.0 * T) +
                          mp_coll_time(hw, &tpg, MP_COLL_ALLREDUCE, 8.0 * T);
        else
            out->tp_fwd = 3.0 * mp_coll_time(hw, &tpg, MP_COLL_ALLREDUCE, 4.0 * T);
        if (pp->sp)
            out->tp_fwd += mp_coll_time(hw, &tpg, MP_COLL_ALLGATHER, T * h * dt);
        /* the replicated input's gradient is summed over t */
        out->tp_bwd = mp_coll_time(hw, &tpg, pp->sp ? MP_COLL_REDUCESCATTER : MP_COLL_ALLREDUCE,
                                   T * h * dt);
    }
}

double mp_optimizer_time(const mp_config *c, double params_local)
{
    /* Mixed-precision Adam (Megatron + apex FusedAdam, multi-tensor): grad norm
     * r4; Adam r16 w12 (fp32 master, grad, m, v); copy to 16-bit r4 w2; fp16 adds
     * the inf/nan check r4. ~38 bytes per local parameter, memory-bound. */
    double bytes = params_local * (38.0 + (c->training.precision == MP_DTYPE_FP16 ? 4.0 : 0.0));
    /* 16-bit moments (training.optimizer_moments, Megatron-Core's
     * precision-aware optimizer on Transformer Engine's FusedAdam): m and v
     * read and written in 2 bytes each, not 4 (the kernel computes in fp32:
     * arguments.py, --exp-avg-dtype); the master weights' traffic is left as
     * it is (with store_param_remainders TE reads and writes the bf16
     * parameter and its 16-bit remainder, 4 bytes each way, as an fp32
     * master) */
    if (c->training.optimizer_moments != MP_DTYPE_FP32 && !c->training.low_precision_optimizer &&
        c->training.precision != MP_DTYPE_FP32)
        bytes -= params_local * 2.0 * 2.0 * (4.0 - mp_dtype_bytes(c->training.optimizer_moments));
    /* FP8: the weights' casts to their FP8 copies, once per iteration (fp8.c),
     * counted here with the other once-per-step memory-bound work */
    bytes += params_local * mp_fp8_weight_cast_bytes(c);
    return mp_host_bound(&c->hw, mp_membound_time(&c->hw, bytes, 12.0), 12.0);
}
