/* nf-io.h -- readers/writers: safetensors, .npy, JSON files, paths. */
#ifndef NF_IO_H
#define NF_IO_H

#include "nf-impl.h"

#include <stdio.h>

struct cJSON;

/* ---- untrusted names in messages ------------------------------------------------ */
/* s with control characters (C0, DEL, C1) and invalid UTF-8 bytes written as
 * \xNN, truncated to n; returns buf. For names that come from files or the
 * command line, so a message cannot drive the terminal. */
const char * nf__esc(char * buf, size_t n, const char * s);

/* ---- files ---------------------------------------------------------------- */
/* Open path read-only if it is a regular file: never blocks (O_NONBLOCK for
 * the open, cleared after), refuses directories, FIFOs, devices and sockets
 * with a message naming the path. *size from fstat. */
int  nf__open_regular(const char * path, int * fd, uint64_t * size, nf_err * err);
/* The whole regular file (nf__open_regular), NUL-terminated, at most max_len bytes. */
int  nf__file_read_all(const char * path, char ** data, size_t * len, size_t max_len, nf_err * err);
void nf__path_join(char * out, size_t n, const char * dir, const char * file);
/* mkdir -p */
int  nf__mkdir_p(const char * dir, nf_err * err);
/* Strict JSON: the whole of txt[0, len) is one RFC 8259 value (only
 * whitespace after it), valid UTF-8, no raw control characters, no \u0000,
 * no key twice in one object. `what` names the source in messages. *out must
 * be freed with cJSON_Delete. */
int  nf__json_parse(const char * txt, size_t len, const char * what, struct cJSON ** out, nf_err * err);
/* Parse a JSON file (size-capped, nf__json_parse); *out must be freed with cJSON_Delete. */
int  nf__json_read_file(const char * path, struct cJSON ** out, nf_err * err);
/* Create a fresh temporary file next to path (".<base>.<pid>.<n>.tmp",
 * O_EXCL, so concurrent writers never share one); its name in tmp. */
int  nf__tmp_create(const char * path, char * tmp, size_t n, int * fd, nf_err * err);
/* doc as indented JSON + newline to f; 0 on a write error */
int  nf__json_write_fp(FILE * f, const struct cJSON * doc);
/* Write a cJSON document to path atomically (a fresh temp name, fsync, rename). */
int  nf__json_write_file(const char * path, const struct cJSON * doc, nf_err * err);

/* ---- safetensors ------------------------------------------------------------ */
#define NF_ST_MAX_HEADER (100u * 1024u * 1024u)   /* header size cap: 100 MiB */
#define NF_ST_MAX_DIMS   8

enum nf_st_dtype { NF_ST_F32, NF_ST_F16, NF_ST_BF16, NF_ST_F64, NF_ST_I64, NF_ST_I32,
                   NF_ST_I16, NF_ST_I8, NF_ST_U8, NF_ST_BOOL, NF_ST_OTHER };

struct nf_st_tensor {
    char           * name;
    enum nf_st_dtype dtype;
    char             dtype_str[16];
    int              ndim;
    int64_t          shape[NF_ST_MAX_DIMS];
    uint64_t         begin, end;          /* offsets relative to the data section */
};

struct nf_safetensors {
    char                * path;
    const unsigned char * map;            /* whole file (mmap, or the caller's buffer) */
    size_t                map_size;
    int                   mapped;         /* map is ours to munmap */
    const unsigned char * data;           /* first byte after the header */
    uint64_t              data_size;
    struct nf_st_tensor * tensors;
    int                   n_tensors;
};

int  nf__st_open(const char * path, struct nf_safetensors * st, nf_err * err);
/* The same checks on a file image in memory (buf stays the caller's and must
 * outlive st); `path` names it in messages. */
int  nf__st_parse(const void * buf, size_t size, const char * path, struct nf_safetensors * st, nf_err * err);
void nf__st_close(struct nf_safetensors * st);
const struct nf_st_tensor * nf__st_find(const struct nf_safetensors * st, const char * name);
const void * nf__st_data(const struct nf_safetensors * st, const struct nf_st_tensor * t);

/* Writer: all tensors F32. Header keys sorted by name, data in the same order. */
struct nf_st_entry {
    const char  * name;
    int           ndim;
    int64_t       shape[NF_ST_MAX_DIMS];
    const float * data;
};
int nf__st_write(const char * path, const struct nf_st_entry * entries, int n, nf_err * err);

/* ---- .npy ------------------------------------------------------------------- */
enum nf_npy_dtype { NF_NPY_F4, NF_NPY_F8, NF_NPY_I4, NF_NPY_I8 };
#define NF_NPY_MAX_DIMS 8

struct nf_npy {
    enum nf_npy_dtype dtype;
    int               ndim;
    int64_t           shape[NF_NPY_MAX_DIMS];
    void            * data;      /* malloc'd, little-endian C order */
    size_t            nbytes;
};
const char * nf__npy_dtype_name(enum nf_npy_dtype t);   /* "float32", ... */
size_t       nf__npy_dtype_size(enum nf_npy_dtype t);
int  nf__npy_read(const char * path, struct nf_npy * out, nf_err * err);
/* The same on a file image in memory; `path` names it in messages. */
int  nf__npy_parse(const void * buf, size_t len, const char * path, struct nf_npy * out, nf_err * err);
void nf__npy_free(struct nf_npy * a);
int  nf__npy_write(const char * path, enum nf_npy_dtype dtype, int ndim, const int64_t * shape,
                   const void * data, nf_err * err);

#endif /* NF_IO_H */
