/* refdata_moe.h — the published mixture-of-experts training runs of
 * tests/data/moe/ as megaplan configurations.
 *
 * The files mix systems, precisions and frameworks, so unlike the dense
 * sets of refdata.h every row names its own hardware profile, precision,
 * FP8 recipe and degrees (columns read by name). A row megaplan cannot
 * express (a system without a profile, a model without a preset, a module
 * the cost model lacks) is kept with the reason, never dropped: the
 * programs list it. Library rules as refdata.h. */
#ifndef MP_TOOLS_REFDATA_MOE_H
#define MP_TOOLS_REFDATA_MOE_H
#include <stdbool.h>

#include "core/config.h"
#include "core/error.h"
#include "tools/refdata.h"

typedef struct refdata_moe_row {
    const char *file;          /* relative to the data folder */
    int line;
    char label[192];           /* as docs/validation.md prints it */
    bool expressible;          /* false: reason says why, config is partial */
    char reason[256];
    mp_config config;          /* with the file's assumptions applied */
    double measured_s;         /* step time: the published step, else
                                  global batch x seq / (tokens/s/GPU x GPUs) */
    double tokens_per_s_per_gpu;
} refdata_moe_row;

typedef struct refdata_moe_set {
    refdata_moe_row *rows;     /* malloc'ed; refdata_moe_free */
    int n;
    refdata_role role;         /* every file's, which must agree */
    const char *note;          /* the assumptions, one paragraph */
} refdata_moe_set;

/* Reads every file of tests/data/moe/ (dir = tests/data). A missing file, a
 * bad number or files of different roles are errors; a row megaplan cannot
 * express is a row with expressible false. */
mp_status refdata_moe_read(const char *dir, refdata_moe_set *out, mp_error *err);

/* The same for tests/data/moe/megatron_bridge_ep_overlap_ab.csv: Megatron-Bridge's
 * published A/B pairs of the EP all-to-all overlap (role fit), a set of its own. */
mp_status refdata_moe_read_overlap_ab(const char *dir, refdata_moe_set *out, mp_error *err);

void refdata_moe_free(refdata_moe_set *s);

#endif
