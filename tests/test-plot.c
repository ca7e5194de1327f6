/* test-plot.c -- the SVG writer (include/nofall-plot.h) through its public
 * API: text escaped, the same input the same bytes, tracks broken at
 * non-finite values, steps, log-axis bars coloured against the bound with
 * zeros at the floor, peaks kept when positions are pooled, verify's JSON
 * (cases and stages), refusals, and the file written whole. */
#include "nofall-plot.h"
#include "nf-test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int count(const char * s, const char * needle) {
    int n = 0;
    for (const char * p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* the d attribute of the k-th track path (malloc'd) */
static char * track_d(const char * svg, int k) {
    const char * p = svg;
    for (int i = 0; i <= k; i++) {
        p = strstr(p, "class=\"track\"");
        if (!p) return NULL;
        p++;
    }
    const char * d = strstr(p, " d=\"");
    if (!d) return NULL;
    d += 4;
    const char * e = strchr(d, '"');
    char * out = malloc((size_t) (e - d) + 1);
    memcpy(out, d, (size_t) (e - d));
    out[e - d] = '\0';
    return out;
}

int main(int argc, char ** argv) {
    const char * tmp = argc > 1 ? argv[1] : ".";
    nf_err err = {0};
    /* tracks: escaping, determinism, a break at NaN, steps */
    const double y1[6] = {0.1, 0.5, NAN, 0.2, 0.9, 0.3}, y2[6] = {0, 1, 0, 1, 0, 1};
    struct nf_plot_series s[2] = {{"a <b> & 'c'", NULL, y1, 6, 0, 0, NULL}, {"steps", NULL, y2, 6, 1, 1, "#00aa00"}};
    struct nf_plot_panel p = {0};
    p.title = "panel \"one\"";
    p.x_label = "position";
    p.y_label = "probability";
    p.series = s;
    p.n_series = 2;
    p.mark_x = 2.0;
    p.mark_label = "here";
    char * a = nf_plot_svg("title <&>", &p, 1, &err);
    char * b = nf_plot_svg("title <&>", &p, 1, &err);
    CHECK(a && b && strcmp(a, b) == 0, "the same input, other bytes");
    if (a) {
        CHECK(strstr(a, "title &lt;&amp;&gt;") && !strstr(a, "title <&>"), "the title is not escaped");
        CHECK(strstr(a, "a &lt;b&gt; &amp; &apos;c&apos;") != NULL, "the legend entry is not escaped");
        CHECK(strstr(a, "panel &quot;one&quot;") != NULL, "the panel title is not escaped");
        CHECK(count(a, "class=\"track\"") == 2 && count(a, "class=\"legend\"") == 2, "2 tracks and legend entries");
        CHECK(strstr(a, "class=\"marker\"") && strstr(a, ">here<"), "no marker");
        char * d0 = track_d(a, 0);
        char * d1 = track_d(a, 1);
        CHECK(d0 && count(d0, "M") == 2 && count(d0, "L") == 3, "track 1: %s (want 2 runs, 5 points)", d0 ? d0 : "");
        CHECK(d1 && count(d1, "M") == 1 && count(d1, "H") == 5 && count(d1, "V") == 5, "steps: %s", d1 ? d1 : "");
        CHECK(strstr(a, "stroke-dasharray=\"5 3\"") != NULL, "the dashed track");
        free(d0);
        free(d1);
    }
    nf_free(a);
    nf_free(b);
    /* bars on a log axis against a bound: red over it, zero and n/a at the floor */
    const struct nf_plot_bar bars[4] = {{"small", 1e-7}, {"zero", 0.0}, {"nan", NAN}, {"big", 3e-3}};
    struct nf_plot_panel q = {0};
    q.y_log = 1;
    q.bars = bars;
    q.n_bars = 4;
    q.bound = 1e-3;
    q.bound_label = "bound";
    q.x_label = "case";
    char * c = nf_plot_svg(NULL, &q, 1, &err);
    CHECK(c != NULL, "bars: %s", err.msg);
    if (c) {
        CHECK(count(c, "class=\"bar\"") == 4, "4 bars");
        CHECK(count(c, "fill=\"#d62728\"") == 1, "one bar over the bound");
        CHECK(strstr(c, ">1e-3<") && strstr(c, ">1e-7<"), "log ticks at powers of ten");
        CHECK(strstr(c, ">0<") && strstr(c, ">n/a<"), "zero and NaN labelled at the floor");
        CHECK(strstr(c, "class=\"bound\"") != NULL, "the bound line");
    }
    nf_free(c);
    /* pooled positions keep the peak: one spike among 5000 reaches the top of the frame */
    float acc[5000], don[5000];
    for (int i = 0; i < 5000; i++) acc[i] = don[i] = 0.01f;
    acc[3333] = 1.0f;
    char * sp = nf_plot_splice_svg("spike", "chr9 position", 1001, acc, don, 5000, &err);
    CHECK(sp != NULL, "splice: %s", err.msg);
    if (sp) {
        char * d = track_d(sp, 0);
        CHECK(d && count(d, "L") < 1500, "pooled: %d points", d ? count(d, "L") : -1);
        const char * fr = strstr(sp, "class=\"frame\"");
        double top = 0;
        CHECK(fr && sscanf(strstr(fr, "y=\"") + 3, "%lf", &top) == 1, "no frame");
        char want[32];
        snprintf(want, sizeof(want), " %.2fL", top);
        CHECK(d && strstr(d, want) != NULL, "the spike (y %.2f) is lost", top);
        CHECK(strstr(sp, "maximum of its positions") && strstr(sp, ">5000<"), "pooling said, x in positions");
        free(d);
    }
    nf_free(sp);
    /* variant: two panels, four tracks, the variant marked */
    char * v = nf_plot_variant_svg("v", NULL, 100, 150, acc, don, don, acc, 101, &err);
    CHECK(v && count(v, "class=\"track\"") == 4 && count(v, "class=\"marker\"") == 2 && strstr(v, "variant 150"),
          "variant picture");
    nf_free(v);
    /* verify's JSON */
    const char * vj = "{\"device\":\"cpu\",\"against\":\"cpu\",\"max_abs_threshold\":0.001,\"cases\":["
                      "{\"case\":\"seed=42\",\"max_abs_error\":2e-7,\"bisect_first_stage\":\"l1\","
                      "\"stages\":[{\"stage\":\"l0\",\"max_abs_error\":0},{\"stage\":\"l1\",\"max_abs_error\":0.01}]},"
                      "{\"case\":\"seed=<1>\",\"max_abs_error\":5e-4}]}";
    char * vs = nf_plot_verify_svg(vj, &err);
    CHECK(vs != NULL, "verify: %s", err.msg);
    if (vs) {
        CHECK(count(vs, "class=\"bar\"") == 4 && count(vs, "fill=\"#d62728\"") == 1, "2 case bars + 2 stage bars");
        CHECK(strstr(vs, "case seed=42: max |error| after each stage (first over: l1)") != NULL, "stage panel title");
        CHECK(strstr(vs, "seed=&lt;1&gt;") != NULL, "case name escaped");
    }
    nf_free(vs);
    /* refusals */
    CHECK(nf_plot_verify_svg("{\"cases\": 3}", &err) == NULL && err.code == NF_ERR_FORMAT, "no cases: %d", err.code);
    err = (nf_err){0};
    CHECK(nf_plot_verify_svg("not json", &err) == NULL && err.code == NF_ERR_FORMAT, "not JSON");
    err = (nf_err){0};
    CHECK(nf_plot_svg("x", &p, 0, &err) == NULL && err.code == NF_ERR_ARG, "no panel");
    err = (nf_err){0};
    struct nf_plot_series bad = {"x", NULL, NULL, 3, 0, 0, NULL};
    p.series = &bad;
    p.n_series = 1;
    CHECK(nf_plot_svg("x", &p, 1, &err) == NULL && err.code == NF_ERR_ARG, "a track without values");
    err = (nf_err){0};
    CHECK(nf_plot_splice_svg("x", NULL, 1, acc, don, 0, &err) == NULL && err.code == NF_ERR_ARG, "no positions");
    err = (nf_err){0};
    /* the file: written whole, replaced; a missing directory an error naming the flag */
    char path[4096];
    snprintf(path, sizeof(path), "%s/test-plot.svg", tmp);
    CHECK_RC(nf_plot_write(path, "--plot", "<svg/>\n", &err), NF_OK, &err);
    CHECK_RC(nf_plot_write(path, "--plot", "<svg></svg>\n", &err), NF_OK, &err);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size == 12, "the file replaced whole");
    snprintf(path, sizeof(path), "%s/no-such-dir/x.svg", tmp);
    CHECK(nf_plot_write(path, "--plot", "<svg/>", &err) != NF_OK && strstr(err.msg, "--plot"), "%s", err.msg);
    return nf_test_done("test-plot");
}
