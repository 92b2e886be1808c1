/* kt_mem.h — where the kernel tests' buffers live: device memory for the
 * CUDA library (kt_mem_cuda.c), plain host copies for the host-run one
 * (kt_mem_host.c). The test source is the same for both. */
#ifndef MP_TESTS_KT_MEM_H
#define MP_TESTS_KT_MEM_H

#include <stdbool.h>
#include <stddef.h>

/* A device (or host-run) copy of bytes at host; aborts the test run on failure. */
void *kt_up(const void *host, size_t bytes);
/* Waits for the kernels and copies bytes of dev back to host. */
void kt_down(void *host, const void *dev, size_t bytes);
void kt_free(void *dev);
/* false: no device to run on (the test binary then exits 77, skipped). */
bool kt_available(void);
/* Host-run kernels only: run blocks and threads last to first (a phase whose
 * threads depend on each other then gives another result). false: not
 * supported (a GPU runs its threads at once). */
bool kt_reverse_order(bool reverse);
/* "host-run" or "cuda". */
const char *kt_where(void);

#endif
