/* plots.c -- the pictures (nofall-plot.h): splice tracks, ref vs alt
 * around a variant, run's SpTransformer output, verify's errors, and the
 * file they go to. */
#include "plot-impl.h"
#include "model.h"
#include "nf-impl.h"
#include "io/nf-io.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NF_PLOT_MAX_POINTS 1400 /* about two per horizontal pixel */

/* positions x0.. with their values; n > NF_PLOT_MAX_POINTS: the maximum of
 * each of NF_PLOT_MAX_POINTS equal runs, at the run's first position */
static int64_t nf_pool(const float * v, int64_t n, int64_t x0, double * xs, double * ys) {
    if (n <= NF_PLOT_MAX_POINTS) {
        for (int64_t i = 0; i < n; i++) {
            xs[i] = (double) (x0 + i);
            ys[i] = v[i];
        }
        return n;
    }
    for (int64_t k = 0; k < NF_PLOT_MAX_POINTS; k++) {
        const int64_t a = k * n / NF_PLOT_MAX_POINTS, b = (k + 1) * n / NF_PLOT_MAX_POINTS;
        double m = -INFINITY;
        for (int64_t i = a; i < b; i++)
            if (v[i] > m) m = v[i];
        xs[k] = (double) (x0 + a);
        ys[k] = m;
    }
    return NF_PLOT_MAX_POINTS;
}

char * nf_plot_splice_svg(const char * title, const char * x_label, int64_t x0, const float * acceptor,
                          const float * donor, int64_t n, nf_err * err) {
    if (!acceptor || !donor || n < 1) {
        nf__err_set(err, NF_ERR_ARG, "a splice picture needs acceptor and donor values (n = %lld)", (long long) n);
        return NULL;
    }
    const int64_t m = n < NF_PLOT_MAX_POINTS ? n : NF_PLOT_MAX_POINTS;
    double * buf = malloc((size_t) m * 4 * sizeof(double));
    if (!buf) {
        nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        return NULL;
    }
    struct nf_plot_series s[2] = {{"acceptor", buf, buf + m, 0, 0, 0, "#1f77b4"},
                                  {"donor", buf + 2 * m, buf + 3 * m, 0, 0, 0, "#d62728"}};
    s[0].n = nf_pool(acceptor, n, x0, buf, buf + m);
    s[1].n = nf_pool(donor, n, x0, buf + 2 * m, buf + 3 * m);
    struct nf_plot_panel p = {0};
    p.title = n > NF_PLOT_MAX_POINTS ? "splice-site probability (each point: the maximum of its positions)"
                                     : "splice-site probability";
    p.x_label = x_label ? x_label : "position";
    p.y_label = "probability";
    p.y_min = 0;
    p.y_max = 1;
    p.series = s;
    p.n_series = 2;
    char * svg = nf_plot_svg(title, &p, 1, err);
    free(buf);
    return svg;
}

char * nf_plot_variant_svg(const char * title, const char * x_label, int64_t x0, int64_t variant_x,
                           const float * ref_acceptor, const float * ref_donor, const float * alt_acceptor,
                           const float * alt_donor, int64_t n, nf_err * err) {
    if (!ref_acceptor || !ref_donor || !alt_acceptor || !alt_donor || n < 1 || n > 1000000) {
        nf__err_set(err, NF_ERR_ARG, "a variant picture needs ref and alt acceptor and donor values (n = %lld)",
                    (long long) n);
        return NULL;
    }
    double * b = malloc((size_t) n * 5 * sizeof(double));
    if (!b) {
        nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        return NULL;
    }
    double *xs = b, *y[4] = {b + n, b + 2 * n, b + 3 * n, b + 4 * n};
    const float * src[4] = {ref_acceptor, alt_acceptor, ref_donor, alt_donor};
    for (int64_t i = 0; i < n; i++) {
        xs[i] = (double) (x0 + i);
        for (int k = 0; k < 4; k++) y[k][i] = src[k][i];
    }
    char mark[64];
    snprintf(mark, sizeof(mark), "variant %lld", (long long) variant_x);
    struct nf_plot_series s[4] = {{"ref", xs, y[0], n, 0, 0, "#1f77b4"},
                                  {"alt", xs, y[1], n, 0, 1, "#d62728"},
                                  {"ref", xs, y[2], n, 0, 0, "#1f77b4"},
                                  {"alt", xs, y[3], n, 0, 1, "#d62728"}};
    struct nf_plot_panel p[2];
    memset(p, 0, sizeof(p));
    for (int k = 0; k < 2; k++) {
        p[k].title = k ? "donor probability" : "acceptor probability";
        p[k].x_label = x_label ? x_label : "position";
        p[k].y_label = "probability";
        p[k].y_max = 1;
        p[k].series = s + 2 * k;
        p[k].n_series = 2;
        p[k].mark_x = (double) variant_x;
        p[k].mark_label = mark;
    }
    char * svg = nf_plot_svg(title, p, 2, err);
    free(b);
    return svg;
}

/* the 1-based start and contig of "chr:start-end" (commas allowed), or 0 */
static int nf_region_start(const char * region, char * contig, size_t n, int64_t * start) {
    const char * colon = region ? strrchr(region, ':') : NULL;
    if (!colon || colon == region) return 0;
    int64_t v = 0;
    const char * p = colon + 1;
    for (; *p && *p != '-'; p++) {
        if (*p == ',') continue;
        if (*p < '0' || *p > '9' || v > 1000000000000LL) return 0;
        v = v * 10 + (*p - '0');
    }
    if (v < 1) return 0;
    snprintf(contig, n, "%.*s", (int) (colon - region), region);
    *start = v;
    return 1;
}

/* records' acceptor / donor tracks (b * N + i), record b's row i at x0 + i: a panel per record, at most 8 */
static char * nf__plot_records_svg(const char * region, const char * xl, int64_t B, int64_t N, int64_t x0,
                                   const float * acceptor, const float * donor, nf_err * err) {
    const int64_t shown = B < 8 ? B : 8;
    const int64_t m_pts = N < NF_PLOT_MAX_POINTS ? N : NF_PLOT_MAX_POINTS;
    double * buf = malloc((size_t) (shown * m_pts * 4) * sizeof(double));
    struct nf_plot_series * s = calloc((size_t) (2 * shown), sizeof(*s));
    struct nf_plot_panel * p = calloc((size_t) shown, sizeof(*p));
    char(*titles)[96] = calloc((size_t) shown, sizeof(*titles));
    char * svg = NULL;
    if (!buf || !s || !p || !titles) {
        nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t b = 0; b < shown; b++) {
        double * q = buf + b * m_pts * 4;
        s[2 * b] = (struct nf_plot_series){"acceptor", q, q + m_pts, 0, 0, 0, "#1f77b4"};
        s[2 * b + 1] = (struct nf_plot_series){"donor", q + 2 * m_pts, q + 3 * m_pts, 0, 0, 0, "#d62728"};
        s[2 * b].n = nf_pool(acceptor + b * N, N, x0, q, q + m_pts);
        s[2 * b + 1].n = nf_pool(donor + b * N, N, x0, q + 2 * m_pts, q + 3 * m_pts);
        if (B > 1)
            snprintf(titles[b], sizeof(titles[b]), "sequence %lld of %lld%s", (long long) (b + 1), (long long) B,
                     N > NF_PLOT_MAX_POINTS ? " (each point: the maximum of its positions)" : "");
        else
            snprintf(titles[b], sizeof(titles[b]), "%s",
                     N > NF_PLOT_MAX_POINTS ? "each point: the maximum of its positions" : "");
        p[b].title = titles[b][0] ? titles[b] : NULL;
        p[b].x_label = xl;
        p[b].y_label = "probability";
        p[b].y_max = 1;
        p[b].series = s + 2 * b;
        p[b].n_series = 2;
    }
    char title[400];
    snprintf(title, sizeof(title), "SpTransformer splice-site probability%s%s", region ? ", " : "",
             region ? region : "");
    svg = nf_plot_svg(title, p, (int) shown, err);
done:
    free(buf);
    free(s);
    free(p);
    free(titles);
    return svg;
}

/* the x axis' label and the position of the input's first base: genomic with a region */
static int64_t nf__plot_region_axis(const char * region, char * xl, size_t n) {
    char contig[256] = "";
    int64_t start = 1;
    if (region && nf_region_start(region, contig, sizeof(contig), &start)) {
        char e[256];
        snprintf(xl, n, "%s position (1-based)", nf__esc(e, sizeof(e), contig));
    } else {
        snprintf(xl, n, "position in the input sequence (1-based)");
    }
    return start;
}

char * nf_plot_run_svg(const nf_model * m, const nf_inputs * in, const float * out, const char * region, nf_err * err) {
    if (!m || !in || !out || strcmp(nf_model_type(m), "sptransformer") != 0) {
        nf__err_set(err, NF_ERR_UNSUPPORTED, "--plot: %s has no picture of its output (SpTransformer has)",
                    m ? nf_model_type(m) : "no model");
        return NULL;
    }
    int ndim = 0;
    int64_t sh[NF_ARRAY_MAX_DIMS];
    if (nf_model_output_shape(m, nf_inputs_arrays(in), nf_inputs_count(in), &ndim, sh, err) != NF_OK) return NULL;
    if (ndim != 3 || sh[2] < 3 || sh[0] < 1 || sh[1] < 1) {
        nf__err_set(err, NF_ERR_MISMATCH, "--plot: output shape is not (batch, positions, channels)");
        return NULL;
    }
    const int64_t B = sh[0], N = sh[1], C = sh[2], shown = B < 8 ? B : 8;
    int64_t context = 0;
    struct nf_config_item ci;
    for (int i = 0; nf_model_config_item(m, i, &ci); i++)
        if (strcmp(ci.key, "context_len") == 0) context = ci.num;
    int pad = 0;
    for (int i = 0; i < in->n_report; i++)
        if (strcmp(in->report[i].key, "context") == 0)
            pad = strcmp(in->report[i].str, "pad") == 0 || strcmp(in->report[i].str, "genome") == 0;
    /* output i is token context + i; the input's nucleotide (token - flank); in
     * mode genome (flanks read beyond the region) the region's own */
    const int64_t first = pad ? 0 : context;
    char xl[320];
    const int64_t x0 = nf__plot_region_axis(region, xl, sizeof(xl)) + first;
    float * tr = malloc((size_t) (2 * shown * N) * sizeof(float));
    if (!tr) {
        nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int64_t b = 0; b < shown; b++) /* upstream's driver: softmax over channels 0..2 */
        for (int64_t i = 0; i < N; i++) {
            const float * x = out + (b * N + i) * C;
            const double mx = fmax(fmax(x[0], x[1]), x[2]);
            double e[3], sum = 0.0;
            for (int c = 0; c < 3; c++) sum += (e[c] = exp((double) x[c] - mx));
            tr[b * N + i] = (float) (e[1] / sum);
            tr[(shown + b) * N + i] = (float) (e[2] / sum);
        }
    char * svg = nf__plot_records_svg(region, xl, B, N, x0, tr, tr + shown * N, err);
    free(tr);
    return svg;
}

char * nf_plot_tracks_svg(const char * region, int64_t B, int64_t N, int64_t x0, const float * acceptor,
                          const float * donor, nf_err * err) {
    if (B < 1 || N < 1 || !acceptor || !donor) {
        nf__err_set(err, NF_ERR_ARG, "--plot: no positions to draw");
        return NULL;
    }
    char xl[320];
    nf__plot_region_axis(region, xl, sizeof(xl));
    return nf__plot_records_svg(region, xl, B, N, x0, acceptor, donor, err);
}

/* ---- verify ---------------------------------------------------------------------------------- */

static double nf_num(const cJSON * o, const char * key) {
    const cJSON * j = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(j) ? j->valuedouble : NAN;
}

char * nf_plot_verify_svg(const char * verify_json, nf_err * err) {
    cJSON * doc = verify_json ? cJSON_Parse(verify_json) : NULL;
    const cJSON * cases = cJSON_GetObjectItemCaseSensitive(doc, "cases");
    if (!cJSON_IsArray(cases) || cJSON_GetArraySize(cases) < 1) {
        cJSON_Delete(doc);
        nf__err_set(err, NF_ERR_FORMAT, "verify JSON: no \"cases\" array");
        return NULL;
    }
    const int n = cJSON_GetArraySize(cases);
    int n_staged = 0, n_bars = n;
    const cJSON * c;
    cJSON_ArrayForEach(c, cases) {
        const cJSON * st = cJSON_GetObjectItemCaseSensitive(c, "stages");
        if (cJSON_IsArray(st) && cJSON_GetArraySize(st) > 0) {
            n_staged++;
            n_bars += cJSON_GetArraySize(st);
        }
    }
    if (n_staged > 8) n_staged = 8;
    struct nf_plot_bar * bars = calloc((size_t) n_bars, sizeof(*bars));
    struct nf_plot_panel * p = calloc((size_t) (1 + n_staged), sizeof(*p));
    char(*titles)[160] = calloc((size_t) (2 + n_staged), sizeof(*titles));
    char * svg = NULL;
    if (!bars || !p || !titles) {
        nf__err_set(err, NF_ERR_NOMEM, "out of memory");
        goto done;
    }
    const double bound = nf_num(doc, "max_abs_threshold");
    const cJSON * dev = cJSON_GetObjectItemCaseSensitive(doc, "device");
    const cJSON * ag = cJSON_GetObjectItemCaseSensitive(doc, "against");
    snprintf(titles[0], sizeof(titles[0]), "nofall verify: %s against %s", cJSON_IsString(dev) ? dev->valuestring : "?",
             cJSON_IsString(ag) ? ag->valuestring : "?");
    int k = 0, panel = 1;
    cJSON_ArrayForEach(c, cases) {
        const cJSON * name = cJSON_GetObjectItemCaseSensitive(c, "case");
        bars[k].name = cJSON_IsString(name) ? name->valuestring : "?";
        bars[k++].value = nf_num(c, "max_abs_error");
    }
    p[0].title = "max |error| per case";
    p[0].x_label = "case";
    p[0].y_label = "max |device - reference|";
    p[0].y_log = 1;
    p[0].bars = bars;
    p[0].n_bars = n;
    p[0].bound = bound;
    p[0].bound_label = isfinite(bound) ? "bound (max_abs)" : NULL;
    cJSON_ArrayForEach(c, cases) {
        const cJSON * st = cJSON_GetObjectItemCaseSensitive(c, "stages");
        if (!cJSON_IsArray(st) || cJSON_GetArraySize(st) < 1 || panel > n_staged) continue;
        const cJSON * name = cJSON_GetObjectItemCaseSensitive(c, "case");
        const cJSON * first = cJSON_GetObjectItemCaseSensitive(c, "bisect_first_stage");
        snprintf(titles[panel], sizeof(titles[panel]), "case %s: max |error| after each stage (first over: %s)",
                 cJSON_IsString(name) ? name->valuestring : "?", cJSON_IsString(first) ? first->valuestring : "none");
        struct nf_plot_panel * q = &p[panel];
        q->title = titles[panel];
        q->x_label = "stage";
        q->y_label = "max |device - reference|";
        q->y_log = 1;
        q->bars = bars + k;
        q->bound = bound;
        q->bound_label = isfinite(bound) ? "bound (max_abs)" : NULL;
        const cJSON * s;
        cJSON_ArrayForEach(s, st) {
            const cJSON * sn = cJSON_GetObjectItemCaseSensitive(s, "stage");
            bars[k].name = cJSON_IsString(sn) ? sn->valuestring : "?";
            bars[k++].value = nf_num(s, "max_abs_error");
            q->n_bars++;
        }
        panel++;
    }
    svg = nf_plot_svg(titles[0], p, panel, err);
done:
    free(bars);
    free(p);
    free(titles);
    cJSON_Delete(doc);
    return svg;
}

int nf_plot_check_writable(const char * path, const char * flag, nf_err * err) {
    if (!path || !path[0]) return nf__err_set(err, NF_ERR_ARG, "%s needs a file name", flag ? flag : "--plot");
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return nf__err_set(err, NF_ERR_ARG, "%s %s: a directory, not a file", flag ? flag : "--plot", path);
    char tmp[4200];
    int fd = -1;
    if (nf__tmp_create(path, tmp, sizeof(tmp), &fd, err) != NF_OK)
        return nf__err_prefix(err, "%s (its folder cannot be written)", flag ? flag : "--plot");
    close(fd);
    unlink(tmp);
    return NF_OK;
}

int nf_plot_write(const char * path, const char * flag, const char * text, nf_err * err) {
    if (!path || !path[0]) return nf__err_set(err, NF_ERR_ARG, "%s needs a file name", flag ? flag : "--plot");
    if (!text) return nf__err_set(err, NF_ERR_ARG, "%s %s: nothing to write", flag ? flag : "--plot", path);
    char tmp[4200];
    int fd = -1;
    if (nf__tmp_create(path, tmp, sizeof(tmp), &fd, err) != NF_OK)
        return nf__err_prefix(err, "%s", flag ? flag : "--plot");
    const size_t n = strlen(text);
    size_t off = 0;
    while (off < n) {
        const ssize_t w = write(fd, text + off, n - off);
        if (w <= 0) break;
        off += (size_t) w;
    }
    const int ok = off == n && fsync(fd) == 0;
    if (close(fd) != 0 || !ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return nf__err_set(err, NF_ERR_IO, "%s %s: write failed", flag ? flag : "--plot", path);
    }
    return NF_OK;
}
