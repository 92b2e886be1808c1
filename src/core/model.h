/* model.h — a Transformer's shape: everything the cost model and the
 * executor need to know about the network, nothing about how it is split. */
#ifndef MP_MODEL_H
#define MP_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"

typedef enum { MP_ARCH_GPT, MP_ARCH_BERT, MP_ARCH_T5, MP_ARCH_LLAMA, MP_ARCH_COUNT } mp_arch;
typedef enum { MP_ACT_GELU, MP_ACT_SWIGLU, MP_ACT_RELU, MP_ACT_COUNT } mp_activation;
typedef enum { MP_NORM_LAYERNORM, MP_NORM_RMSNORM, MP_NORM_COUNT } mp_norm;
typedef enum { MP_POS_LEARNED, MP_POS_ROPE, MP_POS_RELATIVE, MP_POS_COUNT } mp_position;

#define MP_NAME_MAX 64
#define MP_MAX_LAYERS 2048 /* more is refused as absurd */

typedef struct mp_model {
    char name[MP_NAME_MAX];
    mp_arch arch;
    int64_t layers;         /* transformer blocks in total; t5: encoder_layers + decoder_layers */
    int64_t encoder_layers; /* t5 only (0 otherwise) */
    int64_t decoder_layers; /* t5 only (0 otherwise) */
    int64_t hidden;         /* h */
    int64_t heads;          /* a */
    int64_t kv_heads;       /* == heads unless grouped-query attention */
    int64_t head_dim;       /* hidden/heads unless the model says otherwise (t5-11b: 128) */
    int64_t ffn_hidden;     /* 4h for GPT; SwiGLU models have 3 matrices of h x ffn_hidden */
    int64_t vocab;          /* V */
    int64_t seq;            /* s; t5: encoder_seq */
    int64_t encoder_seq;    /* t5 only */
    int64_t decoder_seq;    /* t5 only */
    mp_activation activation;
    mp_norm norm;
    mp_position position;
    bool tied_embeddings;
} mp_model;

/* Names used in files and on the command line ("gpt", "swiglu", ...). */
const char *mp_arch_name(mp_arch a);
const char *mp_activation_name(mp_activation a);
const char *mp_norm_name(mp_norm n);
const char *mp_position_name(mp_position p);

/* Fills derived defaults (kv_heads = heads, head_dim = hidden/heads, t5 layer
 * and seq sums, ...) and checks consistency: positive sizes, heads divisible by
 * kv_heads, nothing absurd (sizes that would overflow the cost model's int64
 * or double arithmetic are refused). Field names in err are the YAML keys. */
mp_status mp_model_finish(mp_model *m, mp_error *err);

/* Built-in presets (core/presets.c). Names are lower case family-size
 * ("gpt3-175b", "llama3-70b", "megatron-1t", "bert-large", "t5-11b"); the
 * GPT/Megatron line, and LLaMAs whose size no other preset has, also answer
 * to size-only aliases ("175B", "530B", "1T", "8B", case-insensitive).
 * Returns NULL when unknown. */
const mp_model *mp_model_preset(const char *name);
/* Iteration over presets: returns NULL past the end. */
const mp_model *mp_model_preset_at(int index);
/* The published parameter count a preset is checked against (0 when none). */
double mp_model_preset_published_params(const char *name);

#endif
