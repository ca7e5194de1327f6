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
