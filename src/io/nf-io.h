/* nf-io.h -- readers/writers: safetensors, .npy, JSON files, paths.
 * io/ sits on the bottom layer only (base/nf-base.h: errors, the PRNG; the public
 * nofall.h), never on core/ or anything above it. */
#ifndef NF_IO_H
#define NF_IO_H

#include "../base/nf-base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct cJSON;

/* ---- untrusted names in messages ------------------------------------------------ */
/* s with control characters (C0, DEL, C1) and invalid UTF-8 bytes written as
 * \xNN, truncated to n; returns buf. For names that come from files or the
 * command line, so a message cannot drive the terminal. */
const char * nf__esc(char * buf, size_t n, const char * s);
/* 1 if s[0, n) is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF) */
int nf__utf8_valid(const char * s, size_t n);

/* ---- files ---------------------------------------------------------------- */
/* Open path read-only if it is a regular file: never blocks (O_NONBLOCK for
 * the open, cleared after), refuses directories, FIFOs, devices and sockets
 * with a message naming the path. *size from fstat. */
int nf__open_regular(const char * path, int * fd, uint64_t * size, nf_err * err);
/* the same, its message "FLAG PATH: ..." (the option that named the file) */
int nf__open_regular_flag(const char * flag, const char * path, int * fd, uint64_t * size, nf_err * err);
/* FASTA's index FASTA.fai, when there is one, checked as untrusted input before htslib reads it
 * (fai.c: the fields, lines of > 0 bases, the records within a plain FASTA); NF_ERR_FORMAT names the line. */
int nf__fai_check(const char * fasta, nf_err * err);
/* the same on the index's bytes; fasta_size UINT64_MAX: a bgzip-compressed FASTA (no span check) */
int nf__fai_check_text(const char * txt, size_t len, uint64_t fasta_size, const char * fai, const char * fasta,
                       nf_err * err);
/* A plain FASTA's raw bytes for region checks (the .fai read once; a
 * bgzip-compressed FASTA is not checked). check: the lines that hold bases
 * [beg, end) (0-based) of contig hold only printable non-space ASCII where
 * the index puts bases and a line end after them: htslib silently drops a
 * NUL or a control byte and shifts the bases after it. */
struct nf_fasta_raw {
    int fd, gz;
    uint64_t size;
    const char * fasta;
    char * fai;
    size_t fai_len;
    char * last_name; /* the contig looked up last, and its fields */
    int64_t last_v[5];
};
int nf__fasta_raw_open(struct nf_fasta_raw * r, const char * fasta, nf_err * err);
int nf__fasta_raw_check(struct nf_fasta_raw * r, const char * contig, int64_t beg, int64_t end, nf_err * err);
void nf__fasta_raw_close(struct nf_fasta_raw * r);
/* The whole regular file (nf__open_regular), NUL-terminated, at most max_len bytes. */
int nf__file_read_all(const char * path, char ** data, size_t * len, size_t max_len, nf_err * err);
/* The same, undoing the compression the name says as pandas infers it
 * (decompress.c): .gz, .bz2, .xz (any case); other names read as they are.
 * max_len caps the compressed and the decompressed size. A corrupt or
 * truncated stream: NF_ERR_FORMAT naming the file. */
int nf__file_read_decompressed(const char * path, char ** data, size_t * len, size_t max_len, nf_err * err);
/* "gzip" / "bz2" / "xz" for such a name, else NULL; the extension's length (0 if none). */
const char * nf__compression_of(const char * path);
size_t nf__compression_ext_len(const char * path);
void nf__path_join(char * out, size_t n, const char * dir, const char * file);
/* mkdir -p */
int nf__mkdir_p(const char * dir, nf_err * err);
/* Strict JSON: the whole of txt[0, len) is one RFC 8259 value (only
 * whitespace after it), valid UTF-8, no raw control characters, no \u0000,
 * no key twice in one object. `what` names the source in messages. *out must
 * be freed with cJSON_Delete. */
int nf__json_parse(const char * txt, size_t len, const char * what, struct cJSON ** out, nf_err * err);
/* Parse a JSON file (size-capped, nf__json_parse); *out must be freed with cJSON_Delete. */
int nf__json_read_file(const char * path, struct cJSON ** out, nf_err * err);
/* The same for data files (TabSTAR's cells, tokenize's strings): strict but
 * for \u0000 in a string, which is dropped, as BERT's normaliser drops U+0000
 * (upstream tokenises such strings; config files stay strict). */
int nf__json_parse_data(const char * txt, size_t len, const char * what, struct cJSON ** out, nf_err * err);
int nf__json_read_data(const char * path, struct cJSON ** out, nf_err * err);
/* Create a fresh temporary file next to path (".<base>.<pid>.<n>.tmp",
 * O_EXCL, so concurrent writers never share one); its name in tmp. */
int nf__tmp_create(const char * path, char * tmp, size_t n, int * fd, nf_err * err);
/* doc as indented JSON + newline to f; 0 on a write error */
int nf__json_write_fp(FILE * f, const struct cJSON * doc);
/* Write a cJSON document to path atomically (a fresh temp name, fsync, rename). */
int nf__json_write_file(const char * path, const struct cJSON * doc, nf_err * err);

/* ---- safetensors ------------------------------------------------------------ */
#define NF_ST_MAX_HEADER (100u * 1024u * 1024u) /* header size cap: 100 MiB */
#define NF_ST_MAX_DIMS   8

enum nf_st_dtype {
    NF_ST_F32,
    NF_ST_F16,
    NF_ST_BF16,
    NF_ST_F64,
    NF_ST_I64,
    NF_ST_I32,
    NF_ST_I16,
    NF_ST_I8,
    NF_ST_U8,
    NF_ST_BOOL,
    NF_ST_OTHER
};

struct nf_st_tensor {
    char * name;
    enum nf_st_dtype dtype;
    char dtype_str[16];
    int ndim;
    int64_t shape[NF_ST_MAX_DIMS];
    uint64_t begin, end; /* offsets relative to the data section */
};

struct nf_safetensors {
    char * path;
    const unsigned char * map; /* whole file (mmap, or the caller's buffer) */
    size_t map_size;
    int mapped;                 /* map is ours to munmap */
    const unsigned char * data; /* first byte after the header */
    uint64_t data_size;
    struct nf_st_tensor * tensors;
    int n_tensors;
    void * heap; /* when not a mapped file: the owned data (nf__ckpt_load) */
};

int nf__st_open(const char * path, struct nf_safetensors * st, nf_err * err);
/* The same checks on a file image in memory (buf stays the caller's and must
 * outlive st); `path` names it in messages. */
int nf__st_parse(const void * buf, size_t size, const char * path, struct nf_safetensors * st, nf_err * err);
void nf__st_close(struct nf_safetensors * st);
const struct nf_st_tensor * nf__st_find(const struct nf_safetensors * st, const char * name);
const void * nf__st_data(const struct nf_safetensors * st, const struct nf_st_tensor * t);

/* Writer: header keys sorted by name, data in the same order; written to
 * path.tmp, then renamed. dtype defaults to F32 (0); NF_ST_OTHER is refused. */
struct nf_st_entry {
    const char * name;
    int ndim;
    int64_t shape[NF_ST_MAX_DIMS];
    const void * data;
    enum nf_st_dtype dtype;
};
const char * nf__st_dtype_str(enum nf_st_dtype t); /* "F32", ... ("other") */
size_t nf__st_dtype_size(enum nf_st_dtype t);      /* bytes per element; 0 for NF_ST_OTHER */
int nf__st_write(const char * path, const struct nf_st_entry * entries, int n, nf_err * err);
/* Write every tensor of an opened file (names, dtypes, shapes, bytes) the same way. */
int nf__st_write_view(const char * path, const struct nf_safetensors * st, nf_err * err);

/* ---- PyTorch checkpoints (torch.save zip format) ------------------------------
 * torch-ckpt.c: a restricted reader, never executing anything. The zip is read
 * with libzip; <prefix>/data.pkl is parsed by a protocol-2 unpickler that knows
 * only the opcodes torch.save emits and an allow-list of globals
 * (collections.OrderedDict, torch._utils._rebuild_tensor_v2 /
 * _rebuild_parameter, _codecs.encode, the ten torch.<X>Storage classes nofall
 * has dtypes for); any other global is refused by name. Storages are checked
 * against their zip entries <prefix>/data/<key> (size == numel x element size,
 * one class and numel per key, every view inside its storage). The selected
 * dict is root["state_dict"] when the root has that key and it is a dict,
 * else the root itself; each of its values must be a contiguous tensor. */
#define NF_CKPT_MAX_PKL     (16u << 20) /* data.pkl size cap                 */
#define NF_CKPT_MAX_STACK   (1u << 20)  /* unpickler stack slots             */
#define NF_CKPT_MAX_MARKS   64          /* open MARKs                        */
#define NF_CKPT_MAX_DEPTH   100         /* container nesting                 */
#define NF_CKPT_MAX_ENTRIES 1000000     /* zip entries                       */

struct nf_ckpt_storage {
    char * key; /* the record is <prefix>/data/<key> */
    enum nf_st_dtype dtype;
    size_t elsize;
    uint64_t numel; /* elements (bytes = numel * elsize) */
    int64_t entry;  /* zip index, or -1 */
};

struct nf_ckpt_tensor {
    char * name;
    enum nf_st_dtype dtype;
    int ndim;
    int64_t shape[NF_ST_MAX_DIMS];
    int64_t stride[NF_ST_MAX_DIMS]; /* elements; row-major contiguous */
    int storage;                    /* index into nf_ckpt.storages */
    uint64_t offset;                /* first element in the storage */
    uint64_t numel;
};

struct zip;
struct nf_ckpt {
    char * path;                     /* for messages */
    char * prefix;                   /* "archive", "SpTransformer_pytorch", ... */
    char dict[16];                   /* "state_dict", or "" for the root */
    struct nf_ckpt_tensor * tensors; /* the selected dict, in file order */
    int n_tensors;
    struct nf_ckpt_storage * storages; /* every storage the pickle names */
    int n_storages;
    struct zip * za;
    void * src; /* zip_source_t of an in-memory archive */
    uint64_t file_size;
};

/* Open and check a .ckpt (no tensor data is read yet). */
int nf__ckpt_open(const char * path, struct nf_ckpt * ck, nf_err * err);
/* The same for an archive in memory (kept by the caller until close); name is for messages. */
int nf__ckpt_open_mem(const void * buf, size_t len, const char * name, struct nf_ckpt * ck, nf_err * err);
void nf__ckpt_close(struct nf_ckpt * ck);
/* Read storage i (numel * elsize bytes, little-endian) into dst. */
int nf__ckpt_read_storage(const struct nf_ckpt * ck, int i, void * dst, nf_err * err);
/* The selected tensors as a safetensors-like view (st->heap owns the bytes;
 * free with nf__st_close): what the weight loader's strict check consumes. */
int nf__ckpt_to_st(struct nf_ckpt * ck, struct nf_safetensors * st, nf_err * err);
int nf__ckpt_load(const char * path, struct nf_safetensors * st, nf_err * err);
/* Either format, told apart by content ("PK\3\4" = a torch.save zip). */
int nf__tensors_open(const char * path, struct nf_safetensors * st, nf_err * err);
/* ckpt -> safetensors (same names, dtypes, shapes, bytes), atomically. *n_out: tensors written. */
int nf__ckpt_to_safetensors(const char * ckpt_path, const char * out_path, int * n_out, nf_err * err);

/* torch-ckpt-write.c: the torch.save checkpoint of entries (names, dtypes,
 * shapes, contiguous little-endian data), as torch 2.x writes
 * torch.save({wrap: OrderedDict(...)}, path) (wrap NULL: the OrderedDict
 * itself): entries in the given order, each its own storage (keys "0",
 * "1", ...), no _metadata; the zip folder is path's basename without its
 * last extension, every record's data 64-byte aligned. Written to a
 * temporary name, synced, renamed; result codes only (NF_ERR_ARG for a
 * name twice, a dtype without a torch storage class, a non-UTF-8 name). */
int nf__ckpt_write(const char * path, const struct nf_st_entry * entries, int n, const char * wrap, nf_err * err);
/* torch's .data/serialization_id of a zip whose records (names without the
 * folder, in write order, the id's own record excluded) have these CRC-32s
 * and sizes: 40 digits + NUL into out */
int nf__ckpt_serialization_id(const char * const * names, const uint32_t * crcs, const uint64_t * sizes, int n,
                              char out[41], nf_err * err);

/* The unpickler alone (fuzzing, tests): data.pkl bytes; record_size(ctx, key)
 * returns the byte size of <prefix>/data/<key> and its entry index, or -1 when
 * there is no such record. Fills ck->tensors / ck->storages / ck->dict. */
typedef int64_t (*nf_ckpt_record_fn)(void * ctx, const char * key, int64_t * entry);
int nf__ckpt_parse_pickle(const unsigned char * pkl, size_t len, const char * where, nf_ckpt_record_fn record_size,
                          void * ctx, struct nf_ckpt * ck, nf_err * err);

/* ---- .npy ------------------------------------------------------------------- */
enum nf_npy_dtype { NF_NPY_F4, NF_NPY_F8, NF_NPY_I4, NF_NPY_I8, NF_NPY_I1 };
#define NF_NPY_MAX_DIMS 8

struct nf_npy {
    enum nf_npy_dtype dtype;
    int ndim;
    int64_t shape[NF_NPY_MAX_DIMS];
    void * data; /* malloc'd, little-endian C order */
    size_t nbytes;
};
const char * nf__npy_dtype_name(enum nf_npy_dtype t); /* "float32", ... */
size_t nf__npy_dtype_size(enum nf_npy_dtype t);
int nf__npy_read(const char * path, struct nf_npy * out, nf_err * err);
/* The same on a file image in memory; `path` names it in messages. */
int nf__npy_parse(const void * buf, size_t len, const char * path, struct nf_npy * out, nf_err * err);
void nf__npy_free(struct nf_npy * a);
int nf__npy_write(const char * path, enum nf_npy_dtype dtype, int ndim, const int64_t * shape, const void * data,
                  nf_err * err);

/* ---- the string -> index hash (strmap.c; keys borrowed, not copied) ------------ */
struct nf__smap {
    const char ** k;
    size_t * kl;
    int * v;
    size_t cap, n;
};
void nf__smap_free(struct nf__smap * m);
/* room for n more keys without growing: 0, or -1 out of memory */
int nf__smap_reserve(struct nf__smap * m, size_t n);
/* the value of key s[0..n), or -1 when absent */
int nf__smap_get(const struct nf__smap * m, const char * s, size_t n);
/* 0 added, 1 duplicate, -1 out of memory */
int nf__smap_put(struct nf__smap * m, const char * s, size_t n, int v);

/* repr(float) of Python, which pandas and str() print (fileutil.c) */
void nf__py_float_repr(double v, char * buf, size_t n);

/* ---- CSV tables (csv.c) ----------------------------------------------------- */
/* Column types as pandas.read_csv gives them (csv.c, nf_csv_type_column):
 * int64 or uint64 (every value an integer, none missing), float64 (every
 * non-missing value a number), bool (every value True/False, none missing;
 * num 0/1), text. A text column with bools = 1 holds Python bools and missing
 * values (pandas' object column of True / False / NaN). Bool fields read
 * True / False as Python prints them, whatever the case written. */
enum nf_csv_type { NF_CSV_INT, NF_CSV_FLOAT, NF_CSV_TEXT, NF_CSV_BOOL };
struct nf_csv_column {
    char * name;
    enum nf_csv_type type;
    int bools;      /* every non-missing value a bool (NF_CSV_BOOL, or text with missing values) */
    char ** raw;    /* n_rows fields as written (UTF-8, unquoted)            */
    double * num;   /* numeric columns: the values, NaN where missing        */
    char * missing; /* 1 where the field is one of pandas' default NA strings */
    int64_t n_missing;
    int user_type; /* enum nf_user_type (nofall-tabular.h): a type the user gave, or 0 */
};
struct nf_csv_table {
    char path[1024];
    int64_t n_rows; /* data rows (the header not counted) */
    int n_cols;
    struct nf_csv_column * cols;
    /* name -> column (keys borrowed from cols[].name): nf__csv_find in constant
     * time. Built by the parser and the clone, extended by table.c per column;
     * used only while it holds every column (else nf__csv_find scans). */
    struct nf__smap index;
};
/* RFC 4180 via libcsv; a header row; every row as many fields as the header
 * (else an error naming the row); UTF-8 checked per field (an error naming
 * row and column); an empty file is an error; empty and duplicate header names
 * are renamed as pandas renames them (Unnamed: i, a.1, ...). Row numbers in
 * messages count data rows from 1 (the header is row 0). */
int nf__csv_read(const char * path, struct nf_csv_table * t, nf_err * err);
int nf__csv_parse(const char * buf, size_t len, const char * name, struct nf_csv_table * t, nf_err * err);
/* The same with a field separator (sep 0: by the name, nf__csv_sep_of). */
int nf__csv_read_sep(const char * path, int sep, struct nf_csv_table * t, nf_err * err);
int nf__csv_parse_sep(const char * buf, size_t len, const char * name, int sep, struct nf_csv_table * t, nf_err * err);
/* '\t' for a name ending .tsv (before a compression extension: .tsv.gz), else ',' */
int nf__csv_sep_of(const char * path);
void nf__csv_free(struct nf_csv_table * t);
int nf__csv_find(const struct nf_csv_table * t, const char * name); /* column index or -1 */
void nf__csv_index_add(struct nf_csv_table * t, int col);           /* after cols[col] is complete; OOM: scans */
int nf__csv_is_na(const char * s);                                  /* one of pandas' default NA strings */
int nf__csv_is_bool(const char * s, int * v); /* True/TRUE/true (*v 1), False/FALSE/false (*v 0) */
int nf__csv_parse_number(const char * s, double * out, int * is_int);

#endif /* NF_IO_H */
