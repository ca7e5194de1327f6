/* _nofall_genomics.c -- the extension's part over include/nofall-genomics.h:
 * SpTransformer's sequence inputs (nf_seq_string / nf_seq_fasta: the token
 * ids `nofall run --sequence / --fasta` reads), the post-processing of its
 * logits as `nofall run` writes it (probabilities.npy, class_ids.npy), and
 * annotate (nf_annotate_file: one call, the GIL released). The forward
 * itself is Model.forward (_nofall.c). Python's side: nofall/_sptransformer.py. */
#include "_nofall.h"
#include "nofall-genomics.h"

#include <math.h>
#include <string.h>

/* seq_tokens(kind, text, region, pad, context): kind "sequence" (text: the
 * letters) or "fasta" (text: the path; region or None); pad: 0 given, 1 pad,
 * 2 genome (NF_SEQ_*) -> (ids: bytes of B x L int8, B, L, pad, flank, source) */
static PyObject * nf_py_seq_tokens(PyObject * mod, PyObject * args) {
    const char *kind, *text, *region = NULL;
    int pad;
    long long context;
    if (!PyArg_ParseTuple(args, "ssziL", &kind, &text, &region, &pad, &context)) return NULL;
    nf_seq s = {0};
    nf_err err = {0};
    int rc;
    if (strcmp(kind, "sequence") == 0) {
        Py_BEGIN_ALLOW_THREADS rc = nf_seq_string(&s, text, pad, (int64_t) context, &err);
        Py_END_ALLOW_THREADS
    } else if (strcmp(kind, "fasta") == 0) {
        Py_BEGIN_ALLOW_THREADS rc = nf_seq_fasta(&s, text, region, pad, (int64_t) context, &err);
        Py_END_ALLOW_THREADS
    } else
        return PyErr_Format(PyExc_ValueError, "seq_tokens: kind 'sequence' or 'fasta', not '%s'", kind);
    if (rc != NF_OK) {
        nf_seq_free(&s);
        return nf_py_raise(&err);
    }
    PyObject * r = Py_BuildValue("(y#LLiLs)", (const char *) s.ids, (Py_ssize_t) (s.B * s.L), (long long) s.B,
                                 (long long) s.L, s.pad, (long long) s.flank, s.source);
    nf_seq_free(&s);
    return r;
}

/* spt_post(logits (B, n, C) float32, probabilities out float32 like it,
 * class_ids out int64 (B, n), C): as `nofall run` writes them -- softmax
 * over channels 0..2 and the sigmoid on the others (upstream's driver), in
 * double; the class the first of the largest of channels 0..2 */
static PyObject * nf_py_spt_post(PyObject * mod, PyObject * args) {
    PyObject *lo, *po, *co;
    int C;
    if (!PyArg_ParseTuple(args, "OOOi", &lo, &po, &co, &C)) return NULL;
    if (C < 3) return PyErr_Format(PyExc_ValueError, "spt_post: %d channels, 3 or more are needed", C);
    Py_buffer l, p, c;
    if (nf_py_buffer(lo, &l, "f", 0, "logits") != 0) return NULL;
    if (nf_py_buffer(po, &p, "f", 1, "probabilities") != 0) {
        PyBuffer_Release(&l);
        return NULL;
    }
    if (nf_py_buffer(co, &c, "q", 1, "class_ids") != 0) {
        PyBuffer_Release(&l);
        PyBuffer_Release(&p);
        return NULL;
    }
    const int64_t rows = (int64_t) (l.len / 4) / C;
    PyObject * ret = NULL;
    if ((int64_t) l.len != rows * C * 4 || p.len != l.len || (int64_t) c.len != rows * 8) {
        PyErr_SetString(PyExc_ValueError, "spt_post: logits, probabilities and class_ids disagree in size");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS for (int64_t r = 0; r < rows; r++) {
        const float * x = (const float *) l.buf + r * C;
        float * pr = (float *) p.buf + r * C;
        const double mx = fmax(fmax(x[0], x[1]), x[2]);
        double e[3], sum = 0.0;
        for (int k = 0; k < 3; k++) sum += (e[k] = exp((double) x[k] - mx));
        for (int k = 0; k < 3; k++) pr[k] = (float) (e[k] / sum);
        for (int k = 3; k < C; k++) pr[k] = (float) (1.0 / (1.0 + exp(-(double) x[k])));
        int64_t best = 0;
        for (int k = 1; k < 3; k++)
            if (x[k] > x[best]) best = k;
        ((int64_t *) c.buf)[r] = best;
    }
    Py_END_ALLOW_THREADS ret = Py_None;
    Py_INCREF(ret);
done:
    PyBuffer_Release(&l);
    PyBuffer_Release(&p);
    PyBuffer_Release(&c);
    return ret;
}

static int nf_py_set_i64(PyObject * d, const char * key, int64_t v) {
    PyObject * o = PyLong_FromLongLong((long long) v);
    const int rc = o ? PyDict_SetItemString(d, key, o) : -1;
    Py_XDECREF(o);
    return rc;
}

/* the counts as a dict (the report's names) */
static PyObject * nf_py_stats(const nf_annotate_stats * s) {
    PyObject * d = PyDict_New();
    PyObject * sk = PyDict_New();
    int bad = !d || !sk;
    bad = bad || nf_py_set_i64(d, "records", s->records) || nf_py_set_i64(d, "alts", s->alts) ||
          nf_py_set_i64(d, "scored", s->scored) || nf_py_set_i64(d, "scored_no_gene", s->scored_no_gene) ||
          nf_py_set_i64(d, "scored_ref_mismatch", s->scored_ref_mismatch) ||
          nf_py_set_i64(d, "window_cut", s->window_cut) || nf_py_set_i64(d, "rows_written", s->rows_written) ||
          nf_py_set_i64(d, "forwards", s->forwards) || nf_py_set_i64(d, "windows", s->windows) ||
          nf_py_set_i64(d, "windows_computed", s->windows_computed) ||
          nf_py_set_i64(d, "windows_reused", s->windows_reused) || nf_py_set_i64(d, "ranks", s->ranks);
    for (int i = 0; !bad && i < NF_ANNOTATE_SKIP_N; i++)
        bad = nf_py_set_i64(sk, nf_annotate_skip_name(i), s->skipped[i]);
    if (!bad) {
        PyObject * ms = PyFloat_FromDouble(s->forward_ms);
        bad = !ms || PyDict_SetItemString(d, "forward_ms", ms) || PyDict_SetItemString(d, "skipped", sk);
        Py_XDECREF(ms);
    }
    Py_XDECREF(sk);
    if (bad) {
        Py_XDECREF(d);
        return NULL;
    }
    return d;
}

/* annotate_file(model, device, vcf, fasta, genes, out, report, raw_score,
 * protein_coding, no_reuse, batch, format, write_index) -> the counts (dict);
 * report: a path or None; format: "spliceai" or "sptransformer";
 * write_index: None, "csi" or "tbi" (out + ".csi" / ".tbi") */
static PyObject * nf_py_annotate_file(PyObject * mod, PyObject * args, PyObject * kw) {
    static char * kwl[] = {"model",     "device",         "vcf",      "fasta", "genes",  "out",         "report",
                           "raw_score", "protein_coding", "no_reuse", "batch", "format", "write_index", NULL};
    nf_annotate_opts o;
    nf_annotate_opts_init(&o);
    const char * report = NULL;
    long long batch = o.batch;
    const char * format = "spliceai";
    const char * index = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ssssssz|pppLsz", kwl, &o.model, &o.device, &o.vcf, &o.fasta, &o.genes,
                                     &o.out, &report, &o.raw_score, &o.protein_coding, &o.no_reuse, &batch, &format,
                                     &index))
        return NULL;
    if (index && strcmp(index, "csi") == 0)
        o.write_index = NF_ANNOTATE_INDEX_CSI;
    else if (index && strcmp(index, "tbi") == 0)
        o.write_index = NF_ANNOTATE_INDEX_TBI;
    else if (index)
        return PyErr_Format(PyExc_ValueError, "write_index: None, 'csi' or 'tbi', not '%s'", index);
    if (strcmp(format, "spliceai") == 0)
        o.format = NF_ANNOTATE_FORMAT_SPLICEAI;
    else if (strcmp(format, "sptransformer") == 0)
        o.format = NF_ANNOTATE_FORMAT_SPTRANSFORMER;
    else
        return PyErr_Format(PyExc_ValueError, "format: 'spliceai' or 'sptransformer', not '%s'", format);
    o.batch = (int64_t) batch;
    nf_annotate_stats st;
    memset(&st, 0, sizeof(st));
    nf_err err = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = nf_annotate_file(&o, report, &st, &err);
    Py_END_ALLOW_THREADS if (rc != NF_OK) return nf_py_raise(&err);
    return nf_py_stats(&st);
}

/* seq_track(model, kind, text, region, pad, strand): (pad as seq_tokens') the per-position tracks
 * of every record as `nofall run --fasta/--sequence ... --strand S` writes
 * tracks.tsv (nf_seq_track_record, tiled when longer than the window) ->
 * [(contig, start, strand, channels, probs: bytes of n x channels float32,
 * the channels' names as tracks.tsv's header)] */
static PyObject * nf_py_seq_track(PyObject * mod, PyObject * args) {
    NfModel * mo;
    const char *kind, *text, *region = NULL, *strand;
    int pad;
    if (!PyArg_ParseTuple(args, "O!sszis", &NfModelType, &mo, &kind, &text, &region, &pad, &strand)) return NULL;
    if (!nf_py_ready(mo)) return NULL;
    if (strcmp(strand, "+") != 0 && strcmp(strand, "-") != 0)
        return PyErr_Format(PyExc_ValueError, "strand: '+' or '-', not '%s'", strand);
    int64_t ctx = -1;
    struct nf_config_item ci;
    for (int i = 0; nf_model_config_item(mo->m, i, &ci); i++)
        if (strcmp(ci.key, "context_len") == 0) ctx = ci.num;
    if (ctx < 0) return PyErr_Format(PyExc_ValueError, "tracks: not a SpTransformer model");
    nf_seq s = {0};
    nf_err err = {0};
    int rc;
    mo->busy = 1;
    Py_BEGIN_ALLOW_THREADS if (strcmp(kind, "fasta") == 0) rc = nf_seq_fasta(&s, text, region, pad, ctx, &err);
    else rc = nf_seq_string(&s, text, pad, ctx, &err);
    Py_END_ALLOW_THREADS mo->busy = 0;
    if (rc != NF_OK) {
        nf_seq_free(&s);
        return nf_py_raise(&err);
    }
    PyObject * out = PyList_New(0);
    for (int64_t b = 0; out && b < s.B; b++) {
        nf_seq_track t;
        mo->busy = 1;
        Py_BEGIN_ALLOW_THREADS rc = nf_seq_track_record(mo->m, &s, b, NULL, strand[0], &t, &err);
        Py_END_ALLOW_THREADS mo->busy = 0;
        if (rc != NF_OK) {
            Py_CLEAR(out);
            nf_seq_free(&s);
            return nf_py_raise(&err);
        }
        /* the channels' names as tracks.tsv's header has them */
        PyObject * names = PyList_New(0);
        for (int64_t c = 0; names && c < t.channels; c++) {
            const char * nm = nf_seq_track_channel(&t, c);
            PyObject * o = strcmp(nm, "tissue") == 0 ? PyUnicode_FromFormat("tissue_%lld", (long long) (c - 3))
                                                     : PyUnicode_FromString(nm);
            if (!o || PyList_Append(names, o) != 0) Py_CLEAR(names);
            Py_XDECREF(o);
        }
        PyObject * item = names ? Py_BuildValue("(sLCLy#N)", t.contig, (long long) t.start, (int) t.strand,
                                                (long long) t.channels, (const char *) t.probs,
                                                (Py_ssize_t) (t.n * t.channels * (int64_t) sizeof(float)), names)
                                : NULL;
        nf_seq_track_free(&t);
        if (!item || PyList_Append(out, item) != 0) Py_CLEAR(out);
        Py_XDECREF(item);
    }
    nf_seq_free(&s);
    return out;
}

static PyObject * nf_py_has_htslib(PyObject * mod, PyObject * unused) {
    return PyBool_FromLong(nf_genomics_has_htslib());
}

static PyObject * nf_py_tissues(PyObject * mod, PyObject * unused) {
    PyObject * l = PyList_New(NF_ANNOTATE_TISSUES);
    for (int t = 0; l && t < NF_ANNOTATE_TISSUES; t++)
        PyList_SET_ITEM(l, t, PyUnicode_FromString(nf_annotate_tissue(t)));
    return l;
}

PyMethodDef nf_py_genomics_methods[] = {
    {"seq_tokens", nf_py_seq_tokens, METH_VARARGS,
     "seq_tokens(kind, text, region, pad, context): SpTransformer's token ids (bytes), B, L, pad, flank, source"},
    {"spt_post", nf_py_spt_post, METH_VARARGS,
     "spt_post(logits, probabilities_out, class_ids_out, channels): as `nofall run` writes them"},
    {"annotate_file", (PyCFunction) (void (*)(void)) nf_py_annotate_file, METH_VARARGS | METH_KEYWORDS,
     "annotate_file(model, device, vcf, fasta, genes, out, report, raw_score=0, protein_coding=0, no_reuse=0, "
     "batch=16): nf_annotate_file; the counts"},
    {"seq_track", nf_py_seq_track, METH_VARARGS,
     "seq_track(model, kind, text, region, pad, strand): run's tracks.tsv rows per record: "
     "[(contig, start, strand, channels, float32 bytes, channel names)]"},
    {"genomics_has_htslib", nf_py_has_htslib, METH_NOARGS, "built with htslib (FASTA, GTF, VCF/BCF)"},
    {"annotate_tissues", nf_py_tissues, METH_NOARGS, "the 15 tissue names, in the output's order"},
    {NULL, NULL, 0, NULL}};
