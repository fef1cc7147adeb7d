// backend.c - choosing a backend by device, and the device names.
#include <string.h>
#include "core/util.h"
#include "nn/backend.h"

#ifdef LSSAR_CUDA
extern const nn_backend nn_backend_cuda;
#endif

int nn_backend_get(lssar_device device, const nn_backend **out) {
    switch (device) {
    case LSSAR_DEVICE_CPU: *out = &nn_backend_cpu; return 0;
    case LSSAR_DEVICE_CUDA:
#ifdef LSSAR_CUDA
        *out = &nn_backend_cuda;
        return 0;
#else
        return lssar_fail(LSSAR_E_UNSUPPORTED, "device cuda: this build has no CUDA backend; rebuild with "
                          "`make CUDA=1` on a machine with the CUDA toolkit, or use --device cpu");
#endif
    }
    return lssar_fail(LSSAR_E_KIND, "device %d: use cpu or cuda", (int)device);
}

const char *lssar_device_name(lssar_device d) {
    switch (d) {
    case LSSAR_DEVICE_CPU: return "cpu";
    case LSSAR_DEVICE_CUDA: return "cuda";
    }
    return "unknown";
}

int lssar_device_parse(const char *name, lssar_device *out) {
    if (name && out) {
        if (!strcmp(name, "cpu")) { *out = LSSAR_DEVICE_CPU; return 0; }
        if (!strcmp(name, "cuda")) { *out = LSSAR_DEVICE_CUDA; return 0; }
    }
    return lssar_fail(LSSAR_E_ARG, "device '%s': use cpu or cuda", name ? name : "(null)");
}
