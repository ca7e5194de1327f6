/* workspace.c -- a model forward's device workspace: the tensors it
 * allocates, freed together, and the stage dumps (model.h). */
#include "model.h"

#include <stdlib.h>
#include <string.h>

int nf__workspace_tensor(struct nf_workspace * ws, nf_backend * be, nf_tensor * t, enum nf_dtype type, int ndim,
                         const int64_t * ne, const char * name, nf_err * err) {
    if (ws->n_tensors >= NF_WORKSPACE_MAX_TENSORS)
        return nf__err_set(err, NF_ERR_GENERIC, "workspace: more than %d tensors (at %s)", NF_WORKSPACE_MAX_TENSORS,
                           name);
    NF_TRY(nf__tensor_alloc(be, t, type, ndim, ne, name, err));
    ws->tensors[ws->n_tensors++] = t;
    return NF_OK;
}

void nf__workspace_release(struct nf_workspace * ws) {
    if (!ws) return;
    for (int i = 0; i < ws->n_tensors; i++) nf__tensor_free(ws->tensors[i]);
    free(ws->dump.host);
    memset(ws, 0, sizeof(*ws));
}

int nf__workspace_stage(struct nf_workspace * ws, int stages, nf_stage_fn fn, void * user, const char * name,
                        const nf_tensor * t, int ndim, const int64_t * shape, int always, nf_err * err) {
    if (stages == NF_STAGES_NONE || (!always && stages != NF_STAGES_ALL)) return NF_OK;
    return nf__stage_emit(fn, user, &ws->dump, name, t, ndim, shape, err);
}
