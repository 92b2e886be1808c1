/* schedule_vorder.h — the compute order of ZB-V from per-op times
 * (schedule_vorder.c); sim/schedule.c adds the transfers around it. */
#ifndef MP_SCHEDULE_VORDER_H
#define MP_SCHEDULE_VORDER_H

#include "sim/schedule.h"

/* ZB-V's F/B/W ops of every rank (out[0..p-1], each with room for 6m ops,
 * n = 0 on entry), in the order the list scheduling runs them, without the
 * transfers. t == NULL: unit times, no transfer time; else the fastest
 * under t of the unit-time order and two list schedulings over t. MP_EINTERNAL if the
 * scheduling stalls (it cannot: every rank can always finish its
 * micro-batches in stage order; kept as a guard), MP_ENOMEM. */
mp_status mp_schedule_zbv_order(int32_t p, int32_t m, const mp_op_times *t, mp_op_list *out,
                                mp_error *err);

#endif
