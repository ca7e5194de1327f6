/* opts-text.c -- what the option table (options.def) is shown as: the
 * command list, `nofall CMD --help` / `nofall help CMD`, the man pages
 * (`nofall help --man CMD`, written by the `man` build target) and the bash
 * completion script (`nofall completion bash`). */
#include "cli.h"
#include "opts.h"
#include "io/nf-io.h"
#include "weights.h"

#include <string.h>

/* the variants of cmd that row k is for, when not all of them: "Mitra, SpTransformer" */
static void nf_txt_models(const struct nf_cli_command * c, uint32_t variants, char * out, size_t n) {
    size_t len = 0;
    out[0] = '\0';
    if ((variants & c->mask) == c->mask) return;
    for (int v = 0; v < NF_V_COUNT; v++)
        if (((variants & c->mask) >> v) & 1u && nf_cli_variant_model[v])
            nf__msg_append(out, n, &len, "%s%s", len ? ", " : "", nf_cli_variant_model[v]);
}

/* the shown choices of an enum, "a|b" */
static void nf_txt_choices(const char * choices, char * out, size_t n) {
    size_t len = 0;
    out[0] = '\0';
    const char * p = choices;
    while (*p) {
        const size_t l = strcspn(p, "|");
        if (*p != '=') nf__msg_append(out, n, &len, "%s%.*s", len ? "|" : "", (int) l, p);
        p += l;
        if (*p == '|') p++;
    }
}

/* the value's placeholder: META, or an enum's choices */
static void nf_txt_meta(const struct nf_cli_opt * o, char * out, size_t n) {
    if (o->type == NF_OPT_ENUM)
        nf_txt_choices(o->choices, out, n);
    else
        snprintf(out, n, "%s", o->meta ? o->meta : "");
}

/* the help line of row k for cmd: the help, [models], (default) */
static void nf_txt_line(const struct nf_cli_command * c, const struct nf_cli_opt * o, char * out, size_t n) {
    char models[128];
    nf_txt_models(c, o->variants, models, sizeof(models));
    size_t len = 0;
    out[0] = '\0';
    nf__msg_append(out, n, &len, "%s", o->help);
    if (o->def) nf__msg_append(out, n, &len, " (default: %s)", o->def);
    if (models[0]) nf__msg_append(out, n, &len, " [%s]", models);
}

/* text from column col on, wrapped at width, continuation lines at indent */
static void nf_txt_wrap(FILE * f, const char * text, int col, int indent, int width) {
    const char * p = text;
    while (*p) {
        const size_t w = strcspn(p, " ");
        if (col > indent && col + 1 + (int) w > width) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        fprintf(f, "%.*s", (int) w, p);
        col += (int) w;
        p += w;
        while (*p == ' ') p++;
    }
    fputc('\n', f);
}

/* "nofall run --model DIR --out OUT [OPTIONS]": what every variant needs */
static void nf_txt_synopsis(const struct nf_cli_command * c, char * out, size_t n) {
    size_t len = 0;
    out[0] = '\0';
    nf__msg_append(out, n, &len, "nofall %s", c->name);
    if (c->mask == NF_M(GEN)) nf__msg_append(out, n, &len, " TYPE");
    for (int k = 0; k < NF_O_COUNT; k++) {
        const struct nf_cli_opt * o = &nf_cli_opt_table[k];
        if ((o->required & c->mask) != c->mask || !(o->variants & c->mask)) continue;
        char meta[128];
        nf_txt_meta(o, meta, sizeof(meta));
        nf__msg_append(out, n, &len, " %s%s%s", o->name, meta[0] ? " " : "", meta);
    }
    nf__msg_append(out, n, &len, " [OPTIONS]");
}

static int nf_txt_models_of(const struct nf_cli_command * c, char * out, size_t n) {
    size_t len = 0;
    int count = 0;
    out[0] = '\0';
    for (int v = 0; v < NF_V_COUNT; v++)
        if ((c->mask >> v) & 1u && nf_cli_variant_model[v]) {
            nf__msg_append(out, n, &len, "%s%s", len ? ", " : "", nf_cli_variant_model[v]);
            count++;
        }
    return count;
}

void nf_cli_usage(FILE * f) {
    fprintf(f, "nofall %s -- strict-device inference for tabular and genomic foundation models\n\n", NF_VERSION);
    fprintf(f, "usage: nofall COMMAND [OPTIONS]   (nofall COMMAND --help, or nofall help COMMAND: its options)\n\n");
    fprintf(f, "commands:\n");
    for (const struct nf_cli_command * c = nf_cli_commands; c->name; c++)
        fprintf(f, "  %-13s%s\n", c->name, c->summary);
    fprintf(f, "\n  nofall --version   the version\n");
}

int nf_cli_help(FILE * f, const char * cmd) {
    const struct nf_cli_command * c = nf_cli_command_find(cmd);
    if (!c) return 0;
    char syn[1024], models[128], line[1024];
    nf_txt_synopsis(c, syn, sizeof(syn));
    fprintf(f, "usage: %s\n\n%s", syn, c->summary);
    if (nf_txt_models_of(c, models, sizeof(models)) > 1)
        fprintf(f, ".\nThe model type comes from --model (%s); an option marked [type] is that type's only", models);
    fprintf(f, ".\n\noptions:\n");
    for (int k = 0; k < NF_O_COUNT; k++) {
        const struct nf_cli_opt * o = &nf_cli_opt_table[k];
        if (!(o->variants & c->mask)) continue;
        char head[160], meta[128];
        nf_txt_meta(o, meta, sizeof(meta));
        snprintf(head, sizeof(head), "  %s%s%s", o->name, meta[0] ? " " : "", meta);
        nf_txt_line(c, o, line, sizeof(line));
        fprintf(f, "%-30s", head);
        nf_txt_wrap(f, line, strlen(head) < 30 ? 30 : (int) strlen(head), 30, 100);
    }
    if (c->mask == NF_M(GEN)) {
        for (int t = 0; t < nf_model_type_count(); t++) {
            const char *type = nf_model_type_name(t), *o, *help = NULL;
            if (!nf_model_type_gen_option(type, 0, NULL)) continue;
            fprintf(f, "\noptions of gen-weights %s:\n", type);
            for (int i = 0; (o = nf_model_type_gen_option(type, i, &help)); i++) {
                char head[160];
                snprintf(head, sizeof(head), "  --%s V", o);
                fprintf(f, "%-30s", head);
                nf_txt_wrap(f, help ? help : "", strlen(head) < 30 ? 30 : (int) strlen(head), 30, 100);
            }
        }
    }
    fprintf(f, "%-30s%s\n", "  -h, --help", "this help");
    return 1;
}

int nf_cli_option_list(FILE * f, const char * cmd) {
    const struct nf_cli_command * c = nf_cli_command_find(cmd);
    if (!c) return 0;
    for (int k = 0; k < NF_O_COUNT; k++)
        if (nf_cli_opt_table[k].variants & c->mask) fprintf(f, "%s\n", nf_cli_opt_table[k].name);
    if (c->mask == NF_M(GEN)) {
        for (int t = 0; t < nf_model_type_count(); t++) {
            const char *type = nf_model_type_name(t), *o;
            for (int i = 0; (o = nf_model_type_gen_option(type, i, NULL)); i++) {
                int dup = 0;
                for (int u = 0; u < t && !dup; u++) { /* printed for an earlier type */
                    const char * q;
                    for (int j = 0; (q = nf_model_type_gen_option(nf_model_type_name(u), j, NULL)); j++)
                        dup |= strcmp(q, o) == 0;
                }
                if (!dup) fprintf(f, "--%s\n", o);
            }
        }
    }
    return 1;
}

/* roff: text with '-' and '\' escaped */
static void nf_roff(FILE * f, const char * s) {
    for (; *s; s++) {
        if (*s == '-' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
}

static void nf_roff_opt(FILE * f, const char * name, const char * meta) {
    fputs("\\fB", f);
    nf_roff(f, name);
    fputs("\\fR", f);
    if (meta && meta[0]) {
        fputs(" \\fI", f);
        nf_roff(f, meta);
        fputs("\\fR", f);
    }
    fputc('\n', f);
}

int nf_cli_man(FILE * f, const char * cmd) {
    const struct nf_cli_command * c = cmd ? nf_cli_command_find(cmd) : NULL;
    if (cmd && !c) return 0;
    char upper[64];
    snprintf(upper, sizeof(upper), "NOFALL%s%s", c ? "-" : "", c ? c->name : "");
    for (char * p = upper; *p; p++)
        if (*p >= 'a' && *p <= 'z') *p = (char) (*p - 'a' + 'A');
    fputs(".TH \"", f);
    nf_roff(f, upper);
    fprintf(f, "\" \"1\" \"\" \"nofall %s\" \"nofall manual\"\n.SH NAME\n", NF_VERSION);
    if (!c) {
        fputs("nofall \\- strict\\-device inference for tabular and genomic foundation models\n", f);
        fputs(".SH SYNOPSIS\n\\fBnofall\\fR \\fICOMMAND\\fR [\\fIOPTIONS\\fR]\n.SH COMMANDS\n", f);
        for (const struct nf_cli_command * k = nf_cli_commands; k->name; k++) {
            fputs(".TP\n\\fB", f);
            nf_roff(f, k->name);
            fputs("\\fR\n", f);
            nf_roff(f, k->summary);
            fputc('\n', f);
        }
        fputs(".SH SEE ALSO\n\\fBnofall\\-run\\fR(1) and the other commands' pages; README.md\n", f);
        return 1;
    }
    fputs("nofall\\-", f);
    nf_roff(f, c->name);
    fputs(" \\- ", f);
    nf_roff(f, c->summary);
    fputs("\n.SH SYNOPSIS\n", f);
    char syn[1024], models[128], line[1024];
    nf_txt_synopsis(c, syn, sizeof(syn));
    nf_roff(f, syn);
    fputs("\n.SH DESCRIPTION\n", f);
    nf_roff(f, c->summary);
    if (nf_txt_models_of(c, models, sizeof(models)) > 1) {
        fputs(". The model type comes from \\fB\\-\\-model\\fR (", f);
        nf_roff(f, models);
        fputs("); an option marked [type] is that type's only", f);
    }
    fputs(".\n.SH OPTIONS\n", f);
    for (int k = 0; k < NF_O_COUNT; k++) {
        const struct nf_cli_opt * o = &nf_cli_opt_table[k];
        if (!(o->variants & c->mask)) continue;
        char meta[128];
        nf_txt_meta(o, meta, sizeof(meta));
        fputs(".TP\n", f);
        nf_roff_opt(f, o->name, meta);
        nf_txt_line(c, o, line, sizeof(line));
        nf_roff(f, line);
        fputc('\n', f);
    }
    if (c->mask == NF_M(GEN)) {
        for (int t = 0; t < nf_model_type_count(); t++) {
            const char *type = nf_model_type_name(t), *o, *help = NULL;
            if (!nf_model_type_gen_option(type, 0, NULL)) continue;
            fputs(".SS ", f);
            nf_roff(f, type);
            fputc('\n', f);
            for (int i = 0; (o = nf_model_type_gen_option(type, i, &help)); i++) {
                char name[128];
                snprintf(name, sizeof(name), "--%s", o);
                fputs(".TP\n", f);
                nf_roff_opt(f, name, "V");
                nf_roff(f, help ? help : "");
                fputc('\n', f);
            }
        }
    }
    fputs(".TP\n\\fB\\-h\\fR, \\fB\\-\\-help\\fR\nthis help\n", f);
    fputs(".SH SEE ALSO\n\\fBnofall\\fR(1); README.md, \"The command line\"\n", f);
    return 1;
}

void nf_cli_completion_bash(FILE * f) {
    fputs("# bash completion for nofall, made from its option table: nofall completion bash\n"
          "_nofall() {\n"
          "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd=${COMP_WORDS[1]} opts=\n"
          "  if [ \"$COMP_CWORD\" -eq 1 ]; then\n"
          "    COMPREPLY=($(compgen -W \"",
          f);
    for (const struct nf_cli_command * c = nf_cli_commands; c->name; c++) fprintf(f, "%s ", c->name);
    fputs("--help --version\" -- \"$cur\")); return\n  fi\n  case \"$cmd\" in\n", f);
    fputs("    help) COMPREPLY=($(compgen -W \"--man ", f);
    for (const struct nf_cli_command * c = nf_cli_commands; c->name; c++) fprintf(f, "%s ", c->name);
    fputs("\" -- \"$cur\")); return ;;\n    completion) COMPREPLY=($(compgen -W \"bash\" -- \"$cur\")); return ;;\n",
          f);
    fputs("    gen-weights) if [ \"$COMP_CWORD\" -eq 2 ]; then COMPREPLY=($(compgen -W \"", f);
    for (int t = 0; t < nf_model_type_count(); t++) fprintf(f, "%s ", nf_model_type_name(t));
    fputs("\" -- \"$cur\")); return; fi ;;\n  esac\n", f);
    /* the value of the previous option */
    fputs("  case \"$cmd:$prev\" in\n", f);
    for (const struct nf_cli_command * c = nf_cli_commands; c->name; c++) {
        for (int k = 0; k < NF_O_COUNT; k++) {
            const struct nf_cli_opt * o = &nf_cli_opt_table[k];
            if (!(o->variants & c->mask) || o->type == NF_OPT_FLAG) continue;
            if (o->type == NF_OPT_ENUM) {
                char ch[256];
                nf_txt_choices(o->choices, ch, sizeof(ch));
                for (char * p = ch; *p; p++)
                    if (*p == '|') *p = ' ';
                fprintf(f, "    %s:%s) COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")); return ;;\n", c->name, o->name,
                        ch);
            } else if (o->type == NF_OPT_PATH) {
                fprintf(
                    f,
                    "    %s:%s) compopt -o filenames 2>/dev/null; COMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n",
                    c->name, o->name);
            } else {
                fprintf(f, "    %s:%s) COMPREPLY=(); return ;;\n", c->name, o->name);
            }
        }
    }
    fputs("  esac\n  case \"$cmd\" in\n", f);
    for (const struct nf_cli_command * c = nf_cli_commands; c->name; c++) {
        if (!c->mask) continue;
        fprintf(f, "    %s) opts=\"", c->name);
        for (int k = 0; k < NF_O_COUNT; k++)
            if (nf_cli_opt_table[k].variants & c->mask) fprintf(f, "%s ", nf_cli_opt_table[k].name);
        if (c->mask == NF_M(GEN)) {
            for (int t = 0; t < nf_model_type_count(); t++) {
                const char * o;
                for (int i = 0; (o = nf_model_type_gen_option(nf_model_type_name(t), i, NULL)); i++)
                    fprintf(f, "--%s ", o);
            }
        }
        fputs("--help\" ;;\n", f);
    }
    fputs("  esac\n  COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n}\ncomplete -F _nofall nofall\n", f);
}

/* nofall help [--man | --options] [COMMAND] */
int nf_cmd_help(int argc, char ** argv) {
    int man = 0, list = 0;
    const char * cmd = NULL;
    for (int i = 1; i < argc; i++) {
        char e[256], e2[256];
        if (strcmp(argv[i], "--man") == 0)
            man = 1;
        else if (strcmp(argv[i], "--options") == 0)
            list = 1;
        else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            cmd = cmd ? cmd : "help";
        else if (argv[i][0] == '-') {
            fprintf(stderr, "error: unknown option %s for `nofall help`; see `nofall help help`\n",
                    nf__esc(e, sizeof(e), argv[i]));
            return 2;
        } else if (cmd) {
            fprintf(stderr, "error: nofall help takes one command, not '%s' and '%s'\n", nf__esc(e2, sizeof(e2), cmd),
                    nf__esc(e, sizeof(e), argv[i]));
            return 2;
        } else
            cmd = argv[i];
    }
    if (cmd && !nf_cli_command_known(cmd)) {
        char e[256];
        fprintf(stderr, "error: unknown command '%s' (nofall help: the commands)\n", nf__esc(e, sizeof(e), cmd));
        return 2;
    }
    if (man) return nf_cli_man(stdout, cmd) ? 0 : 2;
    if (list) {
        if (!cmd) { /* the commands */
            for (const struct nf_cli_command * c = nf_cli_commands; c->name; c++) printf("%s\n", c->name);
            return 0;
        }
        return nf_cli_option_list(stdout, cmd) ? 0 : 2;
    }
    if (!cmd) {
        nf_cli_usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "help") == 0) {
        printf("usage: nofall help [--man | --options] [COMMAND]\n\n"
               "the commands; a command's options (--man: its man page in roff; --options: its option names,\n"
               "or without a command the command names)\n");
        return 0;
    }
    if (strcmp(cmd, "completion") == 0) {
        printf("usage: nofall completion bash\n\nprint the bash completion script (made from the option table):\n"
               "  source <(nofall completion bash)\n");
        return 0;
    }
    return nf_cli_help(stdout, cmd) ? 0 : 2;
}

int nf_cmd_completion(int argc, char ** argv) {
    if (argc == 2 && strcmp(argv[1], "bash") == 0) {
        nf_cli_completion_bash(stdout);
        return 0;
    }
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
        return nf_cmd_help(2, (char *[]){"help", "completion"});
    fprintf(stderr, "error: nofall completion takes one shell: bash\n");
    return 2;
}
