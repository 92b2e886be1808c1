/* t5_bucket.c — T5's relative position buckets (t5.h): integer arithmetic,
 * the same for both precisions, so compiled once. */
#include <math.h>
#include <stdbool.h>

#include "exec/t5.h"

int mp_t5_bucket(int rel, bool bidirectional)
{
    /* half the buckets for keys after the query when both directions count;
     * the first half of a direction's buckets are exact distances, the rest
     * logarithmic up to the maximum distance */
    int nb = MP_T5_BUCKETS, ret = 0, n;
    if (bidirectional) {
        nb /= 2;
        ret = rel > 0 ? nb : 0;
        n = rel < 0 ? -rel : rel;
    } else {
        n = rel < 0 ? -rel : 0;
    }
    int exact = nb / 2;
    if (n < exact)
        return ret + n;
    int large = exact + (int)(log((double)n / exact) /
                              log((double)MP_T5_MAX_DISTANCE / exact) * (nb - exact));
    return ret + (large < nb - 1 ? large : nb - 1);
}
