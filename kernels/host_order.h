/* host_order.h — the order in which the host-run kernels (host_grid.h) run
 * blocks and threads. Reversed, a phase whose threads depend on each other
 * (a race on a GPU) gives another result than in the first-to-last order, so
 * the kernel tests run both. The variable lives in quantize.cu's host build. */
#ifndef MP_KERNELS_HOST_ORDER_H
#define MP_KERNELS_HOST_ORDER_H

/* Nonzero: last to first. */
extern int mpk_host_reverse_order;
void mpk_host_set_reverse_order(int reverse);

#endif
