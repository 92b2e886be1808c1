/* kt_mem_host.c — the host-run kernels' "device" memory: ordinary copies. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/host_order.h"
#include "kt_mem.h"

void *kt_up(const void *host, size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "kt_up: out of memory\n");
        exit(1);
    }
    memcpy(p, host, bytes);
    return p;
}

void kt_down(void *host, const void *dev, size_t bytes) { memcpy(host, dev, bytes); }

void kt_free(void *dev) { free(dev); }

bool kt_available(void) { return true; }

bool kt_reverse_order(bool reverse)
{
    mpk_host_set_reverse_order(reverse);
    return true;
}

const char *kt_where(void) { return mpk_host_reverse_order ? "host-run, reversed" : "host-run"; }
