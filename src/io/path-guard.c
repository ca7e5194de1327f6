/* path-guard.c -- no file a command writes is a file it reads (README
 * "Hostile input"). The option parser registers every input path (opts.c:
 * the table's input options); a directory stands for the files in it (a
 * model's config.json, weights, vocab.txt; an adapter's two files), a file
 * for itself and the files read beside it (a FASTA's .fai / .gzi, a VCF's
 * .tbi / .csi, the config.json beside a .ckpt). Every output -- files opened
 * by nf_outfile_open (reports, traces, --json, annotate's output), an
 * output set's lock and the artifact names it would replace -- is checked
 * against them before any work: by device and inode where the output exists,
 * by canonical name where it does not yet. */
#include "nofall-outputs.h"
#include "nf-io.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

#define NF_GUARD_MAX 512

struct nf_guard_input {
    char flag[32];
    char path[4096];  /* as the user named it (or dir/name) */
    char canon[4096]; /* canonical absolute name ("" if none) */
    dev_t dev;
    ino_t ino;
};
static struct nf_guard_input nf_guard[NF_GUARD_MAX];
static int nf_guard_n;

static void nf_guard_one(const char * flag, const char * path) {
    struct stat sb;
    if (nf_guard_n >= NF_GUARD_MAX || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return;
    struct nf_guard_input * g = &nf_guard[nf_guard_n];
    snprintf(g->flag, sizeof(g->flag), "%s", flag);
    snprintf(g->path, sizeof(g->path), "%s", path);
    if (nf_out_canonical(path, g->canon, sizeof(g->canon)) != 0) g->canon[0] = '\0';
    g->dev = sb.st_dev;
    g->ino = sb.st_ino;
    nf_guard_n++;
}

static int nf_guard_ends(const char * s, const char * suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

void nf_out_input_add(const char * flag, const char * path) {
    struct stat sb;
    char p[4096];
    if (!path || !path[0] || stat(path, &sb) != 0) return; /* the command says what is missing */
    if (S_ISDIR(sb.st_mode)) {
        DIR * d = opendir(path);
        if (!d) return;
        for (struct dirent * e; (e = readdir(d)) != NULL;) {
            if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
            nf__path_join(p, sizeof(p), path, e->d_name);
            nf_guard_one(flag, p);
        }
        closedir(d);
        return;
    }
    nf_guard_one(flag, path);
    static const char * const sidecars[] = {".fai", ".gzi", ".tbi", ".csi"};
    for (size_t i = 0; i < sizeof(sidecars) / sizeof(sidecars[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", path, sidecars[i]);
        nf_guard_one(flag, p);
    }
    if (nf_guard_ends(path, ".ckpt")) { /* its configuration is read from beside it */
        const char * slash = strrchr(path, '/');
        snprintf(p, sizeof(p), "%.*sconfig.json", slash ? (int) (slash - path + 1) : 0, path);
        nf_guard_one(flag, p);
    }
}

void nf_out_inputs_clear(void) { nf_guard_n = 0; }

int nf_out_check_why(const char * path, const char * flag, const char * why, nf_err * err) {
    struct stat sb;
    char canon[4096], e1[1024], e2[1024];
    const int exists = stat(path, &sb) == 0;
    const int have_canon = nf_out_canonical(path, canon, sizeof(canon)) == 0;
    for (int i = 0; i < nf_guard_n; i++) {
        const struct nf_guard_input * g = &nf_guard[i];
        const int same = exists ? (sb.st_dev == g->dev && sb.st_ino == g->ino)
                                : (have_canon && g->canon[0] && strcmp(canon, g->canon) == 0);
        if (same)
            return nf__err_set(err, NF_ERR_ARG, "%s %s is a file this command reads (%s %s); %s", flag,
                               nf__esc(e1, sizeof(e1), path), g->flag, nf__esc(e2, sizeof(e2), g->path), why);
    }
    return NF_OK;
}

int nf_out_check(const char * path, const char * flag, nf_err * err) {
    return nf_out_check_why(path, flag, "it would be replaced: choose another name", err);
}

int nf_run_check_trace(const char * trace, const char * model, const char * const * inputs,
                       const char * const * input_flags, int n_inputs, const struct nf_outset * os,
                       const char * const * artifacts, int n_artifacts, char * in_out, size_t n, nf_err * err) {
    char e[1024], p[4096];
    in_out[0] = '\0';
    if (!trace) return NF_OK;
    if (!trace[0]) return nf__err_set(err, NF_ERR_ARG, "--trace needs a file name, got ''");
    nf__esc(e, sizeof(e), trace);
    for (int i = 0; i < n_inputs; i++) {
        if (inputs[i] && nf_out_same_file(trace, inputs[i])) {
            return nf__err_set(err, NF_ERR_ARG, "--trace %s is the input %s: refused (it would be overwritten)", e,
                               input_flags[i]);
        }
    }
    if (nf_out_same_file(trace, model))
        return nf__err_set(err, NF_ERR_ARG, "--trace %s is the model: refused (it would be overwritten)", e);
    static const char * const model_files[] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        nf__path_join(p, sizeof(p), model, model_files[i]);
        if (nf_out_same_file(trace, p)) {
            return nf__err_set(err, NF_ERR_ARG, "--trace %s is the model's %s: refused (it would be overwritten)", e,
                               model_files[i]);
        }
    }
    char c[4096];
    if (nf_out_canonical(trace, c, sizeof(c)) == 0 && (strcmp(c, os->out) == 0 || strcmp(c, os->lock) == 0)) {
        return nf__err_set(err, NF_ERR_ARG, "--trace %s is --out or its lock: refused", e);
    }
    char name[4096];
    if (nf_outset_inside(os, trace, name, sizeof(name))) {
        for (int i = 0; i < n_artifacts; i++) {
            if (strcmp(name, artifacts[i]) == 0) {
                return nf__err_set(err, NF_ERR_ARG,
                                   "--trace %s is the artifact %s of --out: refused (the trace would replace it)", e,
                                   artifacts[i]);
            }
        }
        if (strchr(name, '/'))
            return nf__err_set(err, NF_ERR_ARG, "--trace %s: inside a subdirectory of --out, which holds only files",
                               e);
        snprintf(in_out, n, "%s", name); /* part of the new set */
    }
    return NF_OK;
}
