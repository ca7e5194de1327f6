/* progress.c -- a one-line progress bar on stderr for long commands
 * (`annotate`, `predict`; README "Progress"): "WHAT: DONE/TOTAL UNIT (P%),
 * R/s, ETA H:MM:SS", refreshed in place with '\r' at most 4 times a second,
 * terminated with a newline by nf_progress_end. Drawn when stderr is a
 * terminal and the command was not given --quiet, or given --progress;
 * otherwise begin returns NULL and every call is a no-op, so a pipe or a log
 * file gets nothing. */
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NF_PROGRESS_MIN_MS 250.0

struct nf_progress {
    char what[64], unit[32], note[96];
    long long total, done;
    double t0, last;
    int drawn;  /* a line is on the terminal (not yet terminated) */
    size_t len; /* its length, to blank a longer previous line    */
};

static void nf_progress_hms(double s, char * out, size_t n) {
    if (s < 0 || s > 3.6e8) {
        snprintf(out, n, "--:--");
        return;
    }
    const long long t = (long long) (s + 0.5);
    snprintf(out, n, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
}

static void nf_progress_draw(nf_progress * p, double now) {
    char line[256], eta[32];
    const double el = (now - p->t0) / 1000.0;
    const double rate = el > 0 ? (double) p->done / el : 0.0;
    int k;
    if (p->total > 0) {
        const double pct = 100.0 * (double) p->done / (double) p->total;
        if (rate > 0)
            nf_progress_hms((double) (p->total - p->done) / rate, eta, sizeof(eta));
        else
            snprintf(eta, sizeof(eta), "--:--");
        k = snprintf(line, sizeof(line), "%s: %lld/%lld %s (%.1f%%), %.3g/s, ETA %s", p->what, p->done, p->total,
                     p->unit, pct, rate, eta);
    } else {
        nf_progress_hms(el, eta, sizeof(eta));
        k = snprintf(line, sizeof(line), "%s: %lld %s, %.3g/s, %s elapsed", p->what, p->done, p->unit, rate, eta);
    }
    if (k >= 0 && p->note[0] && (size_t) k < sizeof(line))
        k += snprintf(line + k, sizeof(line) - (size_t) k, ", %s", p->note);
    if (k < 0) return;
    size_t len = (size_t) k < sizeof(line) ? (size_t) k : sizeof(line) - 1;
    /* blank what a longer previous line leaves */
    fprintf(stderr, "\r%s%*s", line, p->len > len ? (int) (p->len - len) : 0, "");
    fflush(stderr);
    p->len = len;
    p->drawn = 1;
    p->last = now;
}

int nf_progress_enabled(int mode) {
    return mode == NF_PROGRESS_FORCE || (mode == NF_PROGRESS_AUTO && isatty(STDERR_FILENO));
}

nf_progress * nf_progress_begin(const char * what, const char * unit, long long total, int mode) {
    if (!nf_progress_enabled(mode)) return NULL;
    nf_progress * p = calloc(1, sizeof(*p));
    if (!p) return NULL; /* no bar: not worth failing the command */
    snprintf(p->what, sizeof(p->what), "%s", what);
    snprintf(p->unit, sizeof(p->unit), "%s", unit ? unit : "");
    p->total = total > 0 ? total : 0;
    p->t0 = nf_cli_now_ms();
    nf_progress_draw(p, p->t0);
    return p;
}

void nf_progress_update(nf_progress * p, long long done) {
    if (!p) return;
    p->done = done;
    if (p->total > 0 && done > p->total) p->total = 0; /* the count was wrong: no ETA */
    const double now = nf_cli_now_ms();
    if (!p->drawn || now - p->last >= NF_PROGRESS_MIN_MS) nf_progress_draw(p, now);
}

void nf_progress_note(nf_progress * p, const char * note) {
    if (p) snprintf(p->note, sizeof(p->note), "%s", note ? note : "");
}

void nf_progress_suspend(nf_progress * p) {
    if (!p || !p->drawn) return;
    fprintf(stderr, "\r%*s\r", (int) p->len, "");
    fflush(stderr);
    p->drawn = 0;
    p->len = 0;
}

void nf_progress_end(nf_progress * p) {
    if (!p) return;
    nf_progress_draw(p, nf_cli_now_ms());
    fputc('\n', stderr);
    fflush(stderr);
    free(p);
}
