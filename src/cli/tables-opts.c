/* tables-opts.c -- the options predict and finetune share (nf_cli_train_opts)
 * and among them the table options (docs/tables.md):
 * --sep CHAR (tab: "tab" or "\t"), --drop COL[,COL...], --column-type COL=TYPE
 * (repeatable); reading a table with them (nf_table_read, nf_table_drop: the training table must have
 * every dropped column, the others drop those they have). */
#include "cli.h"
#include "opts.h"
#include "nofall-tabular.h"

#include <stdio.h>
#include <string.h>

int nf_cli_table_opts(const struct nf_cli_opts * v, struct nf_cli_tables * t) {
    memset(t, 0, sizeof(*t));
    const char * sep = nf_cli_opt_str(v, NF_O_SEP, NULL);
    if (sep) {
        if (strcmp(sep, "tab") == 0 || strcmp(sep, "\\t") == 0 || strcmp(sep, "\t") == 0)
            t->sep = '\t';
        else if (strlen(sep) == 1 && (unsigned char) sep[0] < 128 && sep[0] != '"' && sep[0] != '\n' && sep[0] != '\r')
            t->sep = sep[0];
        else {
            fprintf(stderr, "error: --sep '%s': one ASCII character (not a quote or a line end), or tab / \\t\n", sep);
            return 0;
        }
    }
    t->drop = nf_cli_opt_str(v, NF_O_DROP, NULL);
    for (int i = 0; i < v->n_all; i++)
        if (v->all_id[i] == NF_O_COLUMN_TYPE) {
            if (t->n_types == (int) (sizeof(t->types) / sizeof(t->types[0]))) {
                fprintf(stderr, "error: --column-type: at most %d\n", t->n_types);
                return 0;
            }
            t->types[t->n_types++] = v->all_val[i];
        }
    return 1;
}

int nf_cli_train_opts(const struct nf_cli_opts * v, int argc, char ** argv, struct nf_cli_train * c) {
    c->model = nf_cli_opt_str(v, NF_O_MODEL, NULL);
    c->train = nf_cli_opt_str(v, NF_O_TRAIN, NULL);
    c->val = nf_cli_opt_str(v, NF_O_VAL, NULL);
    c->target = nf_cli_opt_str(v, NF_O_TARGET, NULL);
    c->device = nf_cli_opt_str(v, NF_O_DEVICE, "cpu");
    c->out = nf_cli_opt_str(v, NF_O_OUT, NULL);
    c->mirror_signs = nf_cli_opt_str(v, NF_O_MIRROR_SIGNS, NULL);
    c->task = nf_cli_opt_task(v);
    c->mirror = !v->set[NF_O_NO_MIRROR];
    c->progress = nf_cli_opt_progress(v);
    c->ts_max_epochs = v->set[NF_O_MAX_EPOCHS] ? (int) v->i[NF_O_MAX_EPOCHS] : 50;
    c->ts_patience = v->set[NF_O_PATIENCE] ? (int) v->i[NF_O_PATIENCE] : 5;
    c->ts_no_average = v->set[NF_O_NO_AVERAGE];
    c->ts_dropout_set = v->set[NF_O_DROPOUT];
    c->ts_dropout = c->ts_dropout_set ? v->d[NF_O_DROPOUT] : 0.0;
    c->argc = argc;
    c->argv = argv;
    if (c->mirror_signs && !c->mirror) {
        fprintf(stderr, "error: --mirror-signs and --no-mirror exclude each other\n");
        return 0;
    }
    return 1;
}

int nf_cli_table_read(const struct nf_cli_tables * t, const char * path, int is_train, nf_table ** out, nf_err * err) {
    const struct nf_table_read_opts ro = {.sep = t ? t->sep : 0};
    int rc = nf_table_read(path, &ro, out, err);
    if (rc == NF_OK && t && t->drop) rc = nf_table_drop(*out, t->drop, is_train, err);
    for (int i = 0; rc == NF_OK && t && i < t->n_types; i++)
        rc = nf_table_set_type_spec(*out, t->types[i], is_train, "--column-type", err);
    if (rc == NF_OK && nf_table_index_like(*out))
        fprintf(stderr,
                "warning: %s: the first column, unnamed, holds 0..%lld like the row index df.to_csv() writes; it is "
                "used as a feature: --drop 'Unnamed: 0' leaves it out (or write with index=False)\n",
                path, (long long) nf_table_n_rows(*out) - 1);
    if (rc != NF_OK) {
        nf_table_free(*out);
        *out = NULL;
    }
    return rc;
}
