/* plot.h — pictures of a timeline drawn by gnuplot, found at run time (never
 * needed to build). The pipeline as the Megatron papers draw it: one row per
 * rank, one colour per op kind, micro-batch numbers on the boxes; and the
 * memory of each rank over time. */
#ifndef MP_SIM_PLOT_H
#define MP_SIM_PLOT_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"
#include "core/error.h"
#include "sim/simulate.h"
#include "sim/timeline.h"

/* Full path of gnuplot on PATH into buf; false when there is none. */
bool mp_plot_find_gnuplot(char *buf, size_t size);

/* The file the memory plot goes to for a pipeline plot path:
 * "dir/name.svg" -> "dir/name-memory.svg". */
void mp_plot_memory_path(const char *path, char *buf, size_t size);

/* MP_OK when path can name a picture: a name, then .svg or .png (any case).
 * Else MP_EINPUT, field --plot (".svg" alone was written as a hidden file,
 * its memory picture as "-memory.svg"). */
mp_status mp_plot_check_path(const char *path, mp_error *err);

/* What mp_plot_write needs besides the timeline. */
typedef struct mp_plot_options {
    const char *title;
    const char *time_unit;   /* the time axis' unit when times are not seconds
                              * ("units" for unit-time ops); NULL: seconds,
                              * shown as s, ms or us to fit */
    const char *memory_unit; /* likewise for memory (bytes / 2^30 in that unit);
                              * NULL: GiB */
    double capacity_bytes;   /* > 0: a line at the GPU's memory on the memory plot */
    bool force;              /* replace read-only files (core/output.h) */
} mp_plot_options;

/* The message when gnuplot is not on PATH: how to get it. */
#define MP_PLOT_NO_GNUPLOT                                                                     \
    "gnuplot not found on PATH: install it (Debian/Ubuntu: apt-get install gnuplot-nox) or "   \
    "leave out --plot"

/* Writes the pipeline plot to path and, when mem is non-empty, the memory
 * plot to mp_plot_memory_path(path). The format follows the extension: .svg
 * or .png (pngcairo when gnuplot has it, else png). Both files are written
 * as core/output.h says, and only when both pictures were drawn. Every
 * virtual chunk has its own shade and key entry; ops narrower than a pixel
 * are drawn together. MP_EINPUT for another extension or a read-only target
 * without force, MP_ERUNTIME when gnuplot is missing or fails (its message
 * in err). */
/* Another picture drawn the same way (the hardware search's Pareto front):
 * data goes to a temporary file, the terminal and output are set for path's
 * format and size, and script(b, data_path, user) writes the rest of the
 * gnuplot script. path as core/output.h says; errors as mp_plot_write's. */
typedef void (*mp_plot_script_fn)(mp_buf *b, const char *data_path, void *user);
mp_status mp_plot_custom(const char *path, bool force, int width, int height, const mp_buf *data,
                         mp_plot_script_fn script, void *user, mp_error *err);

mp_status mp_plot_write(const mp_timeline *t, const mp_sim_memory_point *mem, size_t n_mem,
                        const char *path, const mp_plot_options *o, mp_error *err);

#endif
