/* fuzz-genomics-stubs.c -- the genomics fuzz targets link the record path
 * without a backend or a model: these stand in for what the forward and the
 * output writer refer to, which no target reaches (they trap if one does). */
#include "annotate-impl.h"

double nf__ann_now_ms(void) { __builtin_trap(); }
const char * nf_annotate_skip_name(int reason) {
    (void) reason;
    __builtin_trap();
}
const char * const nf__ann_tissues[NF_ANNOTATE_TISSUES] = {"stub"};
const char * nf_annotate_index_suffix(const nf_annotate_opts * o) {
    (void) o;
    __builtin_trap();
}
int nf__ann_plot_capture(struct nf_ann_plot * p, const int8_t * ref, const int8_t * alt, int64_t L, const float * pr,
                         const float * pa) {
    (void) p, (void) ref, (void) alt, (void) L, (void) pr, (void) pa;
    __builtin_trap();
}
