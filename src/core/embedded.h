/* embedded.h — the hardware profiles (the YAML files of hwprofiles/) compiled into the
 * library as text by tools/embed_files.py, so `--hw dgx-a100` works from any
 * folder. Name = the file's basename without ".yaml". */
#ifndef MP_EMBEDDED_H
#define MP_EMBEDDED_H

#include <stddef.h>

typedef struct mp_embedded_file {
    const char *name;
    const char *text;
    size_t len;
} mp_embedded_file;

extern const mp_embedded_file mp_hwprofile_files[];
extern const int mp_hwprofile_count;

#endif
