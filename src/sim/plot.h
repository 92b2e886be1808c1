/* plot.h — pictures of a timeline drawn by gnuplot, found at run time (never
 * needed to build). The pipeline as the Megatron papers draw it: one row per
 * rank, one colour per op kind, micro-batch numbers on the boxes; and the
 * memory of each rank over time. */
#ifndef MP_SIM_PLOT_H
#define MP_SIM_PLOT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "sim/simulate.h"
#include "sim/timeline.h"

/* Full path of gnuplot on PATH into buf; false when there is none. */
bool mp_plot_find_gnuplot(char *buf, size_t size);

/* The file the memory plot goes to for a pipeline plot path:
 * "dir/name.svg" -> "dir/name-memory.svg". */
void mp_plot_memory_path(const char *path, char *buf, size_t size);

/* Writes the pipeline plot to path and, when mem is non-empty, the memory
 * plot to mp_plot_memory_path(path). The format follows the extension: .svg
 * or .png (pngcairo when gnuplot has it, else png). Each file is written
 * atomically. MP_EINPUT for another extension, MP_ERUNTIME when gnuplot is
 * missing or fails (its message in err). units: the name of the time axis'
 * unit when times are not seconds (e.g. "units" for unit-time ops); NULL:
 * seconds, shown as s, ms or us to fit. */
mp_status mp_plot_write(const mp_timeline *t, const mp_sim_memory_point *mem, size_t n_mem,
                        const char *title, const char *units, const char *path, mp_error *err);

#endif
