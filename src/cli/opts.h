/* opts.h -- the command line's one option table (options.def) and what is
 * made from it: parsing with range checks, `nofall CMD --help`, `nofall
 * help CMD`, the man pages (`nofall help --man CMD`) and bash completion
 * (`nofall completion bash`). README "The command line". */
#ifndef NF_CLI_OPTS_H
#define NF_CLI_OPTS_H

#include <stdint.h>
#include <stdio.h>

/* The variants of the commands: `run`, `verify`, `bench` and `predict` take
 * the model type from --model and parse per model type. A table row names
 * the variants that take it (a mask of NF_V bits). */
enum nf_cli_variant {
    NF_V_RUN_MITRA,
    NF_V_RUN_SPT,
    NF_V_RUN_TAB,
    NF_V_VERIFY_MITRA,
    NF_V_VERIFY_SPT,
    NF_V_VERIFY_TAB,
    NF_V_BENCH_MITRA,
    NF_V_BENCH_SPT,
    NF_V_BENCH_TAB,
    NF_V_PREDICT_MITRA,
    NF_V_PREDICT_TAB,
    NF_V_GEN,
    NF_V_CONVERT,
    NF_V_ANNOTATE,
    NF_V_TOKENIZE,
    NF_V_DEVICES,
    NF_V_FINETUNE,
    NF_V_COUNT
};
#define NF_M(v)       (1u << NF_V_##v)
#define NF_MS_RUN     (NF_M(RUN_MITRA) | NF_M(RUN_SPT) | NF_M(RUN_TAB))
#define NF_MS_VERIFY  (NF_M(VERIFY_MITRA) | NF_M(VERIFY_SPT) | NF_M(VERIFY_TAB))
#define NF_MS_BENCH   (NF_M(BENCH_MITRA) | NF_M(BENCH_SPT) | NF_M(BENCH_TAB))
#define NF_MS_PREDICT (NF_M(PREDICT_MITRA) | NF_M(PREDICT_TAB))

enum nf_cli_opt_type {
    NF_OPT_FLAG,   /* no value                                   */
    NF_OPT_INT,    /* an integer in [min, max]                   */
    NF_OPT_DOUBLE, /* a finite number in [min, max]              */
    NF_OPT_STRING, /* any text                                    */
    NF_OPT_PATH,   /* a file or directory (completion: files)    */
    NF_OPT_ENUM    /* one of choices ("a|b|=alias": =x accepted, not shown) */
};

/* the option ids: NF_O_MODEL, NF_O_OUT, ... (one per table row) */
enum nf_cli_opt_id {
#define NF_OPT(id, name, type, meta, min, max, choices, def, variants, required, help) NF_O_##id,
#include "options.def"
#undef NF_OPT
    NF_O_COUNT
};

struct nf_cli_opt {
    const char * name; /* "--model" */
    enum nf_cli_opt_type type;
    const char * meta; /* the value's placeholder in the usage ("DIR") */
    double min, max;   /* NF_OPT_INT, NF_OPT_DOUBLE */
    const char * choices;
    const char * def; /* the default, as shown (NULL: none / said in help) */
    uint32_t variants, required;
    const char * help;
};
extern const struct nf_cli_opt nf_cli_opt_table[NF_O_COUNT];

/* the commands: name, the variants (mask), one line on what it does */
struct nf_cli_command {
    const char * name;
    uint32_t mask;
    const char * summary;
};
extern const struct nf_cli_command nf_cli_commands[]; /* ends with a NULL name */
/* the model type of each variant ("Mitra"), NULL where the command has one */
extern const char * const nf_cli_variant_model[NF_V_COUNT];
const struct nf_cli_command * nf_cli_command_find(const char * name);
const struct nf_cli_command * nf_cli_command_of(uint32_t mask); /* the command of a variant mask */

/* A command's parsed options: per id, whether it was given (last one wins),
 * its text, and its number (NF_OPT_INT: i, NF_OPT_DOUBLE: d). Options a
 * model type adds (gen-weights: nf_model_i.gen_options) in extra_*. */
#define NF_CLI_MAX_EXTRA 32
struct nf_cli_opts {
    unsigned char set[NF_O_COUNT];
    int pos[NF_O_COUNT]; /* the argv index of its last occurrence */
    const char * s[NF_O_COUNT];
    int64_t i[NF_O_COUNT];
    double d[NF_O_COUNT];
    int n_extra;
    const char * extra_key[NF_CLI_MAX_EXTRA]; /* without the leading "--" */
    const char * extra_val[NF_CLI_MAX_EXTRA];
    /* every value of a text option in order (a repeatable one, --column-type) */
    int n_all;
    int all_id[NF_CLI_MAX_EXTRA];
    const char * all_val[NF_CLI_MAX_EXTRA];
};

/* Parse argv[first..argc) for the command variant(s) in mask (one command's):
 * every option the table gives them, checked as the table says. 1 on
 * success; 0 after a message on stderr (the caller exits 2): an unknown
 * option (naming the command and `nofall CMD --help`), a missing value, a
 * value out of range or not a choice, --quiet with --progress. gen_type: the
 * model type whose gen_options are allowed too (gen-weights), else NULL. */
int nf_cli_opts_parse(uint32_t mask, int argc, char ** argv, int first, const char * gen_type, struct nf_cli_opts * v);
/* the row of an option name among those mask's variants take; -1 if none */
int nf_cli_opt_id_of(const char * name, uint32_t mask);
/* the run / verify / bench / predict variant of a model type ("mitra", "sptransformer", "tabstar"; else Mitra's) */
uint32_t nf_cli_variant_of_type(const char * type, uint32_t mitra, uint32_t spt, uint32_t tab);
/* v->s[id] if given, else dflt */
const char * nf_cli_opt_str(const struct nf_cli_opts * v, enum nf_cli_opt_id id, const char * dflt);
/* --task as enum nf_predict_task (nofall-tabular.h; absent: auto) */
int nf_cli_opt_task(const struct nf_cli_opts * v);
/* --quiet / --progress as the bar mode NF_PROGRESS_* (cli.h; neither: auto) */
int nf_cli_opt_progress(const struct nf_cli_opts * v);

/* Does argv (a command's, argv[0] the command) ask for help: --help or -h
 * where an option may stand? */
int nf_cli_opts_wants_help(const char * cmd, int argc, char ** argv);
/* is cmd a command of the table? */
int nf_cli_command_known(const char * cmd);

/* The texts made from the table (README "The command line"): */
void nf_cli_usage(FILE * f);                        /* the command list (`nofall --help`)     */
int nf_cli_help(FILE * f, const char * cmd);        /* `nofall CMD --help`; 0 if unknown cmd  */
int nf_cli_man(FILE * f, const char * cmd);         /* roff; cmd NULL: nofall(1)              */
int nf_cli_option_list(FILE * f, const char * cmd); /* one option a line (tests)             */
void nf_cli_completion_bash(FILE * f);
/* `nofall help [--man|--options] [CMD]` and `nofall completion bash` */
int nf_cmd_help(int argc, char ** argv);
int nf_cmd_completion(int argc, char ** argv);

#endif
