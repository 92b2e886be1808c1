/* backend_pick.c — the backend `exec --backend` names, for this rank. */
#include <string.h>

#include "exec/calibrate.h"
#include "exec/exec.h"
#include "megaplan_config.h"
#if defined(MP_WITH_CUDA) || defined(MP_CUDA_HOST_SHIM)
#include "exec/backend_cuda.h"
#endif

mp_status mp_exec_backend_available(const char *name, mp_error *err)
{
    if (!name || !strcmp(name, "cpu"))
        return MP_OK;
    if (strcmp(name, "cuda"))
        return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--backend",
                            "unknown backend '%s' (cpu, cuda)", name);
#if defined(MP_WITH_CUDA) || defined(MP_CUDA_HOST_SHIM)
    int devices = 0;
    return mp_cuda_devices(&devices, err);
#else
    return mp_error_set(err, MP_EINPUT, NULL, 0, 0, "--backend",
                        "this megaplan was built without the CUDA backend (meson setup "
                        "-Dcuda=enabled, with the CUDA toolkit in /usr/local/cuda)");
#endif
}

mp_status mp_exec_backend(const mp_runtime *rt, const mp_exec_opts *o, bool low_precision,
                          const mp_group *const *extra, int n_extra, const mp_backend **be,
                          mp_error *err)
{
    const char *name = o->backend ? o->backend : "cpu";
    if (!strcmp(name, "cpu")) {
        *be = rt->solo ? mp_backend_solo() : mp_backend_cpu();
        return MP_OK;
    }
    mp_status st = mp_exec_backend_available(name, err);
    if (st)
        return st;
#if defined(MP_WITH_CUDA) || defined(MP_CUDA_HOST_SHIM)
    mp_cuda_setup s;
    memset(&s, 0, sizeof s);
    s.bf16 = low_precision && !o->exact;
    s.solo = rt->solo;
    s.world = rt->world.comm;
    const mp_group *groups[] = {&rt->tp_group, &rt->cp_group, &rt->dp_group,
                                &rt->pp_group, &rt->emb_group, &rt->dpcp_group};
    for (size_t i = 0; i < sizeof groups / sizeof *groups; i++)
        s.groups[s.n_groups++] = groups[i];
    for (int i = 0; i < n_extra && s.n_groups < MP_CUDA_MAX_GROUPS; i++)
        s.groups[s.n_groups++] = extra[i];
    const mp_backend *cuda = NULL;
    st = mp_backend_cuda_open(&s, &cuda, err);
    if (st)
        return st;
    *be = rt->solo ? mp_backend_solo_of(cuda) : cuda;
    return MP_OK;
#else
    (void)rt, (void)low_precision, (void)extra, (void)n_extra, (void)be;
    return MP_EINTERNAL; /* mp_exec_backend_available refused it */
#endif
}

mp_status mp_calibrate_backend(const mp_runtime *rt, const char *name, const mp_backend **be,
                               mp_calib_device *dev, bool *is_device, mp_error *err)
{
    memset(dev, 0, sizeof *dev);
    *is_device = false;
    mp_status st = mp_exec_backend_available(name, err);
    if (st)
        return st;
    if (!name || !strcmp(name, "cpu")) {
        *be = mp_backend_cpu();
        return MP_OK;
    }
#if defined(MP_WITH_CUDA) || defined(MP_CUDA_HOST_SHIM)
    mp_cuda_setup s;
    memset(&s, 0, sizeof s);
    s.bf16 = true; /* the curve the cost model reads for bf16 plans */
    s.world = rt->world.comm;
    s.groups[s.n_groups++] = &rt->world;
    if ((st = mp_backend_cuda_open(&s, be, err)))
        return st;
    *is_device = true;
    mp_cuda_describe(dev->device, sizeof dev->device, &dev->memory);
    if ((st = mp_cuda_gemm_peak(4096, false, &dev->fp32_peak, err)))
        return st;
    return mp_cuda_gemm_peak(8192, true, &dev->cublas_bf16, err);
#else
    (void)rt, (void)be;
    return MP_EINTERNAL; /* mp_exec_backend_available refused it */
#endif
}
