/* mpi_util.h — what the MPI-based parts of the backend share: the MPI type
 * and size of a real kind, and an MPI error as an mp_error. */
#ifndef MP_EXEC_MPI_UTIL_H
#define MP_EXEC_MPI_UTIL_H

#include <stddef.h>

#include <mpi.h>

#include "core/error.h"
#include "exec/backend.h"

static inline MPI_Datatype mp_mpi_type(mp_real_kind kind)
{
    return kind == MP_REAL32 ? MPI_FLOAT : MPI_DOUBLE;
}

static inline size_t mp_real_size(mp_real_kind kind)
{
    return kind == MP_REAL32 ? sizeof(float) : sizeof(double);
}

static inline mp_status mp_mpi_failed(int rc, const char *what, mp_error *err)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    return mp_error_set(err, MP_ERUNTIME, NULL, 0, 0, NULL, "%s failed: %s", what, text);
}

#endif
