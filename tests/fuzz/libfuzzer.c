/* libfuzzer.c — a coverage-guided libFuzzer target (clang -fsanitize=fuzzer)
 * for one reader, chosen at compile time by FUZZ_KIND (an rt_kind): every
 * input must be refused with one line or accepted and round-trip
 * (roundtrip.h); a break aborts, so libFuzzer saves the input. Built by
 * -Dlibfuzzer=enabled with clang; run by tools/fuzz.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "roundtrip.h"

#ifndef FUZZ_KIND
#error "FUZZ_KIND must name an rt_kind"
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bool accepted;
    char why[512];
    if (!rt_check(FUZZ_KIND, (const char *)data, size, "fuzz-input", &accepted, why, sizeof why)) {
        fprintf(stderr, "round trip broken: %s\n", why);
        abort();
    }
    return 0;
}
