/* thread_block.h — one block of memory per thread under a pthread key: the
 * first call on a thread allocates it (zeroed), the key's destructor frees it
 * at the thread's exit. For tables a thread fills and reads alone
 * (planner/pipeline.c's stash walks, sim/schedule_vorder.c's V orders), kept
 * off static thread-local storage, which every thread of every program (exec's
 * MPI and BLAS threads too) would carry. */
#ifndef MP_THREAD_BLOCK_H
#define MP_THREAD_BLOCK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

typedef struct mp_thread_block {
    void (*destroy)(void *); /* frees one thread's block */
    atomic_int state;        /* 0: no key yet, 1: key made, 2: none could be made */
    pthread_key_t key;
} mp_thread_block;

/* A static mp_thread_block whose blocks destroy frees. */
#define MP_THREAD_BLOCK(destroy) {(destroy), 0, 0}

/* This thread's block of size bytes (the same size on every call for b);
 * NULL without memory or a key. */
void *mp_thread_block_get(mp_thread_block *b, size_t size);

#endif
