/* svg.c -- the SVG writer: a text buffer, and nf_plot_svg's panels (tracks
 * or bars) with frames, ticks, tick labels, axis labels, legends, a log or
 * linear y axis, a bound line and a vertical marker. Every number goes out
 * through one fixed format, so the same input gives the same bytes. */
#include "plot-impl.h"
#include "nf-impl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nf__svg_printf(struct nf_svg * s, const char * fmt, ...) {
    if (s->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        const int k = vsnprintf(s->buf ? s->buf + s->n : NULL, s->buf ? s->cap - s->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            s->oom = 1;
            return;
        }
        if (s->buf && s->n + (size_t) k < s->cap) {
            s->n += (size_t) k;
            return;
        }
        size_t nc = s->cap ? s->cap : 4096;
        while (nc <= s->n + (size_t) k) nc *= 2;
        char * b = realloc(s->buf, nc);
        if (!b) {
            s->oom = 1;
            return;
        }
        s->buf = b;
        s->cap = nc;
    }
}

void nf__svg_escaped(struct nf_svg * s, const char * text) {
    for (const char * p = text ? text : ""; *p; p++) {
        switch (*p) {
            case '&': nf__svg_printf(s, "&amp;"); break;
            case '<': nf__svg_printf(s, "&lt;"); break;
            case '>': nf__svg_printf(s, "&gt;"); break;
            case '"': nf__svg_printf(s, "&quot;"); break;
            case '\'': nf__svg_printf(s, "&apos;"); break;
            default:
                /* control characters are not XML: dropped */
                if ((unsigned char) *p >= 0x20 || *p == '\t') nf__svg_printf(s, "%c", *p);
        }
    }
}

char * nf__svg_take(struct nf_svg * s, nf_err * err) {
    char * b = s->buf;
    if (s->oom || !b) {
        free(b);
        nf__err_set(err, NF_ERR_NOMEM, "out of memory writing the picture");
        b = NULL;
    }
    memset(s, 0, sizeof(*s));
    return b;
}

/* ---- geometry ------------------------------------------------------------------------------ */

enum { NF_W = 960, NF_LEFT = 84, NF_RIGHT = 190, NF_TRACK_H = 250, NF_BAR_H = 300, NF_TOP = 44 };
static const char * const nf_palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

/* a coordinate: two decimals, no "-0.00" */
static double nf_c(double v) { return fabs(v) < 0.005 ? 0.0 : v; }

struct nf_frame {
    double x, y, w, h; /* the plot area */
    double xlo, xhi;   /* data x range (tracks) */
    double ylo, yhi;   /* data y range (log10 of it on a log axis) */
    int log;
};

static double nf_fx(const struct nf_frame * f, double v) {
    return f->x + (f->xhi > f->xlo ? (v - f->xlo) / (f->xhi - f->xlo) : 0.5) * f->w;
}
static double nf_fy(const struct nf_frame * f, double v) {
    if (f->log) v = v > 0 && isfinite(v) ? log10(v) : f->ylo;
    if (v < f->ylo) v = f->ylo;
    if (v > f->yhi) v = f->yhi;
    return f->y + f->h - (f->yhi > f->ylo ? (v - f->ylo) / (f->yhi - f->ylo) : 0.5) * f->h;
}

/* a "nice" tick step for a range: 1, 2 or 5 times a power of ten, about 6 ticks */
static double nf_tick_step(double range, int * decimals) {
    const double raw = range > 0 ? range / 6 : 1;
    const double p = pow(10, floor(log10(raw)));
    const double m = raw / p;
    const double step = (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
    const int d = (int) -floor(log10(step) + 1e-9);
    *decimals = d > 0 ? d : 0;
    return step;
}

static void nf_text(struct nf_svg * s, double x, double y, const char * anchor, int size, int rotate,
                    const char * text) {
    nf__svg_printf(s, "<text x=\"%.2f\" y=\"%.2f\" font-size=\"%d\" text-anchor=\"%s\"", nf_c(x), nf_c(y), size,
                   anchor);
    if (rotate) nf__svg_printf(s, " transform=\"rotate(%d %.2f %.2f)\"", rotate, nf_c(x), nf_c(y));
    nf__svg_printf(s, ">");
    nf__svg_escaped(s, text);
    nf__svg_printf(s, "</text>\n");
}

static void nf_hline(struct nf_svg * s, double x0, double x1, double y, const char * style) {
    nf__svg_printf(s, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" %s/>\n", nf_c(x0), nf_c(y), nf_c(x1),
                   nf_c(y), style);
}
static void nf_vline(struct nf_svg * s, double x, double y0, double y1, const char * style) {
    nf__svg_printf(s, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" %s/>\n", nf_c(x), nf_c(y0), nf_c(x),
                   nf_c(y1), style);
}

/* the y axis: ticks, grid, labels (a log axis at powers of ten) */
static void nf_y_axis(struct nf_svg * s, const struct nf_frame * f, const char * label) {
    char t[64];
    nf__svg_printf(s, "<g class=\"y-axis\">\n");
    if (f->log) {
        for (int e = (int) ceil(f->ylo - 1e-9); e <= (int) floor(f->yhi + 1e-9); e++) {
            const double y = nf_fy(f, pow(10, e));
            nf_hline(s, f->x, f->x + f->w, y, "stroke=\"#e6e6e6\"");
            nf_hline(s, f->x - 5, f->x, y, "stroke=\"#000\"");
            snprintf(t, sizeof(t), "1e%d", e);
            nf_text(s, f->x - 8, y + 4, "end", 11, 0, t);
        }
    } else {
        int dec = 0;
        const double step = nf_tick_step(f->yhi - f->ylo, &dec);
        for (double v = ceil(f->ylo / step - 1e-9) * step; v <= f->yhi + step * 1e-6; v += step) {
            const double y = nf_fy(f, v);
            nf_hline(s, f->x, f->x + f->w, y, "stroke=\"#e6e6e6\"");
            nf_hline(s, f->x - 5, f->x, y, "stroke=\"#000\"");
            snprintf(t, sizeof(t), "%.*f", dec, fabs(v) < step * 1e-6 ? 0.0 : v);
            nf_text(s, f->x - 8, y + 4, "end", 11, 0, t);
        }
    }
    if (label) nf_text(s, f->x - 58, f->y + f->h / 2, "middle", 12, -90, label);
    nf__svg_printf(s, "</g>\n");
}

/* the x axis of a track panel: linear ticks */
static void nf_x_axis(struct nf_svg * s, const struct nf_frame * f, const char * label) {
    char t[64];
    int dec = 0;
    const double step = nf_tick_step(f->xhi - f->xlo, &dec);
    nf__svg_printf(s, "<g class=\"x-axis\">\n");
    for (double v = ceil(f->xlo / step - 1e-9) * step; v <= f->xhi + step * 1e-6; v += step) {
        const double x = nf_fx(f, v);
        nf_vline(s, x, f->y + f->h, f->y + f->h + 5, "stroke=\"#000\"");
        snprintf(t, sizeof(t), "%.*f", dec, fabs(v) < step * 1e-6 ? 0.0 : v);
        nf_text(s, x, f->y + f->h + 18, "middle", 11, 0, t);
    }
    if (label) nf_text(s, f->x + f->w / 2, f->y + f->h + 36, "middle", 12, 0, label);
    nf__svg_printf(s, "</g>\n");
}

static void nf_legend_entry(struct nf_svg * s, const struct nf_frame * f, int k, const char * name, const char * color,
                            int dashed) {
    const double x = f->x + f->w + 14, y = f->y + 10 + 18 * k;
    nf__svg_printf(s,
                   "<line class=\"legend\" x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"%s\" "
                   "stroke-width=\"2\"%s/>\n",
                   nf_c(x), nf_c(y), nf_c(x + 24), nf_c(y), color, dashed ? " stroke-dasharray=\"5 3\"" : "");
    nf_text(s, x + 30, y + 4, "start", 11, 0, name);
}

/* the data range of a panel (x of tracks, y of all) */
static void nf_ranges(const struct nf_plot_panel * p, struct nf_frame * f) {
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (int k = 0; k < p->n_series; k++) {
        const struct nf_plot_series * r = &p->series[k];
        for (int64_t i = 0; i < r->n; i++) {
            const double x = r->x ? r->x[i] : (double) i, y = r->y[i];
            if (isfinite(x)) {
                xlo = fmin(xlo, x);
                xhi = fmax(xhi, x);
            }
            if (isfinite(y) && (!p->y_log || y > 0)) {
                ylo = fmin(ylo, y);
                yhi = fmax(yhi, y);
            }
        }
    }
    for (int k = 0; k < p->n_bars; k++) {
        const double y = p->bars[k].value;
        if (isfinite(y) && (!p->y_log || y > 0)) {
            ylo = fmin(ylo, y);
            yhi = fmax(yhi, y);
        }
    }
    if (p->bound_label && isfinite(p->bound) && (!p->y_log || p->bound > 0)) {
        ylo = fmin(ylo, p->bound);
        yhi = fmax(yhi, p->bound);
    }
    if (p->y_max > p->y_min) {
        ylo = p->y_min;
        yhi = p->y_max;
    }
    if (!(xlo <= xhi)) xlo = 0, xhi = 1;
    if (xlo == xhi) xlo -= 0.5, xhi += 0.5;
    if (p->y_log) {
        if (!(ylo <= yhi)) ylo = 1e-8, yhi = 1;
        f->ylo = floor(log10(ylo));
        f->yhi = ceil(log10(yhi));
        if (f->yhi <= f->ylo) f->yhi = f->ylo + 1;
        if (log10(yhi) > f->yhi - 1e-9) f->yhi += 1;  /* headroom above a power of ten */
        if (f->yhi - f->ylo < 3) f->ylo = f->yhi - 3; /* at least three decades */
    } else {
        if (!(ylo <= yhi)) ylo = 0, yhi = 1;
        if (p->n_bars > 0 && ylo > 0) ylo = 0;
        if (ylo == yhi) ylo -= 0.5, yhi += 0.5;
        f->ylo = ylo;
        f->yhi = yhi;
    }
    f->xlo = xlo;
    f->xhi = xhi;
    f->log = p->y_log;
}

/* one track as a path: M/L (or H/V steps), a new M after a non-finite value */
static void nf_track(struct nf_svg * s, const struct nf_frame * f, const struct nf_plot_series * r, const char * color,
                     int clip) {
    nf__svg_printf(
        s, "<path class=\"track\" clip-path=\"url(#clip%d)\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s", clip,
        color, r->dashed ? " stroke-dasharray=\"5 3\"" : "");
    nf__svg_printf(s, " d=\"");
    int pen = 0;
    for (int64_t i = 0; i < r->n; i++) {
        const double xv = r->x ? r->x[i] : (double) i, yv = r->y[i];
        if (!isfinite(xv) || !isfinite(yv) || (f->log && !(yv > 0))) {
            pen = 0;
            continue;
        }
        const double x = nf_fx(f, xv), y = nf_fy(f, yv);
        if (!pen)
            nf__svg_printf(s, "M%.2f %.2f", nf_c(x), nf_c(y));
        else if (r->step)
            nf__svg_printf(s, "H%.2fV%.2f", nf_c(x), nf_c(y));
        else
            nf__svg_printf(s, "L%.2f %.2f", nf_c(x), nf_c(y));
        pen = 1;
    }
    nf__svg_printf(s, "\">");
    if (r->name) {
        nf__svg_printf(s, "<title>");
        nf__svg_escaped(s, r->name);
        nf__svg_printf(s, "</title>");
    }
    nf__svg_printf(s, "</path>\n");
}

static void nf_bars(struct nf_svg * s, const struct nf_frame * f, const struct nf_plot_panel * p) {
    const double slot = f->w / p->n_bars, bw = slot * 0.7 < 60 ? slot * 0.7 : 60;
    const int rot = p->n_bars > 8 ? -35 : 0;
    const double base = f->y + f->h;
    for (int k = 0; k < p->n_bars; k++) {
        const struct nf_plot_bar * b = &p->bars[k];
        const int shown = isfinite(b->value) && (!p->y_log || b->value > 0);
        const double top = shown ? nf_fy(f, b->value) : base - 2;
        const int over = p->bound_label && shown && b->value > p->bound;
        const double x = f->x + slot * k + (slot - bw) / 2;
        nf__svg_printf(s, "<rect class=\"bar\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\">",
                       nf_c(x), nf_c(top), nf_c(bw), nf_c(base - top), over ? "#d62728" : "#1f77b4");
        nf__svg_printf(s, "<title>");
        nf__svg_escaped(s, b->name);
        nf__svg_printf(s, ": %.6g</title></rect>\n", b->value);
        if (!shown) nf_text(s, x + bw / 2, base - 6, "middle", 10, 0, isfinite(b->value) ? "0" : "n/a");
        if (rot)
            nf_text(s, x + bw / 2, base + 14, "end", 10, rot, b->name);
        else
            nf_text(s, x + bw / 2, base + 16, "middle", 11, 0, b->name);
    }
}

static void nf_panel(struct nf_svg * s, const struct nf_plot_panel * p, double top, double h, int idx) {
    struct nf_frame f = {NF_LEFT, top + 26, NF_W - NF_LEFT - NF_RIGHT, h - 26 - (p->n_bars > 8 ? 90 : 48), 0, 1, 0,
                         1,       0};
    nf_ranges(p, &f);
    nf__svg_printf(s, "<g class=\"panel\">\n");
    nf__svg_printf(s,
                   "<clipPath id=\"clip%d\"><rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"/></clipPath>\n",
                   idx, f.x, f.y - 1, f.w, f.h + 2);
    if (p->title) nf_text(s, f.x, top + 16, "start", 13, 0, p->title);
    nf__svg_printf(s,
                   "<rect class=\"frame\" x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#fff\" "
                   "stroke=\"none\"/>\n",
                   f.x, f.y, f.w, f.h);
    nf_y_axis(s, &f, p->y_label);
    if (p->n_bars > 0) {
        nf_bars(s, &f, p);
        if (p->x_label) nf_text(s, f.x + f.w / 2, top + h - 8, "middle", 12, 0, p->x_label);
    } else {
        nf_x_axis(s, &f, p->x_label);
    }
    int legend = 0;
    if (p->bound_label && isfinite(p->bound)) {
        const double y = nf_fy(&f, p->bound);
        nf_hline(s, f.x, f.x + f.w, y, "class=\"bound\" stroke=\"#555\" stroke-width=\"1.2\" stroke-dasharray=\"6 4\"");
        nf_legend_entry(s, &f, legend++, p->bound_label, "#555", 1);
    }
    if (p->mark_label && isfinite(p->mark_x) && p->n_bars == 0) {
        const double x = nf_fx(&f, p->mark_x);
        nf_vline(s, x, f.y, f.y + f.h, "class=\"marker\" stroke=\"#888\" stroke-width=\"1\" stroke-dasharray=\"2 3\"");
        nf_text(s, x + 4, f.y + 12, "start", 10, 0, p->mark_label);
    }
    for (int k = 0; k < p->n_series; k++) {
        const struct nf_plot_series * r = &p->series[k];
        const char * color = r->color ? r->color : nf_palette[k % 6];
        nf_track(s, &f, r, color, idx);
        if (r->name) nf_legend_entry(s, &f, legend++, r->name, color, r->dashed);
    }
    nf__svg_printf(s,
                   "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"none\" stroke=\"#000\"/>\n"
                   "</g>\n",
                   f.x, f.y, f.w, f.h);
}

char * nf_plot_svg(const char * title, const struct nf_plot_panel * panels, int n_panels, nf_err * err) {
    if (n_panels < 1 || !panels) {
        nf__err_set(err, NF_ERR_ARG, "a picture needs at least one panel");
        return NULL;
    }
    for (int i = 0; i < n_panels; i++)
        for (int k = 0; k < panels[i].n_series; k++)
            if (!panels[i].series[k].y || panels[i].series[k].n < 0) {
                nf__err_set(err, NF_ERR_ARG, "panel %d, track %d: no values", i + 1, k + 1);
                return NULL;
            }
    double h = NF_TOP;
    for (int i = 0; i < n_panels; i++)
        h += panels[i].n_bars > 0 ? NF_BAR_H + (panels[i].n_bars > 8 ? 40 : 0) : NF_TRACK_H;
    struct nf_svg s = {0};
    nf__svg_printf(&s,
                   "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                   "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%.0f\" viewBox=\"0 0 %d %.0f\" "
                   "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n",
                   NF_W, h, NF_W, h);
    nf__svg_printf(&s, "<title>");
    nf__svg_escaped(&s, title ? title : "nofall");
    nf__svg_printf(&s, "</title>\n<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n");
    if (title) nf_text(&s, NF_W / 2.0, 26, "middle", 15, 0, title);
    double top = NF_TOP;
    for (int i = 0; i < n_panels; i++) {
        const double ph = panels[i].n_bars > 0 ? NF_BAR_H + (panels[i].n_bars > 8 ? 40 : 0) : NF_TRACK_H;
        nf_panel(&s, &panels[i], top, ph, i);
        top += ph;
    }
    nf__svg_printf(&s, "</svg>\n");
    return nf__svg_take(&s, err);
}
