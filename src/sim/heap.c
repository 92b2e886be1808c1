#include "sim/heap.h"

#include <stdlib.h>

bool mp_heap_init(mp_heap *h, int32_t cap)
{
    h->n = 0;
    h->cap = cap;
    h->items = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *h->items);
    return h->items != NULL;
}

void mp_heap_free(mp_heap *h)
{
    free(h->items);
    h->items = NULL;
    h->n = h->cap = 0;
}

static bool before(const mp_heap_item *a, const mp_heap_item *b)
{
    return a->time < b->time || (a->time == b->time && a->id < b->id);
}

bool mp_heap_push(mp_heap *h, double time, int32_t id)
{
    if (h->n >= h->cap)
        return false;
    int32_t i = h->n++;
    mp_heap_item item = {time, id};
    while (i > 0) {
        int32_t parent = (i - 1) / 2;
        if (!before(&item, &h->items[parent]))
            break;
        h->items[i] = h->items[parent];
        i = parent;
    }
    h->items[i] = item;
    return true;
}

bool mp_heap_pop(mp_heap *h, mp_heap_item *out)
{
    if (h->n == 0)
        return false;
    *out = h->items[0];
    mp_heap_item last = h->items[--h->n];
    int32_t i = 0;
    for (;;) {
        int32_t child = 2 * i + 1;
        if (child >= h->n)
            break;
        if (child + 1 < h->n && before(&h->items[child + 1], &h->items[child]))
            child++;
        if (!before(&h->items[child], &last))
            break;
        h->items[i] = h->items[child];
        i = child;
    }
    if (h->n > 0)
        h->items[i] = last;
    return true;
}
