/* cmd-run-spt.c -- `nofall run` on a SpTransformer model (README
 * "SpTransformer"): one forward of B sequences of one length on one device,
 * the artifacts as one verified output set, the markers of every run.
 *
 * Inputs (one of): seeded (--seed S --length N, the default: 128 nt),
 * --tokens T.npy, --sequence ACGU..., --fasta F.fa [--region chr:start-end];
 * --context pad|given: nofall adds context_len N on each side (default for
 * seeded input and --sequence), or the input carries them (default for files).
 *
 * Artifacts: tokens.npy (int8 (B, L), the exact ids the model read),
 * position_logits.npy (float32 (B, L - 2 context, 18)), class_ids.npy (int64
 * argmax over channels 0..2), probabilities.npy (softmax over 0..2, sigmoid
 * on 3..17, as upstream's driver), encoding_metadata.json, report.json. */
#include "cli.h"
#include "nofall-genomics.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char * const nf_spt_artifacts[] = {
    "tokens.npy", "position_logits.npy", "class_ids.npy", "probabilities.npy", "encoding_metadata.json", "report.json",
};
#define NF_SPT_N_ARTIFACTS ((int) (sizeof(nf_spt_artifacts) / sizeof(nf_spt_artifacts[0])))

static const char * const nf_spt_splice_names[3] = {"no_splice", "acceptor", "donor"};

struct nf_spt_opts {
    const char *model, *device, *out, *trace, *tokens, *sequence, *fasta, *region, *context;
    uint64_t seed;
    int64_t length;
    int precision;
};

static int nf_spt_parse(int argc, char ** argv, struct nf_spt_opts * o) {
    static const char * const flags[] = {"--model",  "--device",    "--out",   "--seed",   "--length",
                                         "--tokens", "--sequence",  "--fasta", "--region", "--context",
                                         "--trace",  "--precision", NULL};
    memset(o, 0, sizeof(*o));
    o->device = "cpu";
    o->seed = 42;
    o->length = 128;
    int have_len = 0, have_seed = 0;
    for (int i = 1; i < argc; i++) {
        const char * a = argv[i];
        const char * v;
        int64_t n;
        if (!nf_cli_is_flag(a, flags)) {
            char e[256];
            fprintf(stderr, "error: unknown option %s (for a SpTransformer model)\n", nf__esc(e, sizeof(e), a));
            return 0;
        }
        if (!(v = nf_cli_need_value(argc, argv, &i))) return 0;
        if (strcmp(a, "--model") == 0)
            o->model = v;
        else if (strcmp(a, "--device") == 0)
            o->device = v;
        else if (strcmp(a, "--out") == 0)
            o->out = v;
        else if (strcmp(a, "--seed") == 0) {
            if (!nf_cli_parse_int(a, v, 0, NF_CLI_SEED_MAX, &n)) return 0;
            o->seed = (uint64_t) n;
            have_seed = 1;
        } else if (strcmp(a, "--length") == 0) {
            if (!nf_cli_parse_int(a, v, 1, 1 << 20, &o->length)) return 0;
            have_len = 1;
        } else if (strcmp(a, "--tokens") == 0)
            o->tokens = v;
        else if (strcmp(a, "--sequence") == 0)
            o->sequence = v;
        else if (strcmp(a, "--fasta") == 0)
            o->fasta = v;
        else if (strcmp(a, "--region") == 0)
            o->region = v;
        else if (strcmp(a, "--context") == 0) {
            if (strcmp(v, "pad") != 0 && strcmp(v, "given") != 0) {
                fprintf(stderr, "error: --context must be pad or given\n");
                return 0;
            }
            o->context = v;
        } else if (strcmp(a, "--trace") == 0)
            o->trace = v;
        else if (strcmp(a, "--precision") == 0) {
            if (!nf_cli_parse_precision(v, &o->precision)) {
                fprintf(stderr, "error: --precision must be exact or tf32\n");
                return 0;
            }
        }
    }
    if (!o->model || !o->out) {
        fprintf(stderr, "error: run needs --model and --out OUTDIR\n");
        return 0;
    }
    const int n_src = (o->tokens != NULL) + (o->sequence != NULL) + (o->fasta != NULL);
    if (n_src > 1) {
        fprintf(stderr, "error: give one of --tokens, --sequence, --fasta\n");
        return 0;
    }
    if (n_src == 1 && (have_len || have_seed)) {
        fprintf(stderr,
                "error: --seed/--length make a seeded input; they do not go with --tokens/--sequence/--fasta\n");
        return 0;
    }
    if (o->region && !o->fasta) {
        fprintf(stderr, "error: --region goes with --fasta\n");
        return 0;
    }
    if (n_src == 0 && o->context && strcmp(o->context, "pad") != 0) {
        fprintf(stderr, "error: a seeded input is always padded (--context pad)\n");
        return 0;
    }
    return 1;
}

static int nf_spt_input(const struct nf_spt_opts * o, int64_t context, nf_seq * s, nf_err * err) {
    const int files = o->tokens || o->fasta;
    const int pad = o->context ? strcmp(o->context, "pad") == 0 : !files;
    if (o->tokens) return nf_seq_npy(s, o->tokens, pad, context, err);
    if (o->fasta) return nf_seq_fasta(s, o->fasta, o->region, pad, context, err);
    if (o->sequence) return nf_seq_string(s, o->sequence, pad, context, err);
    return nf_seq_seeded(s, o->seed, o->length, context, err);
}

/* upstream's driver: softmax over channels 0..2, sigmoid on the others */
static void nf_spt_probabilities(const float * lg, float * pr, int64_t rows, int C) {
    for (int64_t r = 0; r < rows; r++) {
        const float * x = lg + r * C;
        float * p = pr + r * C;
        const double mx = fmax(fmax(x[0], x[1]), x[2]);
        double e[3], sum = 0.0;
        for (int c = 0; c < 3; c++) sum += (e[c] = exp((double) x[c] - mx));
        for (int c = 0; c < 3; c++) p[c] = (float) (e[c] / sum);
        for (int c = 3; c < C; c++) p[c] = (float) (1.0 / (1.0 + exp(-(double) x[c])));
    }
}

/* read the set back: dtypes, shapes, finiteness, class ids in range */
static int nf_spt_verify_assets(const char * dir, const nf_seq * s, const int64_t * oshape, nf_err * err) {
    char p[4096];
    struct {
        const char * f;
        enum nf_npy_dtype dt;
        int nd;
        int64_t a, b, c;
    } want[4] = {
        {"tokens.npy", NF_NPY_I1, 2, s->B, s->L, 0},
        {"position_logits.npy", NF_NPY_F4, 3, oshape[0], oshape[1], oshape[2]},
        {"class_ids.npy", NF_NPY_I8, 2, oshape[0], oshape[1], 0},
        {"probabilities.npy", NF_NPY_F4, 3, oshape[0], oshape[1], oshape[2]},
    };
    for (int i = 0; i < 4; i++) {
        struct nf_npy a;
        nf__path_join(p, sizeof(p), dir, want[i].f);
        NF_TRY(nf__npy_read(p, &a, err));
        int ok = a.dtype == want[i].dt && a.ndim == want[i].nd && a.shape[0] == want[i].a && a.shape[1] == want[i].b &&
                 (a.ndim < 3 || a.shape[2] == want[i].c);
        const size_t n = a.nbytes / nf__npy_dtype_size(a.dtype);
        if (ok && i == 0) ok = memcmp(a.data, s->ids, (size_t) (s->B * s->L)) == 0;
        if (ok && a.dtype == NF_NPY_F4)
            for (size_t e = 0; e < n; e++) ok &= isfinite(((const float *) a.data)[e]) != 0;
        if (ok && i == 2)
            for (size_t e = 0; e < n; e++)
                ok &= ((const int64_t *) a.data)[e] >= 0 && ((const int64_t *) a.data)[e] < 3;
        nf__npy_free(&a);
        if (!ok) return nf__err_set(err, NF_ERR_IO, "%s: read back with the wrong shape/dtype/values", p);
    }
    static const char * const docs[2] = {"encoding_metadata.json", "report.json"};
    for (int i = 0; i < 2; i++) {
        cJSON * doc = NULL;
        nf__path_join(p, sizeof(p), dir, docs[i]);
        NF_TRY(nf__json_read_file(p, &doc, err));
        const int ok = cJSON_IsObject(doc) &&
                       (i == 0 || cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(doc, "markers")));
        cJSON_Delete(doc);
        if (!ok) return nf__err_set(err, NF_ERR_IO, "%s: read back without its contents", p);
    }
    return NF_OK;
}

static int nf_spt_write_metadata(const char * path, const nf_seq * s, int64_t context, int64_t out_len, nf_err * err) {
    cJSON * d = cJSON_CreateObject();
    cJSON * ids = cJSON_AddObjectToObject(d, "ids");
    static const char * const letters[5] = {"A", "C", "G", "T", "N"};
    for (int i = 0; i < 5; i++) cJSON_AddNumberToObject(ids, letters[i], i);
    cJSON_AddStringToObject(d, "alphabet", "A=0 C=1 G=2 T/U=3 N=4; one-hot channels A, C, G, T; N all zero");
    cJSON_AddStringToObject(d, "source", s->source);
    cJSON_AddStringToObject(d, "flank_mode", s->pad ? "pad" : "given");
    cJSON_AddNumberToObject(d, "flank_added_each_side", (double) s->flank);
    cJSON_AddNumberToObject(d, "context_len", (double) context);
    cJSON_AddNumberToObject(d, "batch", (double) s->B);
    cJSON_AddNumberToObject(d, "length", (double) s->L);
    cJSON_AddNumberToObject(d, "output_length", (double) out_len);
    cJSON_AddNumberToObject(d, "output_offset", (double) context);
    cJSON_AddStringToObject(d, "output_offset_meaning", "position_logits[b, i] is tokens[b, output_offset + i]");
    cJSON * ch = cJSON_AddArrayToObject(d, "channels");
    static const char * const tissues[15] = {"Adipose Tissue", "Blood",           "Blood Vessel", "Brain",  "Colon",
                                             "Heart",          "Kidney",          "Liver",        "Lung",   "Muscle",
                                             "Nerve",          "Small Intestine", "Skin",         "Spleen", "Stomach"};
    for (int i = 0; i < 3; i++) cJSON_AddItemToArray(ch, cJSON_CreateString(nf_spt_splice_names[i]));
    for (int i = 0; i < 15; i++) cJSON_AddItemToArray(ch, cJSON_CreateString(tissues[i]));
    const int rc = nf__json_write_file(path, d, err);
    cJSON_Delete(d);
    return rc;
}

static int nf_spt_main(const struct nf_spt_opts * o, nf_err * err) {
    nf_backend * be = NULL;
    nf_model * m = NULL;
    nf_seq s = {0};
    float *logits = NULL, *probs = NULL;
    int64_t *cls = NULL, *ids = NULL;
    struct nf_outset os;
    struct nf_cli_outfile tr;
    memset(&tr, 0, sizeof(tr));
    tr.fd = tr.slot = -1;
    char trace_in_out[4096] = "", p[4096];
    int rc;
    struct stat msb; /* --model X.ckpt: a regular file, named when it is not (a FIFO would block) */
    if (stat(o->model, &msb) == 0 && !S_ISDIR(msb.st_mode)) {
        int mfd;
        uint64_t msize;
        NF_TRY(nf__open_regular_flag("--model", o->model, &mfd, &msize, err));
        close(mfd);
    }
    NF_TRY(nf_outset_begin(&os, o->out, nf_spt_artifacts, NF_SPT_N_ARTIFACTS, err));
    const char * inputs[2] = {o->tokens, o->fasta};
    static const char * const input_flags[2] = {"--tokens", "--fasta"};
    if ((rc = nf_run_check_trace(o->trace, o->model, inputs, input_flags, 2, &os, nf_spt_artifacts, NF_SPT_N_ARTIFACTS,
                                 trace_in_out, sizeof(trace_in_out), err)) != NF_OK)
        goto done;
    if (o->trace && !trace_in_out[0] && (rc = nf_cli_outfile_open(&tr, o->trace, "--trace", err)) != NF_OK) goto done;
    if ((rc = nf_cli_backend_init(o->device, o->precision, &be, err)) != NF_OK) goto done;
    nf_trace_reset(be, o->trace ? NF_TRACE_TIMED : NF_TRACE_TOTALS);
    if ((rc = nf_model_load(be, o->model, &m, err)) != NF_OK) goto done;
    int64_t context = 0;
    struct nf_config_item ci;
    for (int i = 0; nf_model_config_item(m, i, &ci); i++)
        if (strcmp(ci.key, "context_len") == 0) context = ci.num;
    if ((rc = nf_spt_input(o, context, &s, err)) != NF_OK) goto done;
    ids = malloc((size_t) (s.B * s.L) * sizeof(int64_t));
    if (!ids) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t i = 0; i < s.B * s.L; i++) ids[i] = s.ids[i];
    struct nf_array in = {"tokens", NF_ARRAY_I64, 2, {s.B, s.L}, ids};
    int ndim = 0;
    int64_t osh[NF_ARRAY_MAX_DIMS];
    if ((rc = nf_model_output_shape(m, &in, 1, &ndim, osh, err)) != NF_OK) {
        if (s.pad)
            nf__err_prefix(err, "%lld nt + %lld N on each side (--context pad)", (long long) (s.L - 2 * s.flank),
                           (long long) s.flank);
        else
            nf__err_prefix(err,
                           "%lld nt taken as already flanked (--context given; --context pad adds %lld N on each "
                           "side)",
                           (long long) s.L, (long long) context);
        goto done;
    }
    const int C = (int) osh[2];
    const int64_t rows = osh[0] * osh[1];
    logits = malloc((size_t) (rows * C) * sizeof(float));
    probs = malloc((size_t) (rows * C) * sizeof(float));
    cls = malloc((size_t) rows * sizeof(int64_t));
    if (!logits || !probs || !cls) {
        rc = nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    nf_cli_test_delay("forward");
    const double t0 = nf_cli_now_ms();
    if ((rc = nf_model_forward(m, &in, 1, logits, err)) != NF_OK) goto done;
    const double wall_ms = nf_cli_now_ms() - t0;
    int finite = 1;
    for (int64_t i = 0; i < rows * C; i++) finite &= isfinite(logits[i]) != 0;
    if (!finite) {
        rc = nf__err_set(err, NF_ERR_MISMATCH, "forward produced non-finite logits");
        goto done;
    }
    int64_t counts[3] = {0, 0, 0};
    for (int64_t r = 0; r < rows; r++) counts[cls[r] = nf_cli_argmax(logits + r * C, 3)]++;
    nf_spt_probabilities(logits, probs, rows, C);

    /* artifacts */
    const int64_t tsh[2] = {s.B, s.L}, csh[2] = {osh[0], osh[1]};
    nf_outset_path(&os, "tokens.npy", p, sizeof(p));
    if ((rc = nf__npy_write(p, NF_NPY_I1, 2, tsh, s.ids, err)) != NF_OK) goto done;
    nf_outset_path(&os, "position_logits.npy", p, sizeof(p));
    if ((rc = nf__npy_write(p, NF_NPY_F4, 3, osh, logits, err)) != NF_OK) goto done;
    nf_cli_test_delay("write");
    nf_outset_path(&os, "class_ids.npy", p, sizeof(p));
    if ((rc = nf__npy_write(p, NF_NPY_I8, 2, csh, cls, err)) != NF_OK) goto done;
    nf_outset_path(&os, "probabilities.npy", p, sizeof(p));
    if ((rc = nf__npy_write(p, NF_NPY_F4, 3, osh, probs, err)) != NF_OK) goto done;
    nf_outset_path(&os, "encoding_metadata.json", p, sizeof(p));
    if ((rc = nf_spt_write_metadata(p, &s, context, osh[1], err)) != NF_OK) goto done;

    struct nf_run_meas meas;
    if ((rc = nf_run_measure(m, be, &meas, err)) != NF_OK) goto done;
    char shape[64], classes[128];
    snprintf(shape, sizeof(shape), "%lldx%lldx%lld", (long long) osh[0], (long long) osh[1], (long long) osh[2]);
    snprintf(classes, sizeof(classes), "%s:%lld,%s:%lld,%s:%lld", nf_spt_splice_names[0], (long long) counts[0],
             nf_spt_splice_names[1], (long long) counts[1], nf_spt_splice_names[2], (long long) counts[2]);
    cJSON * rep = cJSON_CreateObject();
    nf_run_report_common(rep, o->model, m, be);
    cJSON_AddStringToObject(rep, "input_source", s.source);
    if (!o->tokens && !o->sequence && !o->fasta) {
        cJSON_AddNumberToObject(rep, "seed", (double) o->seed);
        cJSON_AddNumberToObject(rep, "length", (double) o->length);
    }
    cJSON_AddStringToObject(rep, "context", s.pad ? "pad" : "given");
    cJSON * pc = cJSON_AddObjectToObject(rep, "predicted_class_counts");
    for (int c = 0; c < 3; c++) cJSON_AddNumberToObject(pc, nf_spt_splice_names[c], (double) counts[c]);
    nf_run_markers_json(rep, &meas, shape, classes, finite, wall_ms);
    nf_outset_path(&os, "report.json", p, sizeof(p));
    rc = nf__json_write_file(p, rep, err);
    cJSON_Delete(rep);
    if (rc != NF_OK) goto done;
    rc = nf_spt_verify_assets(os.staging, &s, osh, err);
    const int assets_verified = rc == NF_OK; /* the set read back and checked */
    if (!assets_verified) goto done;
    if ((rc = nf_run_finish(be, o->trace, trace_in_out, &tr, &os, err)) != NF_OK) goto done;
    nf_run_markers_print(&meas, be, shape, classes, finite, wall_ms, assets_verified);
    rc = nf_run_commit(&os, o->trace, trace_in_out, &tr, err);
done:
    nf_cli_outfile_abort(&tr);
    nf_outset_end(&os);
    free(logits);
    free(probs);
    free(cls);
    free(ids);
    nf_seq_free(&s);
    nf_model_free(m);
    nf_backend_free(be);
    return rc;
}

int nf_cmd_run_spt(int argc, char ** argv) {
    struct nf_spt_opts o;
    if (!nf_spt_parse(argc, argv, &o)) return 2;
    nf_cli_signals_install();
    nf_err err = {0};
    return nf_cli_command_exit(nf_spt_main(&o, &err), &err);
}
