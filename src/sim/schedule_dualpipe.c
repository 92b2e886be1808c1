/* schedule_dualpipe.c — DualPipe (DeepSeek-V3 technical report §3.2.1; the
 * deepseek-ai/DualPipe repository's dualpipe.py): a bidirectional pipeline.
 *
 * p ranks (p even), m micro-batches (m even, m >= 2p). The first half of the
 * micro-batches (0 .. m/2-1) enter at rank 0 and flow towards rank p-1 (the
 * forward direction, chunk 0: rank r runs stage r); the second half
 * (m/2 .. m-1) enter at rank p-1 and flow towards rank 0 (the reverse
 * direction, chunk 1: rank r runs stage p-1-r). Every rank thus holds two
 * copies of whole stages, r and p-1-r: twice 1F1B's parameters, and the
 * gradients of stage k's two copies (on ranks k and p-1-k) must be summed
 * before the optimizer step.
 *
 * DualPipe's eight phases, seen from one rank, are DualPipeV's on p/2 ranks
 * with m/2 micro-batches: rank r plays DualPipeV's rank h = min(r, p-1-r),
 * its "phase 0" being the stage nearer an end of the pipeline (stage h) and
 * "phase 1" the one nearer the middle (stage p-1-h) -- the forward direction
 * for the first half of the ranks, the reverse one for the second half
 * (dualpipe.py: `phase ^= is_in_second_half`). Where DualPipeV's rank p/2-1
 * hands a chunk over to itself at the turn of its V, DualPipe's two middle
 * ranks exchange it: the same order, a real message. So the order comes from
 * the DualPipeV builder, relabelled: chunk c of DualPipeV becomes direction
 * c ^ (r >= p/2), its micro-batch i becomes i + direction * m/2. */
#include "sim/schedule_internal.h"

mp_status mp_schedule_build_dualpipe(int32_t p, int32_t m, int32_t rank, mp_op_list *out,
                                     mp_error *err)
{
    int32_t half = m / 2, h = rank < p - 1 - rank ? rank : p - 1 - rank;
    int32_t second = rank >= p / 2;
    mp_op_list v;
    mp_status st = mp_schedule_build(MP_SCHED_DUALPIPEV, p / 2, 2, half, h, &v, err);
    if (st != MP_OK)
        return st;
    for (int32_t i = 0; i < v.n && out->n < out->cap; i++) {
        int32_t dir = v.ops[i].chunk ^ second;
        out->ops[out->n++] = (mp_op){.kind = v.ops[i].kind,
                                     .fb = v.ops[i].fb,
                                     .microbatch = v.ops[i].microbatch + dir * half,
                                     .chunk = dir};
    }
    mp_op_list_free(&v);
    return MP_OK;
}
