/* moe_pick.c — which experts a token goes to (moe.h): the top-k of its
 * selection scores, within the best groups when the routing is group-limited
 * (DeepSeek-V3; Megatron-Core's group_limited_topk, moe_utils.py). Apart from
 * the layer so that a test can hold it to hand-made scores. */
#include "exec/moe.h"

/* The best of s[0..n) not yet taken (equal: the lower index); n when none. */
static size_t best_left(const double *s, const unsigned char *taken, size_t n)
{
    size_t best = n;
    for (size_t i = 0; i < n; i++)
        if (!taken[i] && (best == n || s[i] > s[best]))
            best = i;
    return best;
}

void mp_moe_pick(const double *q, size_t E, size_t k, size_t groups, size_t group_k, bool f32,
                 size_t *choice, unsigned char *scratch, double *gscore)
{
    unsigned char *taken = scratch;
    for (size_t e = 0; e < E; e++)
        taken[e] = 0;
    if (groups > 1 && group_k < groups) {
        /* a group's score: the sum of its k / group_k best scores (DeepSeek-V3:
         * 8 / 4, its top two), added best first in the scores' precision */
        size_t per = E / groups, m = k / group_k;
        unsigned char *gtaken = scratch + E;
        for (size_t gi = 0; gi < groups; gi++) {
            const double *qs = q + gi * per;
            unsigned char *t = taken + gi * per;
            double sum = 0;
            for (size_t j = 0; j < m; j++) {
                size_t b = best_left(qs, t, per);
                t[b] = 1;
                sum = j ? sum + qs[b] : qs[b];
                if (f32)
                    sum = (double)(float)sum;
            }
            for (size_t i = 0; i < per; i++)
                t[i] = 0;
            gscore[gi] = sum;
            gtaken[gi] = 0;
        }
        /* the group_k best groups (equal: the lower index); the other
         * groups' experts are out of reach */
        for (size_t j = 0; j < group_k; j++)
            gtaken[best_left(gscore, gtaken, groups)] = 1;
        for (size_t e = 0; e < E; e++)
            taken[e] = !gtaken[e / per];
    }
    for (size_t j = 0; j < k; j++) { /* the best left; equal scores: the lower index */
        size_t b = best_left(q, taken, E);
        taken[b] = 1;
        choice[j] = b;
    }
}
