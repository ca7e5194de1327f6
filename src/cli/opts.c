/* opts.c -- the option table (options.def) and its parser: one set of rules
 * and messages for every command (README "The command line"). The texts
 * made from the table (help, man pages, completion) are in opts-text.c. */
#include "cli.h"
#include "opts.h"
#include "io/nf-io.h"
#include "weights.h"
#include "nofall-tabular.h"

#include <string.h>

const struct nf_cli_opt nf_cli_opt_table[NF_O_COUNT] = {
#define NF_OPT(id, name, type, meta, min, max, choices, def, variants, required, help) \
    {name, type, meta, min, max, choices, def, variants, required, help},
#include "options.def"
#undef NF_OPT
};

const struct nf_cli_command nf_cli_commands[] = {
    {"run", NF_MS_RUN, "one forward on one device: the artifacts as one verified output set, and the markers"},
    {"verify", NF_MS_VERIFY, "compare a device's forwards with the cpu backend or a fixture (exit 3 on a mismatch)"},
    {"bench", NF_MS_BENCH, "synchronised per-forward timings on one device (a benchmark, not a test)"},
    {"predict", NF_MS_PREDICT, "fit on a training CSV and predict a test CSV (Mitra, TabSTAR)"},
    {"finetune", NF_M(FINETUNE), "fine-tune a Mitra model on a training CSV as AutoGluon does; write the weights"},
    {"annotate", NF_M(ANNOTATE), "score the variants of a VCF with SpTransformer (splice and tissue scores)"},
    {"gen-weights", NF_M(GEN), "write a model directory of seeded synthetic weights (tests, benchmarks)"},
    {"convert", NF_M(CONVERT), "a torch.save checkpoint (.ckpt) to DIR/model.safetensors"},
    {"tokenize", NF_M(TOKENIZE), "TabSTAR's WordPiece tokenizer over a JSON array of strings"},
    {"devices", NF_M(DEVICES), "the backends compiled in and the devices they see"},
    {"help", 0, "this list, or a command's help (--man: its man page)"},
    {"completion", 0, "print the bash completion script"},
    {NULL, 0, NULL},
};

/* the model type of each variant (NULL: the command has one) */
const char * const nf_cli_variant_model[NF_V_COUNT] = {
    "Mitra",
    "SpTransformer",
    "TabSTAR",
    "Mitra",
    "SpTransformer",
    "TabSTAR",
    "Mitra",
    "SpTransformer",
    "TabSTAR",
    "Mitra",
    "TabSTAR",
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
    NULL,
};

const struct nf_cli_command * nf_cli_command_find(const char * name) {
    for (const struct nf_cli_command * c = nf_cli_commands; c->name; c++)
        if (strcmp(c->name, name) == 0) return c;
    return NULL;
}

const struct nf_cli_command * nf_cli_command_of(uint32_t mask) {
    for (const struct nf_cli_command * c = nf_cli_commands; c->name; c++)
        if (c->mask & mask) return c;
    return NULL;
}

int nf_cli_command_known(const char * cmd) { return nf_cli_command_find(cmd) != NULL; }

/* the row of name among those mask's variants take; -1 if none */
static int nf_opt_find(const char * name, uint32_t mask) {
    for (int k = 0; k < NF_O_COUNT; k++)
        if ((nf_cli_opt_table[k].variants & mask) && strcmp(nf_cli_opt_table[k].name, name) == 0) return k;
    return -1;
}
int nf_cli_opt_id_of(const char * name, uint32_t mask) { return nf_opt_find(name, mask); }
uint32_t nf_cli_variant_of_type(const char * type, uint32_t mitra, uint32_t spt, uint32_t tab) {
    return strcmp(type, "sptransformer") == 0 ? spt : strcmp(type, "tabstar") == 0 ? tab : mitra;
}

/* is name one of the model type's gen-weights options? (gen_type NULL: any type's) */
static int nf_opt_gen_find(const char * gen_type, const char * name) {
    if (strncmp(name, "--", 2) != 0) return 0;
    for (int t = 0; t < nf_model_type_count(); t++) {
        const char *type = nf_model_type_name(t), *o;
        if (gen_type && strcmp(type, gen_type) != 0) continue;
        for (int i = 0; (o = nf_model_type_gen_option(type, i, NULL)); i++)
            if (strcmp(name + 2, o) == 0) return 1;
    }
    return 0;
}

/* "a, b or c" of an enum's shown choices */
static void nf_opt_choices_words(const char * choices, char * out, size_t n) {
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", choices);
    const char * shown[16];
    int ns = 0;
    for (char * tok = strtok(buf, "|"); tok && ns < 16; tok = strtok(NULL, "|"))
        if (tok[0] != '=') shown[ns++] = tok;
    size_t len = 0;
    out[0] = '\0';
    for (int k = 0; k < ns; k++)
        nf__msg_append(out, n, &len, "%s%s", k == 0 ? "" : k == ns - 1 ? " or " : ", ", shown[k]);
}

static int nf_opt_choice_ok(const char * choices, const char * v) {
    const char * p = choices;
    const size_t lv = strlen(v);
    while (*p) {
        if (*p == '=') p++;
        const size_t l = strcspn(p, "|");
        if (l == lv && strncmp(p, v, l) == 0) return 1;
        p += l;
        if (*p == '|') p++;
    }
    return 0;
}

static void nf_opt_unknown(uint32_t mask, const char * gen_type, const char * a) {
    const struct nf_cli_command * c = nf_cli_command_of(mask);
    const char * cmd = c ? c->name : "nofall";
    const char * model = NULL;
    int n_models = 0;
    for (int v = 0; v < NF_V_COUNT; v++)
        if ((mask >> v) & 1u) {
            model = nf_cli_variant_model[v];
            n_models++;
        }
    char e[256];
    if (gen_type)
        fprintf(stderr, "error: unknown option %s for `nofall %s %s`; see `nofall %s --help`\n",
                nf__esc(e, sizeof(e), a), cmd, gen_type, cmd);
    else if (model && n_models == 1)
        fprintf(stderr, "error: unknown option %s for `nofall %s` on a %s model; see `nofall %s --help`\n",
                nf__esc(e, sizeof(e), a), cmd, model, cmd);
    else
        fprintf(stderr, "error: unknown option %s for `nofall %s`; see `nofall %s --help`\n", nf__esc(e, sizeof(e), a),
                cmd, cmd);
}

/* the path options a command writes; every other path option is read */
static int nf_opt_is_output(int k) {
    return k == NF_O_OUT || k == NF_O_OUT_DIR || k == NF_O_OUT_FILE || k == NF_O_TRACE || k == NF_O_JSON ||
           k == NF_O_PLOT;
}

int nf_cli_opts_parse(uint32_t mask, int argc, char ** argv, int first, const char * gen_type, struct nf_cli_opts * v) {
    memset(v, 0, sizeof(*v));
    for (int i = first; i < argc; i++) {
        const char * a = argv[i];
        const int k = nf_opt_find(a, mask);
        if (k < 0) {
            if (gen_type && nf_opt_gen_find(gen_type, a)) { /* the model type's option: a value */
                const char * val = nf_cli_need_value(argc, argv, &i);
                if (!val) return 0;
                if (v->n_extra == NF_CLI_MAX_EXTRA) {
                    fprintf(stderr, "error: too many options\n");
                    return 0;
                }
                v->extra_key[v->n_extra] = a + 2;
                v->extra_val[v->n_extra++] = val;
                continue;
            }
            nf_opt_unknown(mask, gen_type, a);
            return 0;
        }
        const struct nf_cli_opt * o = &nf_cli_opt_table[k];
        if (o->type == NF_OPT_FLAG) {
            /* --quiet and --progress: one bar mode */
            if ((k == NF_O_QUIET && v->set[NF_O_PROGRESS]) || (k == NF_O_PROGRESS && v->set[NF_O_QUIET])) {
                fprintf(stderr, "error: --quiet and --progress exclude each other\n");
                return 0;
            }
            v->set[k] = 1;
            v->pos[k] = i;
            v->s[k] = a;
            continue;
        }
        const char * val = nf_cli_need_value(argc, argv, &i);
        if (!val) return 0;
        char e[256];
        switch (o->type) {
            case NF_OPT_INT:
                if (!nf_cli_parse_int(o->name, val, (int64_t) o->min, (int64_t) o->max, &v->i[k])) return 0;
                break;
            case NF_OPT_DOUBLE:
                if (!nf_cli_parse_double(o->name, val, o->min, o->max, &v->d[k])) return 0;
                break;
            case NF_OPT_ENUM:
                if (!nf_opt_choice_ok(o->choices, val)) {
                    char words[256];
                    nf_opt_choices_words(o->choices, words, sizeof(words));
                    fprintf(stderr, "error: %s must be %s, got '%s'\n", o->name, words, nf__esc(e, sizeof(e), val));
                    return 0;
                }
                break;
            case NF_OPT_STRING:
                if (v->n_all == NF_CLI_MAX_EXTRA) {
                    fprintf(stderr, "error: too many options\n");
                    return 0;
                }
                v->all_id[v->n_all] = k;
                v->all_val[v->n_all++] = val;
                break;
            default: break;
        }
        v->set[k] = 1;
        v->pos[k] = i - 1;
        v->s[k] = val;
    }
    /* the files this command reads: no output may be one of them (path-guard.c) */
    nf_out_inputs_clear();
    for (int k = 0; k < NF_O_COUNT; k++)
        if (v->set[k] && nf_cli_opt_table[k].type == NF_OPT_PATH && !nf_opt_is_output(k))
            nf_out_input_add(nf_cli_opt_table[k].name, v->s[k]);
    return 1;
}

const char * nf_cli_opt_str(const struct nf_cli_opts * v, enum nf_cli_opt_id id, const char * dflt) {
    return v->set[id] ? v->s[id] : dflt;
}

int nf_cli_opt_task(const struct nf_cli_opts * v) {
    const char * task = nf_cli_opt_str(v, NF_O_TASK, "auto");
    return strcmp(task, "classification") == 0 ? NF_PREDICT_CLASSIFICATION
           : strcmp(task, "regression") == 0   ? NF_PREDICT_REGRESSION
                                               : NF_PREDICT_AUTO;
}

int nf_cli_opt_progress(const struct nf_cli_opts * v) {
    return v->set[NF_O_QUIET] ? NF_PROGRESS_QUIET : v->set[NF_O_PROGRESS] ? NF_PROGRESS_FORCE : NF_PROGRESS_AUTO;
}

int nf_cli_opts_wants_help(const char * cmd, int argc, char ** argv) {
    const struct nf_cli_command * c = nf_cli_command_find(cmd);
    if (!c) return 0;
    int i = 1;
    if (c->mask == NF_M(GEN) && argc > 1 && argv[1][0] != '-') i = 2; /* the model type */
    for (; i < argc; i++) {
        const char * a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) return 1;
        const int k = nf_opt_find(a, c->mask);
        if (k >= 0) {
            if (nf_cli_opt_table[k].type != NF_OPT_FLAG) i++;
        } else if (c->mask == NF_M(GEN) && nf_opt_gen_find(NULL, a)) {
            i++;
        } else {
            return 0; /* an unknown option: the command says so */
        }
    }
    return 0;
}
