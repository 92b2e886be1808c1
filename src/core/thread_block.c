/* thread_block.c — see thread_block.h. */
#include "core/thread_block.h"

#include <stdlib.h>

static pthread_mutex_t key_lock = PTHREAD_MUTEX_INITIALIZER;

void *mp_thread_block_get(mp_thread_block *b, size_t size)
{
    if (atomic_load(&b->state) == 0) { /* the key, made once for all threads */
        pthread_mutex_lock(&key_lock);
        if (atomic_load(&b->state) == 0)
            atomic_store(&b->state, pthread_key_create(&b->key, b->destroy) == 0 ? 1 : 2);
        pthread_mutex_unlock(&key_lock);
    }
    if (atomic_load(&b->state) != 1)
        return NULL;
    void *p = pthread_getspecific(b->key);
    if (!p) {
        p = calloc(1, size);
        if (p && pthread_setspecific(b->key, p) != 0) {
            free(p);
            p = NULL;
        }
    }
    return p;
}
