/* schedule_internal.h — builders of sim/schedule.c that live in files of
 * their own. */
#ifndef MP_SCHEDULE_INTERNAL_H
#define MP_SCHEDULE_INTERNAL_H

#include "sim/schedule.h"

/* DualPipe's op list for pipeline `rank` (p even, m even, m >= 2p, checked by
 * the caller), appended to `out`, which has room for 7m ops. */
mp_status mp_schedule_build_dualpipe(int32_t p, int32_t m, int32_t rank, mp_op_list *out,
                                     mp_error *err);

#endif
