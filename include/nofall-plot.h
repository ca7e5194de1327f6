/*
 * nofall-plot.h -- pictures written by nofall itself (docs/plots.md): SVG
 * with no plotting dependency, and the op trace as Chrome trace-event JSON.
 *
 *   nf_plot_svg          panels of line / step tracks or bars, with axes,
 *                        ticks, labels, legends, a linear or log y axis, a
 *                        horizontal bound and a vertical marker
 *   nf_plot_splice_svg   acceptor / donor probability along positions
 *   nf_plot_variant_svg  ref vs alt acceptor / donor around one variant
 *   nf_plot_run_svg      run's SpTransformer output as nf_plot_splice_svg
 *   nf_plot_verify_svg   verify's JSON: error per case against its bound
 *                        (log axis), and per stage when it holds them
 *   nf_trace_chrome_json a backend's op records as trace events
 *   nf_annotate_plot_variant  (libnofall-genomics) one variant's windows
 *                        scored and drawn as nf_plot_variant_svg
 *
 * Output is deterministic: the same input gives the same bytes (numbers
 * written with fixed precision, no time stamps, no random ids). Every
 * returned text is malloc'd: release it with nf_free. Errors as in nofall.h.
 */
#ifndef NOFALL_PLOT_H
#define NOFALL_PLOT_H

#include "nofall.h"

#ifdef __cplusplus
extern "C" {
#endif

/* one track of a panel: points (x[i], y[i]); x NULL: 0, 1, 2, ... */
struct nf_plot_series {
    const char * name; /* the legend's entry (NULL: none) */
    const double * x;  /* NULL: the index */
    const double * y;  /* non-finite values break the line */
    int64_t n;
    int step;           /* 1: a step track (each value held to the next x) */
    int dashed;         /* 1: a dashed line */
    const char * color; /* "#rrggbb"; NULL: the panel's palette */
};

/* one bar of a bar panel (categorical x, in order) */
struct nf_plot_bar {
    const char * name;
    double value; /* <= 0 or non-finite on a log axis: drawn at the axis floor, labelled */
};

struct nf_plot_panel {
    const char *title, *x_label, *y_label;
    int y_log;           /* 1: a log10 y axis (ticks at powers of ten) */
    double y_min, y_max; /* y_max <= y_min: from the data */
    const struct nf_plot_series * series;
    int n_series;
    const struct nf_plot_bar * bars; /* bars instead of tracks when n_bars > 0 */
    int n_bars;
    double bound; /* a dashed horizontal line at this y when bound_label != NULL */
    const char * bound_label;
    double mark_x; /* a vertical marker at this x when mark_label != NULL (tracks) */
    const char * mark_label;
};

/* The panels stacked, one figure: an SVG document (nf_free), or NULL with err set. */
NF_API char * nf_plot_svg(const char * title, const struct nf_plot_panel * panels, int n_panels, nf_err * err);

/* Acceptor and donor probability at positions x0, x0 + 1, ... (n of each);
 * more positions than the plot has pixels: each drawn point is the maximum
 * of its positions (peaks stay visible). */
NF_API char * nf_plot_splice_svg(const char * title, const char * x_label, int64_t x0, const float * acceptor,
                                 const float * donor, int64_t n, nf_err * err);

/* Ref (solid) and alt (dashed) acceptor and donor probability at positions
 * x0 .. x0 + n - 1, the variant at variant_x marked; two panels. */
NF_API char * nf_plot_variant_svg(const char * title, const char * x_label, int64_t x0, int64_t variant_x,
                                  const float * ref_acceptor, const float * ref_donor, const float * alt_acceptor,
                                  const float * alt_donor, int64_t n, nf_err * err);

/* run's picture: the model's output `out` for inputs `in` (SpTransformer:
 * acceptor / donor probability per output position, a panel per sequence,
 * at most 8). region: the --region given ("chr:start-end", 1-based) or
 * NULL; then positions are genomic, else 1-based in the input sequence.
 * NF_ERR_UNSUPPORTED for a model with no picture. */
NF_API char * nf_plot_run_svg(const nf_model * m, const nf_inputs * in, const float * out, const char * region,
                              nf_err * err);

/* the same picture from tracks already made (the tiled run, nofall-genomics.h's
 * nf_seq_run_tiled): B records of N positions, acceptor[b * N + i] and
 * donor[b * N + i] the probabilities of record b at position x0 + i (genomic
 * with a region, else 1-based in the input); a panel per record, at most 8. */
NF_API char * nf_plot_tracks_svg(const char * region, int64_t B, int64_t N, int64_t x0, const float * acceptor,
                                 const float * donor, nf_err * err);

/* verify's picture from its JSON (nf_verify_json): each case's max_abs
 * error against the threshold, log scale; a panel per case that carries
 * "stages" (verify with stage_errors: bisect's stages). */
NF_API char * nf_plot_verify_svg(const char * verify_json, nf_err * err);

/* text (an SVG or JSON document) to path, replaced whole: written under a
 * temporary name beside it and renamed. flag names the option in errors. */
NF_API int nf_plot_write(const char * path, const char * flag, const char * text, nf_err * err);
/* before any work: path's folder takes the file (a temporary file created
 * beside path and removed), and path is not a directory; else an error
 * naming flag and path */
NF_API int nf_plot_check_writable(const char * path, const char * flag, nf_err * err);

/* The backend's op records (a timed trace: nf_trace_reset NF_TRACE_TIMED)
 * as Chrome trace-event JSON (Perfetto, chrome://tracing): one complete
 * event per op, laid end to end in execution order (the ops are
 * synchronised one by one, so each starts when the previous ends), the
 * op's label, shapes and FLOPs as its args; the totals as metadata. */
NF_API char * nf_trace_chrome_json(const nf_backend * be, nf_err * err);

/* libnofall-genomics: the variant "CHR:POS:REF:ALT" (an SNV, POS 1-based)
 * scored as annotate scores it (the window of o->fasta around it, the model
 * o->model on o->device; the strand of the gene o->genes gives, '+' when
 * none or no genes file) and drawn with nf_plot_variant_svg to path. */
struct nf_annotate_opts;
NF_API int nf_annotate_plot_variant(const struct nf_annotate_opts * o, const char * variant, const char * path,
                                    nf_err * err);

#ifdef __cplusplus
}
#endif
#endif /* NOFALL_PLOT_H */
