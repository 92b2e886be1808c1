/* cost_memo.c — the memo of per-item costs (cost_memo.h): an open-addressing
 * table from the blanked parallel settings to slots carved from large blocks. */
#include "planner/cost_memo.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "planner/cost_internal.h"

/* Slots kept at most: DeepSeek-V3's search on 2048 GPUs fills ~23000 (about
 * 1.5 kB each); past the cap estimates go uncached rather than grow memory. */
#define MEMO_MAX_SLOTS (1u << 16)
#define MEMO_BLOCK_SLOTS 1024

/* Blob bytes kept at most (keys and values): past it, lookups still answer
 * but nothing new is stored. */
#define MEMO_MAX_BLOB_BYTES ((size_t)64 << 20)

typedef struct blob {
    uint64_t hash; /* 0: empty */
    size_t key_size, val_size;
    unsigned char *kv; /* the key's bytes, then the value's */
} blob;

typedef struct memo_entry {
    uint64_t hash; /* 0: empty */
    mp_parallel key;
    unsigned char *slot;
} memo_entry;

struct mp_cost_memo {
    bool have_base; /* the model, hardware and training below are the keys' */
    mp_model model;
    mp_hw hw;
    mp_training training;
    unsigned char *base_slot; /* mp_cost_memo_base_slot's */
    size_t base_size;
    bool base_filled;
    size_t size; /* bytes per slot: fixed by the first use */
    memo_entry *tab;
    size_t cap, n;
    unsigned char **blocks; /* slots, MEMO_BLOCK_SLOTS per block */
    size_t nblocks;
    blob *blobs; /* mp_cost_memo_blob's: open addressing, hash 0 empty */
    size_t blob_cap, blob_n, blob_bytes;
};

mp_cost_memo *mp_cost_memo_new(void)
{
    return calloc(1, sizeof(mp_cost_memo));
}

static void memo_clear(mp_cost_memo *memo)
{
    for (size_t i = 0; i < memo->nblocks; i++)
        free(memo->blocks[i]);
    free(memo->blocks);
    free(memo->tab);
    free(memo->base_slot);
    memo->blocks = NULL;
    memo->tab = NULL;
    memo->base_slot = NULL;
    memo->base_filled = false;
    memo->nblocks = memo->cap = memo->n = memo->base_size = 0;
}

void mp_cost_memo_free(mp_cost_memo *memo)
{
    if (!memo)
        return;
    memo_clear(memo);
    for (size_t i = 0; i < memo->blob_cap; i++)
        free(memo->blobs[i].kv);
    free(memo->blobs);
    free(memo);
}

static uint64_t blob_hash(const void *key, size_t key_size)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = key;
    for (size_t i = 0; i < key_size; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h ? h : 1;
}

static blob *blob_find(blob *tab, size_t cap, uint64_t h, const void *key, size_t key_size)
{
    for (size_t i = h & (cap - 1);; i = (i + 1) & (cap - 1)) {
        blob *e = &tab[i];
        if (!e->hash || (e->hash == h && e->key_size == key_size &&
                         !memcmp(e->kv, key, key_size)))
            return e;
    }
}

/* The value sits after the key, at the next offset aligned for any type:
 * keys come in any byte length, and the callers keep structs of doubles. */
static size_t value_offset(size_t key_size)
{
    size_t a = _Alignof(max_align_t);
    return (key_size + a - 1) / a * a;
}

void *mp_cost_memo_blob(mp_cost_memo *memo, const void *key, size_t key_size, size_t val_size,
                        bool *filled)
{
    *filled = false;
    if (!memo || !key_size)
        return NULL;
    uint64_t h = blob_hash(key, key_size);
    if (memo->blob_cap) {
        blob *e = blob_find(memo->blobs, memo->blob_cap, h, key, key_size);
        if (e->hash) {
            if (e->val_size != val_size)
                return NULL;
            *filled = true;
            return e->kv + value_offset(e->key_size);
        }
    }
    if (memo->blob_bytes + key_size + val_size > MEMO_MAX_BLOB_BYTES)
        return NULL;
    if (2 * (memo->blob_n + 1) > memo->blob_cap) {
        size_t cap = memo->blob_cap ? 2 * memo->blob_cap : 256;
        blob *tab = calloc(cap, sizeof *tab);
        if (!tab)
            return NULL;
        for (size_t i = 0; i < memo->blob_cap; i++)
            if (memo->blobs[i].hash)
                *blob_find(tab, cap, memo->blobs[i].hash, memo->blobs[i].kv,
                           memo->blobs[i].key_size) = memo->blobs[i];
        free(memo->blobs);
        memo->blobs = tab;
        memo->blob_cap = cap;
    }
    unsigned char *kv = malloc(value_offset(key_size) + val_size);
    if (!kv)
        return NULL;
    memcpy(kv, key, key_size);
    blob *e = blob_find(memo->blobs, memo->blob_cap, h, key, key_size);
    *e = (blob){.hash = h, .key_size = key_size, .val_size = val_size, .kv = kv};
    memo->blob_n++;
    memo->blob_bytes += key_size + val_size;
    return kv + value_offset(key_size);
}

size_t mp_cost_memo_size(const mp_cost_memo *memo)
{
    return memo ? memo->n : 0;
}

void mp_cost_memo_key(const mp_parallel *p, mp_parallel *key)
{
    /* the whole struct, padding included, so that a field added later is in
     * the key (cost_memo.h); then the fields item details do not read */
    memcpy(key, p, sizeof *key);
    bool split_w = mp_schedule_splits_backward(p->schedule) && p->pp > 1;
    key->pp = 0;
    key->vpp = 0;
    key->schedule = split_w ? MP_SCHED_ZBH1 : MP_SCHED_1F1B;
    memset(key->pipeline_layout, 0, sizeof key->pipeline_layout);
    key->first_stage_layers = key->last_stage_layers = 0;
    key->account_for_embedding = key->account_for_loss = false;
    key->dp = 0;
    key->dist_opt = false;
    key->zero = 0;
    key->hsdp = false;
    key->dp_overlap = false;
    key->p2p_overlap = false;
    key->nccl_ub = false;
    key->recompute = MP_RECOMPUTE_NONE;
}

static uint64_t key_hash(const mp_parallel *key)
{
    /* FNV-1a over the key's bytes, eight at a time */
    const unsigned char *b = (const unsigned char *)key;
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i = 0;
    for (; i + 8 <= sizeof *key; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
    }
    for (; i < sizeof *key; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h ? h : 1;
}

/* The memo serves one model, machine and training at a time: another one
 * (byte for byte) empties it. */
static void memo_rebase(mp_cost_memo *memo, const mp_config *c)
{
    if (memo->have_base && !memcmp(&memo->model, &c->model, sizeof c->model) &&
        !memcmp(&memo->hw, &c->hw, sizeof c->hw) &&
        !memcmp(&memo->training, &c->training, sizeof c->training))
        return;
    memo_clear(memo);
    memcpy(&memo->model, &c->model, sizeof c->model);
    memcpy(&memo->hw, &c->hw, sizeof c->hw);
    memcpy(&memo->training, &c->training, sizeof c->training);
    memo->have_base = true;
}

static bool memo_grow(mp_cost_memo *memo)
{
    size_t cap = memo->cap ? memo->cap * 2 : 4096;
    memo_entry *t = calloc(cap, sizeof *t);
    if (!t)
        return false;
    for (size_t i = 0; i < memo->cap; i++) {
        if (!memo->tab[i].hash)
            continue;
        size_t j = (size_t)memo->tab[i].hash & (cap - 1);
        while (t[j].hash)
            j = (j + 1) & (cap - 1);
        t[j] = memo->tab[i];
    }
    free(memo->tab);
    memo->tab = t;
    memo->cap = cap;
    return true;
}

/* A fresh slot of memo->size bytes, or NULL. */
static unsigned char *memo_new_slot(mp_cost_memo *memo)
{
    size_t in_block = memo->n % MEMO_BLOCK_SLOTS;
    if (in_block == 0) {
        unsigned char **b = realloc(memo->blocks, sizeof *b * (memo->nblocks + 1));
        if (!b)
            return NULL;
        memo->blocks = b;
        b[memo->nblocks] = malloc(memo->size * MEMO_BLOCK_SLOTS);
        if (!b[memo->nblocks])
            return NULL;
        memo->nblocks++;
    }
    return memo->blocks[memo->nblocks - 1] + in_block * memo->size;
}

void *mp_cost_memo_base_slot(mp_cost_memo *memo, const mp_config *c, size_t size, bool *filled)
{
    *filled = false;
    if (!memo || size == 0)
        return NULL;
    memo_rebase(memo, c);
    if (!memo->base_slot) {
        memo->base_slot = malloc(size);
        memo->base_size = size;
    }
    if (!memo->base_slot || size != memo->base_size)
        return NULL;
    *filled = memo->base_filled;
    memo->base_filled = true; /* the caller fills it now */
    return memo->base_slot;
}

void *mp_cost_memo_slot(mp_cost_memo *memo, const mp_config *c, size_t size, bool *filled)
{
    *filled = false;
    if (!memo || size == 0)
        return NULL;
    memo_rebase(memo, c);
    if (memo->n == 0)
        memo->size = size;
    if (size != memo->size)
        return NULL;
    mp_parallel key;
    mp_cost_memo_key(&c->parallel, &key);
    uint64_t h = key_hash(&key);
    if (memo->cap) {
        for (size_t j = (size_t)h & (memo->cap - 1); memo->tab[j].hash;
             j = (j + 1) & (memo->cap - 1)) {
            memo_entry *e = &memo->tab[j];
            if (e->hash == h && !memcmp(&e->key, &key, sizeof key)) {
                *filled = true;
                return e->slot;
            }
        }
    }
    if (memo->n >= MEMO_MAX_SLOTS || ((memo->n + 1) * 2 > memo->cap && !memo_grow(memo)))
        return NULL;
    unsigned char *slot = memo_new_slot(memo);
    if (!slot)
        return NULL;
    size_t j = (size_t)h & (memo->cap - 1);
    while (memo->tab[j].hash)
        j = (j + 1) & (memo->cap - 1);
    memo->tab[j].hash = h;
    memcpy(&memo->tab[j].key, &key, sizeof key); /* padding too: memcmp compares it */
    memo->tab[j].slot = slot;
    memo->n++;
    return slot;
}
