/* heap.h — a binary min-heap of (time, id) for the event engine. Storage is
 * one flat array sized once, so pushing and popping never allocate. */
#ifndef MP_SIM_HEAP_H
#define MP_SIM_HEAP_H

#include <stdbool.h>
#include <stdint.h>

typedef struct mp_heap_item {
    double time;
    int32_t id;
} mp_heap_item;

typedef struct mp_heap {
    mp_heap_item *items;
    int32_t n, cap;
} mp_heap;

/* Returns false when the storage cannot be allocated. */
bool mp_heap_init(mp_heap *h, int32_t cap);
void mp_heap_free(mp_heap *h);
/* Returns false when full (a caller bug: capacity is the number of ids). */
bool mp_heap_push(mp_heap *h, double time, int32_t id);
/* Earliest item; ties go to the lower id, so runs are deterministic. */
bool mp_heap_pop(mp_heap *h, mp_heap_item *out);

#endif
