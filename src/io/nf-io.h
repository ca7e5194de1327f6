/* nf-io.h -- readers/writers: safetensors, .npy, JSON files, paths. */
#ifndef NF_IO_H
#define NF_IO_H

#include "nf-impl.h"

struct cJSON;

/* ---- files ---------------------------------------------------------------- */
int  nf__file_read_all(const char * path, char ** data, size_t * len, size_t max_len, nf_err * err);
void nf__path_join(char * out, size_t n, const char * dir, const char * file);
/* mkdir -p */
int  nf__mkdir_p(const char * dir, nf_err * err);
/* Parse a JSON file (size-capped); *out must be freed with cJSON_Delete. */
int  nf__json_read_file(const char * path, struct cJSON ** out, nf_err * err);
/* Write a cJSON document to path atomically (path.tmp then rename). */
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
    const unsigned char * map;            /* whole file (mmap) */
    size_t                map_size;
    const unsigned char * data;           /* first byte after the header */
    uint64_t              data_size;
    struct nf_st_tensor * tensors;
    int                   n_tensors;
};

int  nf__st_open(const char * path, struct nf_safetensors * st, nf_err * err);
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
void nf__npy_free(struct nf_npy * a);
int  nf__npy_write(const char * path, enum nf_npy_dtype dtype, int ndim, const int64_t * shape,
                   const void * data, nf_err * err);

#endif /* NF_IO_H */
