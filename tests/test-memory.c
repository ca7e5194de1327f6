/* test-memory.c -- a long-lived process (a server, the Python binding) holds
 * its memory flat: 10,000 forwards of a small model on one backend,
 *   1. with the default trace (totals only): RSS after 10,000 forwards is
 *      within 1 MiB of RSS after 100;
 *   2. with per-op records on: the records stop at NF_TRACE_MAX_RECORDS
 *      (the rest counted in records_dropped), the totals stay exact, and RSS
 *      stays within what the capped records take (+ 1 MiB).
 * Prints RSS at 100 and at 10,000 forwards.
 * usage: test-memory MODEL_DIR [DEVICE] [FORWARDS]   (defaults: cpu, 10000) */
#include "nf-test.h"
#include "nf-impl.h"

#include <stdlib.h>
#include <unistd.h>

/* AddressSanitizer keeps freed memory in quarantine, so RSS grows there
 * whatever the program does: the RSS bounds are only asserted without it
 * (LeakSanitizer checks for leaks in that build instead). */
#if defined(__SANITIZE_ADDRESS__)
#define NF_RSS_ASSERTED 0
#else
#define NF_RSS_ASSERTED 1
#endif

static long rss_kib(void) {
    FILE * f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &pages, &res) != 2) res = -1;
    fclose(f);
    return res < 0 ? -1 : res * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test-memory MODEL_DIR [DEVICE] [FORWARDS]\n");
        return 2;
    }
    const char * dev = argc > 2 ? argv[2] : "cpu";
    const long n_fwd = argc > 3 ? atol(argv[3]) : 10000;
    nf_err err = {0};
    nf_backend * be = NULL;
    nf_model * m = NULL;
    if (nf_backend_init(dev, NF_PRECISION_EXACT, &be, &err) != NF_OK) {
        fprintf(stderr, "test-memory: %s\n", err.msg);
        return 1;
    }
    CHECK_RC(nf_model_load(be, argv[1], &m, &err), NF_OK, &err);
    if (!m) return nf_test_done("test-memory");
    float xs[6 * 3], xq[2 * 3], out[2 * 64];
    int64_t ys[6] = {0, 1, 2, 0, 1, 2};
    for (int i = 0; i < 18; i++) xs[i] = (float) ((i * 7) % 11) * 0.1f;
    for (int i = 0; i < 6; i++) xq[i] = (float) ((i * 5) % 7) * 0.1f;
    const struct nf_array in[3] = {
        {"support_x", NF_ARRAY_F32, 2, {6, 3}, xs},
        {"support_y", NF_ARRAY_I64, 1, {6}, ys},
        {"query_x", NF_ARRAY_F32, 2, {2, 3}, xq},
    };

    if (!NF_RSS_ASSERTED)
        printf("AddressSanitizer build: RSS is printed, not asserted (its quarantine holds freed memory)\n");
    for (int mode = 0; mode < 2; mode++) {
        nf_trace_reset(be, mode ? NF_TRACE_RECORDS : NF_TRACE_TOTALS);
        long at100 = -1;
        int rc = NF_OK;
        for (long i = 0; i < n_fwd && rc == NF_OK; i++) {
            rc = nf_model_forward(m, in, 3, out, &err);
            if (i == 99) at100 = rss_kib();
        }
        CHECK_RC(rc, NF_OK, &err);
        const long at_end = rss_kib();
        struct nf_trace_totals t;
        nf_trace_totals_get(be, &t);
        printf(
            "%s trace: RSS %ld KiB after 100 forwards, %ld KiB after %ld (%+ld KiB); %lld ops, %lld records kept, %lld dropped\n",
            mode ? "records" : "totals-only", at100, at_end, n_fwd, at_end - at100, (long long) t.ops,
            (long long) be->n_ops, (long long) t.records_dropped);
        CHECK(at100 > 0 && at_end > 0, "RSS readable");
        CHECK(t.ops > 0 && t.ops % n_fwd == 0, "totals count every op (%lld over %ld forwards)", (long long) t.ops,
              n_fwd);
        if (mode == 0) {
            CHECK(be->n_ops == 0 && t.records_dropped == 0, "no records kept by default");
            CHECK(!NF_RSS_ASSERTED || at_end - at100 <= 1024, "memory flat over %ld forwards: %+ld KiB", n_fwd,
                  at_end - at100);
        } else {
            const long cap_kib = (long) ((sizeof(struct nf_trace_op) + sizeof(struct nf_trace_xfer)) *
                                         NF_TRACE_MAX_RECORDS / 1024);
            CHECK(be->n_ops <= NF_TRACE_MAX_RECORDS, "records capped (%lld)", (long long) be->n_ops);
            CHECK(t.ops <= NF_TRACE_MAX_RECORDS || t.records_dropped > 0,
                  "records over the cap are counted as dropped");
            CHECK(be->n_ops + be->n_xfers + t.records_dropped == t.ops + t.h2d_copies + t.d2h_copies,
                  "every op and transfer is either recorded or counted as dropped");
            CHECK(!NF_RSS_ASSERTED || at_end - at100 <= cap_kib + 1024,
                  "memory bounded by the record cap: %+ld KiB (cap %ld KiB)", at_end - at100, cap_kib);
        }
    }
    nf_model_free(m);
    nf_backend_free(be);
    return nf_test_done("test-memory");
}
