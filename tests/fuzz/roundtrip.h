/* roundtrip.h — the property every reader and writer keeps: what megaplan
 * accepts (a model YAML, a HuggingFace config.json, a hardware YAML, a plan),
 * its writers put in a form it reads back to the same model, hardware and
 * plan; a model it accepts also goes into a plan file that reads back.
 * Shared by the unit property test, the gcc fuzz suite and the libFuzzer targets. */
#ifndef MP_TEST_ROUNDTRIP_H
#define MP_TEST_ROUNDTRIP_H

#include <stdbool.h>
#include <stddef.h>

#include "core/io.h"

typedef enum { RT_MODEL_YAML, RT_HW_YAML, RT_PLAN_YAML, RT_HF_JSON, RT_KIND_COUNT } rt_kind;

/* Reads text as kind. Returns true when it is refused with a one-line
 * message (MP_EINPUT/MP_EIO) or accepted and every write -> read gives it
 * back; false with why filled otherwise. *accepted says which. */
bool rt_check(rt_kind kind, const char *text, size_t len, const char *origin, bool *accepted,
              char *why, size_t why_size);

/* The round trips of one accepted value (false with why filled on a break). */
bool rt_model(const mp_model *m, char *why, size_t why_size);
bool rt_hw(const mp_hw *hw, char *why, size_t why_size);
bool rt_plan(const mp_plan *p, char *why, size_t why_size);

#endif
