/* test-placement.c -- fallback cannot happen:
 *  1. a backend that lacks one op makes the Mitra forward fail with an error
 *     naming the op and the device (no copy to the cpu);
 *  2. an op handed an operand that lives on another device is refused;
 *  3. an unknown or absent device fails at init, naming it. */
#include "nf-test.h"
#include "nf-impl.h"

#include <stdlib.h>
#include <string.h>

/* "lacks-attention:0": the cpu kernels, minus NF_OP_ATTENTION. */
static struct nf_backend_i lacking_iface;
static struct nf_kernel lacking_kernels[NF_OP_COUNT];

static nf_backend * make_lacking(void) {
    nf_err err = {0};
    nf_backend * cpu;
    if (nf_backend_init("cpu", NF_PRECISION_EXACT, &cpu, &err) != NF_OK) return NULL;
    lacking_iface = *cpu->iface;
    lacking_iface.kind = "lacks-attention";
    memcpy(lacking_kernels, cpu->iface->kernels, sizeof(lacking_kernels));
    lacking_kernels[NF_OP_ATTENTION] = (struct nf_kernel){0};
    lacking_iface.kernels = lacking_kernels;
    /* buffers of this device must report themselves as living on it */
    nf_backend * be = nf__backend_new(&lacking_iface, NULL, "lacks-attention:0");
    nf_backend_free(cpu);
    return be;
}

static int lacking_where(nf_backend * be, void * h, char * out, size_t n, nf_err * err) {
    snprintf(out, n, "%s", be->name);
    return NF_OK;
}

int main(int argc, char ** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test-placement MODEL_DIR\n");
        return 2;
    }
    nf_err err = {0};

    /* 1: the forward on a backend without ATTENTION */
    nf_backend * lack = make_lacking();
    CHECK(lack != NULL, "test backend");
    lacking_iface.buffer_where = lacking_where;
    nf_model * m = NULL;
    CHECK_RC(nf_model_load(lack, argv[1], &m, &err), NF_OK, &err);
    if (m) {
        float xs[4 * 3], xq[2 * 3], logits[2 * 16];
        int64_t ys[4] = {0, 1, 2, 1};
        for (int i = 0; i < 12; i++) xs[i] = (float) (i % 5);
        for (int i = 0; i < 6; i++) xq[i] = (float) (i % 3);
        const struct nf_array in[3] = {
            {"support_x", NF_ARRAY_F32, 2, {4, 3}, xs},
            {"support_y", NF_ARRAY_I64, 1, {4}, ys},
            {"query_x", NF_ARRAY_F32, 2, {2, 3}, xq},
        };
        nf_trace_reset(lack, NF_TRACE_RECORDS);
        CHECK_RC(nf_model_forward(m, in, 3, logits, &err), NF_ERR_UNSUPPORTED, &err);
        CHECK_MSG(&err, "op ATTENTION");
        CHECK_MSG(&err, "lacks-attention:0");
        CHECK_MSG(&err, "does not fall back");
        struct nf_trace_totals tot;
        nf_trace_totals_get(lack, &tot);
        CHECK(tot.d2h_copies == 0, "no device->host copy happened (%lld)", (long long) tot.d2h_copies);
        CHECK(tot.ops_off_device == 0, "no op ran elsewhere");
        CHECK(lack->n_ops > 0 && lack->n_ops == tot.ops, "the ops before the refused one were recorded (%lld)",
              (long long) lack->n_ops);
        for (int64_t i = 0; i < lack->n_ops; i++)
            CHECK(lack->ops[i].type != NF_OP_ATTENTION, "ATTENTION never executed");
        nf_model_free(m);
    }

    /* 2: an operand from another device */
    nf_backend * cpu;
    CHECK_RC(nf_backend_init("cpu", NF_PRECISION_EXACT, &cpu, &err), NF_OK, &err);
    nf_tensor x, g, b, y;
    int64_t ne[1] = {8};
    CHECK_RC(nf__tensor_alloc(cpu, &x, NF_F32, 1, ne, "x_on_cpu", &err), NF_OK, &err);
    CHECK_RC(nf__tensor_alloc(lack, &g, NF_F32, 1, ne, "g", &err), NF_OK, &err);
    CHECK_RC(nf__tensor_alloc(lack, &b, NF_F32, 1, ne, "b", &err), NF_OK, &err);
    CHECK_RC(nf__tensor_alloc(lack, &y, NF_F32, 1, ne, "y", &err), NF_OK, &err);
    nf_op op = {.type = NF_OP_LAYER_NORM, .label = "mixed", .n_src = 3, .n_dst = 1};
    op.src[0] = x;
    op.src[1] = g;
    op.src[2] = b;
    op.dst[0] = y;
    op.p.layer_norm.m = 1;
    op.p.layer_norm.k = 8;
    op.p.layer_norm.ldx = 8;
    op.p.layer_norm.ldy = 8;
    op.p.layer_norm.eps = 1e-5f;
    nf_trace_reset(lack, NF_TRACE_RECORDS);
    CHECK_RC(nf__op_run(lack, &op, &err), NF_ERR_PLACEMENT, &err);
    CHECK_MSG(&err, "x_on_cpu");
    CHECK_MSG(&err, "lives on cpu");
    CHECK(lack->n_ops == 0 && lack->totals.ops == 0, "the refused op was not recorded as run");
    /* the same op with all operands on one device runs */
    nf_tensor x2;
    CHECK_RC(nf__tensor_alloc(lack, &x2, NF_F32, 1, ne, "x", &err), NF_OK, &err);
    float ones[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    nf__tensor_upload(&x2, ones, &err);
    nf__tensor_upload(&g, ones, &err);
    nf__tensor_upload(&b, ones, &err);
    op.src[0] = x2;
    CHECK_RC(nf__op_run(lack, &op, &err), NF_OK, &err);
    /* a view cannot free its owner's memory: freeing it leaves x2 usable
     * (ASan would report the use after free otherwise) */
    const int64_t ne4[1] = {4};
    nf_tensor v = nf__tensor_view(&x2, 4, 1, ne4);
    CHECK(!v.owner && x2.owner, "views are not owners");
    nf__tensor_free(&v);
    float back[8] = {0};
    CHECK_RC(nf__tensor_download(&x2, back, &err), NF_OK, &err);
    CHECK(memcmp(back, ones, sizeof(ones)) == 0, "the owner's data survives freeing a view");
    nf__tensor_free(&x);
    nf__tensor_free(&g);
    nf__tensor_free(&b);
    nf__tensor_free(&y);
    nf__tensor_free(&x2);

    /* 3: devices that are not there */
    nf_backend * none = NULL;
    CHECK_RC(nf_backend_init("tpu:0", NF_PRECISION_EXACT, &none, &err), NF_ERR_DEVICE, &err);
    CHECK_MSG(&err, "unknown device 'tpu:0'");
    CHECK(none == NULL, "no backend returned");
    CHECK_RC(nf_backend_init("cpu:1", NF_PRECISION_EXACT, &none, &err), NF_ERR_DEVICE, &err);
    CHECK_RC(nf_backend_init("cpu", NF_PRECISION_TF32, &none, &err), NF_ERR_ARG, &err);

    /* 4: backend options are explicit and checked: an unknown key of the
     * chosen backend is refused, another backend's keys are ignored */
    static const char * const bogus[] = {"cpu.bogus=1", NULL};
    static const char * const other[] = {"opencl.gemm=own", "cuda.attention=cublas", NULL};
    static const char * const novalue[] = {"cpu", NULL};
    struct nf_backend_opts o = {.precision = NF_PRECISION_EXACT, .options = bogus};
    CHECK_RC(nf_backend_init_opts("cpu", &o, &none, &err), NF_ERR_ARG, &err);
    CHECK_MSG(&err, "unknown cpu backend option \"cpu.bogus\"");
    o.options = novalue;
    CHECK_RC(nf_backend_init_opts("cpu", &o, &none, &err), NF_ERR_ARG, &err);
    CHECK_MSG(&err, "expected key=value");
    o.options = other;
    CHECK_RC(nf_backend_init_opts("cpu", &o, &none, &err), NF_OK, &err);
    nf_backend_free(none);
    none = NULL;
    CHECK_RC(nf_backend_init_opts("cpu", NULL, &none, &err), NF_OK, &err);
    nf_backend_free(none);

    nf_backend_free(cpu);
    nf_backend_free(lack);
    return nf_test_done("test-placement");
}
