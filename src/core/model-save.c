/* model-save.c -- nf_model_save (nofall.h): the loaded (or trained) weights
 * read back from the device and written as the checkpoint they came from
 * (outside model.c: the fuzz readers link model.c without the tensors) */
#include "model.h"
#include "weights.h"
#include "io/nf-io.h"

#include <stdlib.h>

int nf_model_save(nf_model * m, const char * dir, nf_err * err) {
    if (!m || !dir) return nf__err_set(err, NF_ERR_ARG, "nf_model_save: no model or directory");
    if (!m->iface->write_config)
        return nf__err_set(err, NF_ERR_UNSUPPORTED, "%s models cannot be saved", m->iface->type);
    const struct nf_weights * w = m->iface->weights(m->impl);
    const int64_t n = nf__tensor_numel(&w->buf);
    float * host = malloc((size_t) (n > 0 ? n : 1) * sizeof(float));
    if (!host) return nf__err_set(err, NF_ERR_NOMEM, "out of memory for the weights (%lld floats)", (long long) n);
    char path[4096];
    nf__path_join(path, sizeof(path), dir, "model.safetensors");
    int rc = nf__tensor_download(&w->buf, host, err);
    if (rc == NF_OK) rc = nf__weights_save(w, host, path, err);
    free(host);
    if (rc == NF_OK) rc = m->iface->write_config(m->impl, dir, err);
    return rc;
}
