/* rope.cu — rotary position embeddings (layers.c mp_rope): element k and
 * k + hd/2 of each head turn by pos * inv_freq[k] and are scaled by mscale
 * (the host's frequencies and attention factor, exec/rope.h). The angles'
 * cos and sin come from the host (mpk_rope_table, the CPU's double-precision
 * libm calls), so the device never evaluates a trigonometric function of its
 * own. */
#include "host_grid.h"

void mpk_rope_table(float *cs, const int32_t *pos, int s, int hd, const double *inv_freq,
                    double mscale, bool exact)
{
    int half = hd / 2;
    mk_grid gp = mk_grid_of(MP_Q_PROB, 2 * MP_EXACT_MAX_INT);
    for (int i = 0; i < s; i++)
        for (int k = 0; k < half; k++) {
            double angle = (double)pos[i] * inv_freq[k];
            float c = (float)(cos(angle) * mscale), sn = (float)(sin(angle) * mscale);
            cs[((size_t)i * half + k) * 2] = exact ? mk_round_to(c, gp) : c;
            cs[((size_t)i * half + k) * 2 + 1] = exact ? mk_round_to(sn, gp) : sn;
        }
}

/* Item (row r = i*b + n, head a, k < half) turns the pair (k, k + half). */
MK_KERNEL mk_rope_kernel(float *x, size_t ld, size_t heads, size_t hd, const float *cs, size_t s,
                         size_t b, bool inverse, bool exact, mk_grid g)
{
    size_t half = hd / 2;
    MK_THREADS(t)
    {
        MK_EACH(t, it, s * b * heads * half)
        {
            size_t k = it % half, a = it / half % heads, r = it / half / heads, i = r / b;
            float c = cs[(i * half + k) * 2], sn = cs[(i * half + k) * 2 + 1];
            if (inverse)
                sn = -sn;
            float *x1 = x + r * ld + a * hd + k, *x2 = x1 + half;
            float u = *x1, v = *x2;
            float o1 = u * c - v * sn, o2 = v * c + u * sn;
            *x1 = exact ? mk_round_to(o1, g) : o1;
            *x2 = exact ? mk_round_to(o2, g) : o2;
        }
    }
}

int mpk_rope(float *x, size_t ld, int heads, int hd, const float *cs, int s, int b,
             bool inverse, bool exact, int grid, void *stream)
{
    if (heads < 0 || hd < 0 || hd % 2 || s < 0 || b < 0 || (size_t)heads * (size_t)hd > ld)
        return MPK_EINVAL;
    size_t n = (size_t)s * (size_t)b * (size_t)heads * (size_t)(hd / 2);
    MK_ELEMENTWISE(n, stream, mk_rope_kernel, x, ld, (size_t)heads, (size_t)hd, cs, (size_t)s,
                   (size_t)b, inverse, exact, mk_grid_of(grid, MP_EXACT_MAX_INT));
}
