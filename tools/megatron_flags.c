/* megatron_flags.c — `megatron-flags PLAN.yaml`: the plan's Megatron-LM flags
 * (the same as `search --format megatron` writes for its winner), for
 * tools/megatron-check.sh, which hands them to Megatron-LM's own parser. */
#include <stdio.h>

#include "core/io.h"
#include "core/plan.h"
#include "planner/megatron.h"

static mp_plan plan; /* large: not on the stack */

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: megatron-flags PLAN.yaml\n");
        return 2;
    }
    mp_error err = {0};
    if (mp_plan_read_file(argv[1], &plan, &err) != MP_OK) {
        fprintf(stderr, "megatron-flags: %s: %s%s%s\n", argv[1], err.field,
                err.field[0] ? ": " : "", err.msg);
        return 2;
    }
    mp_buf b;
    mp_buf_init(&b);
    mp_megatron_args(&plan.config, &plan, &b);
    if (b.oom) {
        fprintf(stderr, "megatron-flags: out of memory\n");
        return 1;
    }
    fputs(b.data ? b.data : "", stdout);
    mp_buf_free(&b);
    return 0;
}
