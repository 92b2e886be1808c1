/* tools/embed_files.py: the generated C string equals the file byte for byte
 * (quotes, backslashes, "??" trigraph look-alikes, tabs, CR, non-ASCII and
 * control bytes, no final newline). Linked without libmegaplan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/embedded.h"

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    FILE *f = fopen(argv[1], "rb");
    if (!f)
        return 2;
    static char want[1 << 16];
    size_t n = fread(want, 1, sizeof want, f);
    fclose(f);
    if (mp_hwprofile_count != 1 || strcmp(mp_hwprofile_files[0].name, "embed-tricky")) {
        fprintf(stderr, "wrong entries\n");
        return 1;
    }
    if (mp_hwprofile_files[0].len != n || memcmp(mp_hwprofile_files[0].text, want, n) ||
        mp_hwprofile_files[0].text[n] != '\0') {
        fprintf(stderr, "text differs\n");
        return 1;
    }
    printf("ok: %zu bytes\n", n);
    return 0;
}
