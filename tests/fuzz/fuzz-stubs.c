/* fuzz-stubs.c -- the fuzz targets link the readers (src/io, the config and
 * weight-table code) without a backend: these stand in for the tensor
 * functions that weights.c refers to for loading, which no target reaches
 * (they trap if one does), and for the models' registry entries, whose type name
 * is all the model-type lookup reads; and for the version and model-file
 * provenance that annotate's VCF header refers to; and for the backend's
 * precision that the model load asks. */
#include "model.h"

#include <stdlib.h>

const struct nf_model_i nf__mitra_model = {.type = "mitra", .description = "fuzz stub"};
const struct nf_model_i nf__sptransformer_model = {.type = "sptransformer", .description = "fuzz stub"};
const struct nf_model_i nf__tabstar_model = {.type = "tabstar", .description = "fuzz stub"};

int nf__tensor_alloc(nf_backend * be, nf_tensor * t, enum nf_dtype type, int ndim, const int64_t * ne,
                     const char * name, nf_err * err) {
    (void) be;
    (void) t;
    (void) type;
    (void) ndim;
    (void) ne;
    (void) name;
    (void) err;
    __builtin_trap();
}
void nf__tensor_free(nf_tensor * t) {
    (void) t;
    __builtin_trap();
}
nf_tensor nf__tensor_view(const nf_tensor * t, int64_t elem_offs, int ndim, const int64_t * ne) {
    (void) t;
    (void) elem_offs;
    (void) ndim;
    (void) ne;
    __builtin_trap();
}
int nf__tensor_upload(nf_tensor * t, const void * src, nf_err * err) {
    (void) t;
    (void) src;
    (void) err;
    __builtin_trap();
}
/* annotate's VCF header (annotate-vcf.c) names the version and the model's
 * files: no fuzz target writes a header with a loaded model (they trap if one
 * does) */
const char * nf_version(void) { return NF_VERSION; }
int nf_model_file_count(const nf_model * m) {
    (void) m;
    __builtin_trap();
}
const char * nf_model_file_path(const nf_model * m, int i) {
    (void) m;
    (void) i;
    __builtin_trap();
}
int nf_model_file_sha256(nf_model * m, int i, char hex[65], nf_err * err) {
    (void) m;
    (void) i;
    (void) hex;
    (void) err;
    __builtin_trap();
}
/* nf_model_load asks the backend's precision, kind and name (which models
 * run bf16-autocast where): no fuzz target loads a model (it traps if one
 * does) */
int nf_backend_precision(const nf_backend * be) {
    (void) be;
    __builtin_trap();
}
const char * nf_backend_kind(const nf_backend * be) {
    (void) be;
    __builtin_trap();
}
const char * nf_backend_name(const nf_backend * be) {
    (void) be;
    __builtin_trap();
}
