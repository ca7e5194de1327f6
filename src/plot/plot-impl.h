/* plot-impl.h -- the SVG text buffer shared by svg.c (the writer, axes,
 * panels) and plots.c (the pictures). */
#ifndef NF_PLOT_IMPL_H
#define NF_PLOT_IMPL_H

#include "nofall-plot.h"

#include <stddef.h>

struct nf_svg {
    char * buf;
    size_t n, cap;
    int oom; /* an append failed: the text is incomplete */
};

/* printf-append (coordinates: use nf__svg_num for fixed, deterministic text) */
void nf__svg_printf(struct nf_svg * s, const char * fmt, ...) __attribute__((format(printf, 2, 3)));
/* text with & < > " ' escaped */
void nf__svg_escaped(struct nf_svg * s, const char * text);
/* the buffer handed out (NULL, err set, when an append failed); s is emptied */
char * nf__svg_take(struct nf_svg * s, nf_err * err);

#endif
