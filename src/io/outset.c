/* outset.c -- output sets written as a whole or not at all, a lock per
 * output directory, output files with private temporary names, and the
 * SIGINT/SIGTERM clean-up that goes with them. The protocol is README
 * "Output sets"; in short, for --out P/B:
 *
 *   1. lock: open P/.B.nofall.lock (created if absent), flock(LOCK_EX|LOCK_NB);
 *      held by another process -> refused with its pid. The lock file is
 *      re-checked after flock (same inode as the path) so unlinking it at
 *      the end cannot let two runs hold two different locks.
 *   2. recover, under the lock: if B is missing and P/.B.nofall-old.* exists
 *      (a run killed between the two renames of step 5b), rename it back to
 *      B; remove every other P/.B.nofall-new.* / P/.B.nofall-old.*.
 *   3. stage: mkdir P/.B.nofall-new.<pid>.<n> (fails early if P is not
 *      writable); the run writes its whole set there and verifies it.
 *   4. carry over: entries of B that are not among nofall's artifact names
 *      are hard-linked into the staging directory (B may hold only files).
 *   5. swap, with SIGINT/SIGTERM/SIGHUP/SIGQUIT blocked:
 *      a. renameat2(staging, B, RENAME_EXCHANGE): one atomic step; the
 *         staging name then holds the previous set, which is removed; or,
 *         where the file system cannot exchange,
 *      b. rename(B, P/.B.nofall-old.<pid>.<n>), rename(staging, B), remove
 *         the old one (step 2 repairs a crash between the two renames).
 *   6. unlink the lock file and close it.
 * A failure or a signal before step 5 removes the staging directory and
 * leaves B as it was. */
#define _GNU_SOURCE
#include "nofall-outputs.h"
#include "nf-io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- signal clean-up registry --------------------------------------------------------- */

#define NF_SIG_FILES 8
static char nf_sig_file[NF_SIG_FILES][4096];
static volatile sig_atomic_t nf_sig_file_on[NF_SIG_FILES];
static char nf_sig_dir[4096];
static volatile sig_atomic_t nf_sig_dir_on;
static char nf_sig_lock[4096];
static volatile sig_atomic_t nf_sig_lock_on;
/* the parents of --out an output set created: nf_sig_made[0..len) each, outermost first */
static char nf_sig_made[4096];
static unsigned short nf_sig_made_len[2048];
static volatile sig_atomic_t nf_sig_made_n;

/* rmdir made[0..len[k]) for k = n-1 .. 0, stopping at the first that is not
 * empty (or is gone); async-signal-safe */
static void nf_rm_made(const char * made, const unsigned short * len, int n) {
    char p[4096];
    for (int k = n - 1; k >= 0; k--) {
        memcpy(p, made, len[k]);
        p[len[k]] = '\0';
        if (rmdir(p) != 0) break;
    }
}

/* remove the plain entries of dir, then dir; async-signal-safe (raw getdents64) */
static int nf_rm_flat(const char * dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT ? 0 : -1;
    char buf[4096] __attribute__((aligned(8)));
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof(buf));
        if (n <= 0) break;
        for (long off = 0; off < n;) {
            /* struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, char name[] */
            unsigned short reclen;
            memcpy(&reclen, buf + off + 16, sizeof(reclen));
            const char * name = buf + off + 19;
            if (!(name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0')))) unlinkat(fd, name, 0);
            off += reclen;
        }
    }
    close(fd);
    return rmdir(dir);
}

/* set during the swap: sigprocmask blocks signals only in this thread and
 * a signal may land in another (OpenMP workers), so the handler itself
 * defers to the end of the swap */
static volatile sig_atomic_t nf_sig_defer, nf_sig_pending;

static void nf_sig_handler(int sig) {
    if (nf_sig_defer) {
        nf_sig_pending = sig;
        return;
    }
    for (int i = 0; i < NF_SIG_FILES; i++)
        if (nf_sig_file_on[i]) unlink(nf_sig_file[i]);
    if (nf_sig_dir_on) nf_rm_flat(nf_sig_dir);
    if (nf_sig_lock_on) unlink(nf_sig_lock);
    if (nf_sig_made_n > 0) nf_rm_made(nf_sig_made, nf_sig_made_len, nf_sig_made_n);
    signal(sig, SIG_DFL);
    raise(sig);
}

static const int nf_sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
#define NF_N_SIGS ((int) (sizeof(nf_sigs) / sizeof(nf_sigs[0])))

void nf_out_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = nf_sig_handler;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < NF_N_SIGS; i++) sigaddset(&sa.sa_mask, nf_sigs[i]);
    for (int i = 0; i < NF_N_SIGS; i++) sigaction(nf_sigs[i], &sa, NULL);
    /* a closed stdout pipe is a write error (reported), not a silent death */
    signal(SIGPIPE, SIG_IGN);
}

static void nf_sig_block(int block) {
    sigset_t s;
    sigemptyset(&s);
    for (int i = 0; i < NF_N_SIGS; i++) sigaddset(&s, nf_sigs[i]);
    if (block) {
        nf_sig_defer = 1;
        sigprocmask(SIG_BLOCK, &s, NULL);
        return;
    }
    sigprocmask(SIG_UNBLOCK, &s, NULL);
    nf_sig_defer = 0;
    if (nf_sig_pending) nf_sig_handler(nf_sig_pending); /* a signal that came during the swap, now */
}

static int nf_sig_add_file(const char * path) {
    for (int i = 0; i < NF_SIG_FILES; i++) {
        if (nf_sig_file_on[i]) continue;
        snprintf(nf_sig_file[i], sizeof(nf_sig_file[i]), "%s", path);
        nf_sig_file_on[i] = 1;
        return i;
    }
    return -1;
}

static void nf_sig_drop_file(int slot) {
    if (slot >= 0) nf_sig_file_on[slot] = 0;
}

/* ---- test hook ------------------------------------------------------------------------------ */

void nf_out_test_delay(const char * phase) {
#ifdef NF_TEST_HOOKS
    /* NOFALL_TEST_DELAY=PHASE:MS sleeps MS ms at PHASE (forward, write, commit),
     * so a test can deliver a signal there; compiled only with -DNOFALL_TEST_HOOKS=ON */
    const char * v = getenv("NOFALL_TEST_DELAY");
    const size_t n = strlen(phase);
    if (!v || strncmp(v, phase, n) != 0 || v[n] != ':') return;
    const long ms = strtol(v + n + 1, NULL, 10);
    if (ms <= 0 || ms > 600000) return;
    fprintf(stderr, "nofall: test hook: %s phase, sleeping %ld ms\n", phase, ms);
    fflush(stderr);
    struct timespec left = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
#else
    (void) phase;
#endif
}

/* ---- output files (--trace, --json) -------------------------------------------------------- */

int nf_outfile_open(struct nf_outfile * o, const char * path, const char * flag, nf_err * err) {
    memset(o, 0, sizeof(*o));
    o->slot = -1;
    o->fd = -1;
    char e[1024];
    if (!path[0]) return nf__err_set(err, NF_ERR_ARG, "%s needs a file name, got ''", flag);
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return nf__err_set(err, NF_ERR_ARG, "%s %s: is a directory", flag, nf__esc(e, sizeof(e), path));
    NF_TRY(nf_out_check(path, flag, err));
    snprintf(o->path, sizeof(o->path), "%s", path);
    int fd;
    if (nf__tmp_create(path, o->tmp, sizeof(o->tmp), &fd, err) != NF_OK) return nf__err_prefix(err, "%s", flag);
    o->slot = nf_sig_add_file(o->tmp);
    o->fd = fd;
    return NF_OK;
}

FILE * nf_outfile_fp(struct nf_outfile * o) {
    if (!o->f && o->fd >= 0) {
        o->f = fdopen(o->fd, "wb");
        if (o->f) o->fd = -1;
    }
    return o->f;
}

int nf_outfile_close(struct nf_outfile * o, nf_err * err) {
    char e[1024];
    FILE * f = nf_outfile_fp(o);
    if (!f) return nf__err_set(err, NF_ERR_IO, "%s: cannot write: %s", nf__esc(e, sizeof(e), o->tmp), strerror(errno));
    int ok = fflush(f) == 0 && !ferror(f) && fsync(fileno(f)) == 0;
    const int en = errno;
    ok = fclose(f) == 0 && ok;
    o->f = NULL;
    if (!ok)
        return nf__err_set(err, NF_ERR_IO, "%s: write failed: %s", nf__esc(e, sizeof(e), o->path),
                           strerror(en ? en : EIO));
    o->closed = 1;
    return NF_OK;
}

int nf_outfile_commit(struct nf_outfile * o, nf_err * err) {
    char e[1024];
    if (!o->closed) NF_TRY(nf_outfile_close(o, err));
    if (rename(o->tmp, o->path) != 0)
        return nf__err_set(err, NF_ERR_IO, "%s: rename failed: %s", nf__esc(e, sizeof(e), o->path), strerror(errno));
    nf_sig_drop_file(o->slot);
    o->slot = -1;
    o->tmp[0] = '\0';
    return NF_OK;
}

int nf_outfiles_commit(struct nf_outfile * const * files, int n, nf_err * err) {
    int rc = NF_OK;
    nf_sig_block(1);
    nf_out_test_delay("commit");
    for (int i = 0; i < n && rc == NF_OK; i++) rc = nf_outfile_commit(files[i], err);
    nf_sig_block(0);
    return rc;
}

void nf_outfile_abort(struct nf_outfile * o) {
    if (o->f) fclose(o->f);
    if (o->fd >= 0) close(o->fd);
    o->f = NULL;
    o->fd = -1;
    if (o->tmp[0]) unlink(o->tmp);
    nf_sig_drop_file(o->slot);
    o->slot = -1;
    o->tmp[0] = '\0';
}

/* ---- paths ------------------------------------------------------------------------------------ */

/* canonical absolute form of a path whose last component may not exist:
 * realpath(dirname) + "/" + basename */
int nf_out_canonical(const char * path, char * out, size_t n) {
    char dir[4096], base[4096], rp[PATH_MAX];
    size_t l = strlen(path);
    if (l == 0 || l >= sizeof(dir)) return -1;
    memcpy(dir, path, l + 1);
    while (l > 1 && dir[l - 1] == '/') dir[--l] = '\0';
    if (realpath(dir, rp)) {
        snprintf(out, n, "%s", rp);
        return 0;
    }
    char * s = strrchr(dir, '/');
    if (s) {
        snprintf(base, sizeof(base), "%s", s + 1);
        if (s == dir)
            s[1] = '\0';
        else
            *s = '\0';
    } else {
        snprintf(base, sizeof(base), "%s", dir);
        snprintf(dir, sizeof(dir), ".");
    }
    if (!realpath(dir, rp)) return -1;
    if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0) return -1;
    int w = snprintf(out, n, "%s%s%s", rp, strcmp(rp, "/") == 0 ? "" : "/", base);
    return w < 0 || (size_t) w >= n ? -1 : 0;
}

int nf_out_same_file(const char * a, const char * b) {
    struct stat x, y;
    if (stat(a, &x) != 0 || stat(b, &y) != 0) return 0;
    return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* ---- output sets ------------------------------------------------------------------------------- */

static unsigned nf_outset_counter;

static int nf_outset_is_artifact(const struct nf_outset * s, const char * name) {
    for (int i = 0; i < s->n_names; i++)
        if (strcmp(s->names[i], name) == 0) return 1;
    return 0;
}

/* entries P/.B.nofall-new.* and P/.B.nofall-old.* */
static int nf_outset_recover(struct nf_outset * s, nf_err * err) {
    char pre_new[512], pre_old[512], p[4096], e[1024];
    snprintf(pre_new, sizeof(pre_new), ".%s.nofall-new.", s->base);
    snprintf(pre_old, sizeof(pre_old), ".%s.nofall-old.", s->base);
    struct stat sb;
    const int have_out = lstat(s->out, &sb) == 0;
    DIR * d = opendir(s->parent);
    if (!d)
        return nf__err_set(err, NF_ERR_IO, "%s: cannot list: %s", nf__esc(e, sizeof(e), s->parent), strerror(errno));
    struct dirent * de;
    char restore[4096] = "";
    char * stale[64];
    int n_stale = 0;
    while ((de = readdir(d))) {
        const int is_new = strncmp(de->d_name, pre_new, strlen(pre_new)) == 0;
        const int is_old = strncmp(de->d_name, pre_old, strlen(pre_old)) == 0;
        if (!is_new && !is_old) continue;
        nf__path_join(p, sizeof(p), s->parent, de->d_name);
        if (is_old && !have_out && !restore[0]) {
            snprintf(restore, sizeof(restore), "%s", p);
            continue;
        }
        if (n_stale < 64) stale[n_stale++] = strdup(p);
    }
    closedir(d);
    if (restore[0]) {
        if (rename(restore, s->out) != 0) {
            for (int i = 0; i < n_stale; i++) free(stale[i]);
            return nf__err_set(err, NF_ERR_IO, "%s: cannot restore the previous results from %s: %s",
                               nf__esc(e, sizeof(e), s->out), restore, strerror(errno));
        }
        fprintf(stderr, "nofall: %s: restored the previous results an interrupted run had moved aside\n",
                nf__esc(e, sizeof(e), s->out));
    }
    for (int i = 0; i < n_stale; i++) {
        if (stale[i] && nf_rm_flat(stale[i]) != 0)
            fprintf(stderr, "warning: cannot remove the stale %s: %s\n", nf__esc(e, sizeof(e), stale[i]),
                    strerror(errno));
        free(stale[i]);
    }
    return NF_OK;
}

static int nf_outset_lock(struct nf_outset * s, nf_err * err) {
    char e[1024];
    for (int attempt = 0; attempt < 100; attempt++) {
        int fd = open(s->lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
        if (fd < 0)
            return nf__err_set(err, NF_ERR_IO, "--out %s: cannot create the lock %s: %s", nf__esc(e, sizeof(e), s->out),
                               s->lock, strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            const int en = errno;
            char pid[32] = "";
            ssize_t r = pread(fd, pid, sizeof(pid) - 1, 0);
            pid[r > 0 ? r : 0] = '\0';
            pid[strcspn(pid, "\n")] = '\0';
            close(fd);
            if (en == EWOULDBLOCK || en == EAGAIN) {
                return nf__err_set(
                    err, NF_ERR_IO,
                    "--out %s: another nofall run%s%s%s is writing it (lock %s held); refused, so the two "
                    "result sets cannot mix: run again when it has finished, or use another --out",
                    nf__esc(e, sizeof(e), s->out), pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "", s->lock);
            }
            return nf__err_set(err, NF_ERR_IO, "--out %s: cannot lock %s: %s", nf__esc(e, sizeof(e), s->out), s->lock,
                               strerror(en));
        }
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(s->lock, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
            char pid[32];
            const int n = snprintf(pid, sizeof(pid), "%ld\n", (long) getpid());
            if (ftruncate(fd, 0) == 0 && pwrite(fd, pid, (size_t) n, 0) != n) { /* the pid is for messages only */
            }
            s->lock_fd = fd;
            snprintf(nf_sig_lock, sizeof(nf_sig_lock), "%s", s->lock);
            nf_sig_lock_on = 1;
            return NF_OK;
        }
        close(fd); /* the lock file was replaced while we waited: take the new one */
    }
    return nf__err_set(err, NF_ERR_IO, "--out %s: cannot take the lock %s", nf__esc(e, sizeof(e), s->out), s->lock);
}

static void nf_outset_unlock(struct nf_outset * s) {
    if (s->lock_fd < 0) return;
    nf_sig_lock_on = 0;
    unlink(s->lock);
    close(s->lock_fd);
    s->lock_fd = -1;
}

/* --out's name, before anything is created: a name no run could use must
 * not leave directories behind. Every component must be a possible file
 * name, B at most 200 bytes (its lock and staging names add up to 34), and
 * the whole path -- made absolute -- short enough for the longest name a run
 * creates under it, P/.B.nofall-new.<pid>.<n>/.<artifact>.<pid>.<n>.tmp */
static int nf_outset_check_name(const char * out, const char * const * names, int n_names, nf_err * err) {
    char e[1024], shown[128];
    if (!out[0]) return nf__err_set(err, NF_ERR_ARG, "--out needs a directory name, got ''");
    size_t l = strlen(out);
    snprintf(shown, sizeof(shown), "%.80s%s", out, l > 80 ? "..." : "");
    nf__esc(e, sizeof(e), shown);
    while (l > 1 && out[l - 1] == '/') l--;
    size_t base = 0, longest = 0;
    for (size_t i = 0; i < l;) { /* components */
        size_t j = i;
        while (j < l && out[j] != '/') j++;
        if (j - i > NAME_MAX)
            return nf__err_set(err, NF_ERR_ARG,
                               "--out %s: a component of %zu bytes (at byte %zu); a file name has at most %d", e, j - i,
                               i, NAME_MAX);
        base = j - i;
        i = j + 1;
    }
    if (base > 200) return nf__err_set(err, NF_ERR_ARG, "--out %s: name too long (%zu bytes; at most 200)", e, base);
    for (int i = 0; i < n_names; i++)
        if (strlen(names[i]) > longest) longest = strlen(names[i]);
    size_t abs = l;
    char cwd[PATH_MAX];
    if (out[0] != '/' && getcwd(cwd, sizeof(cwd))) abs += strlen(cwd) + 1;
    const size_t extra = 62 + longest; /* the staging name (34) and a temporary file in it (28 + the name) */
    if (abs + extra > 4095)
        return nf__err_set(err, NF_ERR_ARG,
                           "--out %s: too long: %zu bytes as an absolute path; at most %zu, as the names a run "
                           "creates under it are %zu bytes longer",
                           e, abs, 4095 - extra, extra);
    return NF_OK;
}

/* mkdir -p dir, recording each directory created in s->made / made_len (and
 * for the signal handler) */
static int nf_outset_mkdirs(struct nf_outset * s, const char * dir, nf_err * err) {
    char p[4096], e[1024];
    const size_t n = strlen(dir);
    if (n == 0 || n >= sizeof(p))
        return nf__err_set(err, NF_ERR_ARG, "--out: bad directory name '%s'", nf__esc(e, sizeof(e), dir));
    memcpy(p, dir, n + 1);
    memcpy(s->made, dir, n + 1);
    memcpy(nf_sig_made, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if ((p[i] != '/' && p[i] != '\0') || p[i - 1] == '/') continue;
        const char c = p[i];
        p[i] = '\0';
        if (mkdir(p, 0777) == 0) {
            if (s->n_made < (int) (sizeof(s->made_len) / sizeof(s->made_len[0]))) {
                s->made_len[s->n_made] = (unsigned short) i;
                nf_sig_made_len[s->n_made] = (unsigned short) i;
                nf_sig_made_n = ++s->n_made;
            }
        } else if (errno != EEXIST) {
            return nf__err_set(err, NF_ERR_IO, "--out: %s: cannot create directory: %s", nf__esc(e, sizeof(e), p),
                               strerror(errno));
        }
        p[i] = c;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return nf__err_set(err, NF_ERR_IO, "--out: %s: not a directory", nf__esc(e, sizeof(e), dir));
    return NF_OK;
}

/* remove the parents begin created, innermost first, each only if empty */
static void nf_outset_rmdirs(struct nf_outset * s) {
    nf_sig_made_n = 0;
    nf_rm_made(s->made, s->made_len, s->n_made);
    s->n_made = 0;
}

static int nf_outset_begin_in(struct nf_outset * s, const char * out, const char * const * names, int n_names,
                              nf_err * err) {
    char e[1024], p[4096];
    NF_TRY(nf_outset_check_name(out, names, n_names, err));
    /* the parent first (created as before: mkdir -p, each level recorded), then the canonical name */
    {
        char tmp[4096];
        snprintf(tmp, sizeof(tmp), "%s", out);
        size_t l = strlen(tmp);
        while (l > 1 && tmp[l - 1] == '/') tmp[--l] = '\0';
        char * sl = strrchr(tmp, '/');
        if (sl && sl != tmp) {
            *sl = '\0';
            NF_TRY(nf_outset_mkdirs(s, tmp, err));
        }
    }
    if (nf_out_canonical(out, s->out, sizeof(s->out)) != 0 || strcmp(s->out, "/") == 0) {
        return nf__err_set(err, NF_ERR_ARG, "--out %s: not a usable directory name", nf__esc(e, sizeof(e), out));
    }
    char * sl = strrchr(s->out, '/');
    snprintf(s->base, sizeof(s->base), "%s", sl + 1);
    if (sl == s->out)
        snprintf(s->parent, sizeof(s->parent), "/");
    else
        snprintf(s->parent, sizeof(s->parent), "%.*s", (int) (sl - s->out), s->out);
    if (strlen(s->base) > 200)
        return nf__err_set(err, NF_ERR_ARG, "--out %s: name too long", nf__esc(e, sizeof(e), out));
    struct stat sb, cwd;
    if (lstat(s->out, &sb) == 0) {
        if (S_ISLNK(sb.st_mode) || !S_ISDIR(sb.st_mode)) {
            return nf__err_set(err, NF_ERR_ARG, "--out %s: exists and is not a directory", nf__esc(e, sizeof(e), out));
        }
        if (stat(".", &cwd) == 0 && cwd.st_dev == sb.st_dev && cwd.st_ino == sb.st_ino) {
            return nf__err_set(
                err, NF_ERR_ARG,
                "--out %s: is the current directory, whose contents a run would replace; give a directory of its own",
                nf__esc(e, sizeof(e), out));
        }
    }
    snprintf(s->lock, sizeof(s->lock), "%s/.%s.nofall.lock", strcmp(s->parent, "/") ? s->parent : "", s->base);
    /* the lock, and every file the new set may replace, must not be an input */
    NF_TRY(nf_out_check_why(
        s->lock, "--out (its lock file)",
        "a run locks --out with that file and removes it at the end: rename the input, or give another --out", err));
    for (int i = 0; i < n_names; i++) {
        /* refused even where the input is byte for byte what the run would write: the
         * user's file would be gone from where they keep it, replaced by a run's */
        char what[300];
        nf__path_join(p, sizeof(p), s->out, names[i]);
        snprintf(what, sizeof(what), "--out (its %s)", names[i]);
        NF_TRY(nf_out_check_why(p, what,
                                "the new results replace that name in --out (even with identical bytes): move "
                                "the input out of --out, or give another --out",
                                err));
    }
    NF_TRY(nf_outset_lock(s, err));
    int rc = nf_outset_recover(s, err);
    if (rc == NF_OK && lstat(s->out, &sb) == 0) {
        s->existed = 1;
        /* what is there must be carried over: files only */
        DIR * d = opendir(s->out);
        if (!d)
            rc = nf__err_set(err, NF_ERR_IO, "--out %s: cannot list: %s", nf__esc(e, sizeof(e), out), strerror(errno));
        struct dirent * de;
        while (rc == NF_OK && d && (de = readdir(d))) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
            nf__path_join(p, sizeof(p), s->out, de->d_name);
            struct stat eb;
            if (lstat(p, &eb) != 0) continue;
            if (!S_ISREG(eb.st_mode) && !S_ISLNK(eb.st_mode)) {
                char nm[512];
                rc = nf__err_set(err, NF_ERR_ARG,
                                 "--out %s holds '%s', which is not a plain file: a run replaces --out as a whole and "
                                 "keeps only files there; choose another --out",
                                 nf__esc(e, sizeof(e), out), nf__esc(nm, sizeof(nm), de->d_name));
            }
        }
        if (d) closedir(d);
    }
    if (rc == NF_OK) {
        int made = 0;
        for (int attempt = 0; attempt < 100 && !made; attempt++) {
            snprintf(s->staging, sizeof(s->staging), "%s/.%s.nofall-new.%ld.%u",
                     strcmp(s->parent, "/") ? s->parent : "", s->base, (long) getpid(), nf_outset_counter++);
            snprintf(nf_sig_dir, sizeof(nf_sig_dir), "%s", s->staging);
            nf_sig_dir_on = 1;
            if (mkdir(s->staging, 0777) == 0)
                made = 1;
            else {
                nf_sig_dir_on = 0;
                if (errno != EEXIST) {
                    rc = nf__err_set(err, NF_ERR_IO, "--out %s: cannot create the staging directory %s: %s",
                                     nf__esc(e, sizeof(e), out), s->staging, strerror(errno));
                    break;
                }
            }
        }
        if (rc == NF_OK && !made)
            rc = nf__err_set(err, NF_ERR_IO, "--out %s: no free staging name", nf__esc(e, sizeof(e), out));
    }
    if (rc != NF_OK) s->staging[0] = '\0';
    return rc;
}

int nf_outset_begin(struct nf_outset * s, const char * out, const char * const * names, int n_names, nf_err * err) {
    memset(s, 0, sizeof(*s));
    s->lock_fd = -1;
    s->names = names;
    s->n_names = n_names;
    const int rc = nf_outset_begin_in(s, out, names, n_names, err);
    if (rc != NF_OK) {
        nf_outset_unlock(s);
        nf_outset_rmdirs(s);
    }
    return rc;
}

void nf_outset_path(const struct nf_outset * s, const char * file, char * out, size_t n) {
    nf__path_join(out, n, s->staging, file);
}

int nf_outset_inside(const struct nf_outset * s, const char * path, char * name, size_t n) {
    /* by its directory, which may not exist yet (a new --out) */
    char dir[4096], c[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char * sl = strrchr(dir, '/');
    const char * base = sl ? sl + 1 : path;
    if (!*base) return 0;
    if (sl == dir)
        snprintf(dir, sizeof(dir), "/");
    else if (sl)
        *sl = '\0';
    else
        snprintf(dir, sizeof(dir), ".");
    if (nf_out_canonical(dir, c, sizeof(c)) != 0 || strcmp(c, s->out) != 0) return 0;
    if (name) snprintf(name, n, "%s", base);
    return 1;
}

static int nf_fsync_dir(const char * dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    int r = fsync(fd);
    close(fd);
    return r;
}

int nf_outset_commit(struct nf_outset * s, struct nf_outfile * extra, nf_err * err) {
    char e[1024], a[4096], b[4096];
    int rc = NF_OK;
    nf_sig_block(1);
    nf_out_test_delay("commit");
    struct stat sb;
    const int have_out = lstat(s->out, &sb) == 0;
    if (have_out) {
        DIR * d = opendir(s->out);
        if (!d)
            rc = nf__err_set(err, NF_ERR_IO, "--out %s: cannot list: %s", nf__esc(e, sizeof(e), s->out),
                             strerror(errno));
        struct dirent * de;
        while (rc == NF_OK && d && (de = readdir(d))) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 || nf_outset_is_artifact(s, de->d_name))
                continue;
            nf__path_join(a, sizeof(a), s->out, de->d_name);
            nf__path_join(b, sizeof(b), s->staging, de->d_name);
            if (linkat(AT_FDCWD, a, AT_FDCWD, b, 0) != 0 && errno != EEXIST) {
                char nm[512];
                rc = nf__err_set(err, NF_ERR_IO, "--out %s: cannot carry '%s' over into the new results: %s",
                                 nf__esc(e, sizeof(e), s->out), nf__esc(nm, sizeof(nm), de->d_name), strerror(errno));
            }
        }
        if (d) closedir(d);
    }
    nf_fsync_dir(s->staging);
    if (rc == NF_OK && have_out) {
        if (renameat2(AT_FDCWD, s->staging, AT_FDCWD, s->out, RENAME_EXCHANGE) == 0) {
            nf_rm_flat(s->staging); /* the previous set, now under the staging name */
        } else if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) {
            char old[4096];
            snprintf(old, sizeof(old), "%s/.%s.nofall-old.%ld.%u", strcmp(s->parent, "/") ? s->parent : "", s->base,
                     (long) getpid(), nf_outset_counter++);
            if (rename(s->out, old) != 0)
                rc = nf__err_set(err, NF_ERR_IO, "--out %s: cannot move the previous results aside: %s",
                                 nf__esc(e, sizeof(e), s->out), strerror(errno));
            else if (rename(s->staging, s->out) != 0) {
                rc = nf__err_set(err, NF_ERR_IO, "--out %s: cannot move the new results in: %s",
                                 nf__esc(e, sizeof(e), s->out), strerror(errno));
                (void) rename(old, s->out);
            } else
                nf_rm_flat(old);
        } else {
            rc = nf__err_set(err, NF_ERR_IO, "--out %s: cannot swap the new results in: %s",
                             nf__esc(e, sizeof(e), s->out), strerror(errno));
        }
    } else if (rc == NF_OK) {
        if (rename(s->staging, s->out) != 0)
            rc = nf__err_set(err, NF_ERR_IO, "--out %s: cannot move the new results in: %s",
                             nf__esc(e, sizeof(e), s->out), strerror(errno));
    }
    if (rc == NF_OK) {
        nf_sig_dir_on = 0;
        nf_sig_made_n = 0; /* the parents hold --out now */
        s->staging[0] = '\0';
        s->committed = 1;
        nf_fsync_dir(s->parent);
        if (extra && extra->tmp[0]) rc = nf_outfile_commit(extra, err);
    }
    nf_sig_block(0);
    return rc;
}

void nf_outset_end(struct nf_outset * s) {
    if (s->staging[0]) {
        nf_sig_dir_on = 0;
        nf_rm_flat(s->staging);
        s->staging[0] = '\0';
    }
    nf_outset_unlock(s);
    if (!s->committed) nf_outset_rmdirs(s);
}
