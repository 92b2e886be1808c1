/* t5.h — T5 in the executor (t5.c, t5_block.c, t5_layers.c): an encoder
 * stack, a decoder stack with cross-attention over the encoder's output, the
 * relative position bias of each stack, ReLU. Declared for float (_f32) and
 * double (_f64); t5_decl.h is read once per precision (real.h). The model is one mp_gpt
 * whose dims say t5: mp_gpt_init / forward / backward hand it to these. */
#ifndef MP_EXEC_T5_H
#define MP_EXEC_T5_H

#include <stdbool.h>

#include "exec/kernels.h"

/* The relative position bucket (HF T5's _relative_position_bucket, 32
 * buckets, maximum distance 128) of key position j seen from query position
 * i, rel = j - i: bidirectional (the encoder) or causal (the decoder). */
int mp_t5_bucket(int rel, bool bidirectional);

#define MP_REAL_PASS 32
#include "exec/t5_decl.h"
#undef MP_REAL_PASS
#define MP_REAL_PASS 64
#include "exec/t5_decl.h"
#undef MP_REAL_PASS
#include "exec/real.h" /* back to the including file's own precision, if any */

#endif
