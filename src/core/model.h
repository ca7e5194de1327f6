/* model.h -- the model vtable behind the public nf_model_* API, the model
 * registry (type detection from config.json), and config.json helpers.
 *
 * Adding a model: one `struct nf_model_i` (src/models/<name>.c), one weight
 * table (core/weights.h), and one line in the registry (core/model.c). */
#ifndef NF_MODEL_H
#define NF_MODEL_H

#include "nf-impl.h"
#include "weights.h"

struct cJSON;
struct nf_inputs;
struct nf_run_outputs;
struct nf_verify_i;

/* A gen-weights option of a model type: `--<name> VALUE` on the CLI. */
struct nf_option_desc {
    const char * name;
    const char * help;
};

struct nf_model_i {
    const char * type; /* "mitra": config.json "model_type" */
    const char * description;
    /* build from the parsed config.json (at config_path) and the weights file
     * (DIR/model.safetensors, or a torch.save .ckpt) */
    int (*load)(nf_backend * be, const char * weights, const struct cJSON * config, const char * config_path,
                void ** impl, nf_err * err);
    void (*free)(void * impl);
    const struct nf_weights * (*weights)(const void * impl);
    int (*config_item)(const void * impl, int i, struct nf_config_item * out);
    int (*n_inputs)(const void * impl);
    const struct nf_input_desc * (*input)(const void * impl, int i);
    const char * output_name;
    int (*output_shape)(const void * impl, const struct nf_array * in, int n_in, int * ndim, int64_t * shape,
                        nf_err * err);
    int (*forward)(void * impl, const struct nf_array * in, int n_in, float * out, nf_err * err);
    void (*release_workspace)(void * impl);
    int (*set_option)(void * impl, const char * key, int64_t value, nf_err * err);
    /* an option's value, or a fact about the last forward: 0 if no such key */
    int (*get_option)(const void * impl, const char * key, int64_t * value);
    int (*stage_count)(const void * impl);
    int (*stage_name)(const void * impl, int i, char * out, size_t n);
    void (*set_stage_callback)(void * impl, int stages, nf_stage_fn fn, void * user);
    void (*placement)(const void * impl, struct nf_placement * out);
    /* writes DIR/config.json for the loaded configuration (nf_model_save); NULL: none */
    int (*write_config)(const void * impl, const char * dir, nf_err * err);
    /* gen-weights: options by name (values as text; NULL-terminated list) */
    const struct nf_option_desc * gen_options;
    /* writes DIR/config.json + DIR/model.safetensors, and the same tensors to
     * ckpt_path as a torch.save checkpoint unless it is NULL; summary: the
     * config in words */
    int (*gen_weights)(const char * dir, const char * ckpt_path, uint64_t seed, int n, const char * const * keys,
                       const char * const * values, const char * perturb_key, float perturb_delta, char * summary,
                       size_t summary_n, nf_err * err);
    /* the file name of the model's torch.save checkpoint (gen-weights --format
     * ckpt writes DIR/<ckpt_name>); NULL: the model has no such form */
    const char * ckpt_name;
    /* the configuration of a bare torch.save checkpoint, one with no
     * config.json beside it: the released model's, as config.json would hold
     * it (NULL: out of memory); config_default_what names it in messages ("the
     * released X configuration"). NULL: the model's checkpoints need a
     * config.json (the first model in the registry with one is used). */
    struct cJSON * (*config_default)(void);
    const char * config_default_what;
    /* ---- what run / verify / bench need (nofall.h nf_model_inputs) ---------------------- */
    /* the model's inputs from (key, value) options: "seed" and the type's sizes
     * make a deterministic synthetic input, a file option reads one; an
     * unknown key is NF_ERR_ARG. Adds arrays, facts and markers to out. */
    int (*inputs)(nf_model * m, int n, const char * const * keys, const char * const * values,
                  const struct nf_array * given, int n_given, struct nf_inputs * out, nf_err * err);
    /* merges an adapter (a directory) into the loaded weights; summary: what
     * was merged, in words. NULL: the model takes none */
    int (*apply_adapter)(nf_model * m, const char * dir, char * summary, size_t summary_n, nf_err * err);
    /* run's options of this type (NULL-terminated): the input keys, set_option
     * keys and "adapter" */
    const char * const * run_options;
    /* the input options checked together before any work (NF_ERR_ARG) */
    int (*inputs_check)(int n, const char * const * keys, const char * const * values, nf_err * err);
    /* the files a run writes into its output set (NULL-terminated) */
    const char * const * artifacts;
    /* writes them (but report.json) for one forward into dir; res: the report's model members, markers */
    int (*write_outputs)(nf_model * m, const struct nf_inputs * in, const float * out, const char * adapter,
                         const char * dir, struct nf_run_outputs * res, nf_err * err);
    /* reads them back (dtype, shape, finite, in range; out's bytes where given) */
    int (*check_outputs)(nf_model * m, const struct nf_inputs * in, const float * out, const char * dir, nf_err * err);
    /* ---- what verify needs (nofall.h nf_verify_*; core/verify.h) ---------------------------- */
    /* its fixtures, thresholds, seeds and comparison; NULL: the default type's */
    const struct nf_verify_i * verify;
};

/* the files a model was read from (nofall.h nf_model_file_*) */
#define NF_MODEL_MAX_FILES 3
struct nf_model {
    const struct nf_model_i * iface;
    void * impl;
    int n_files;
    char files[NF_MODEL_MAX_FILES][4096];
    char sha256[NF_MODEL_MAX_FILES][65]; /* "" until nf_model_file_sha256 computes it */
};

/* A model's inputs (nofall.h nf_inputs): arrays the set owns, and facts
 * about them (items: report / JSON members; markers: KEY=value lines). */
#define NF_INPUTS_MAX_ARRAYS 8
#define NF_INPUTS_MAX_ITEMS  16
struct nf_inputs_item {
    char key[48];
    char str[160]; /* used when is_str */
    int64_t num;
    int is_str;
};
struct nf_inputs {
    int n;
    struct nf_array a[NF_INPUTS_MAX_ARRAYS];
    void * owned[NF_INPUTS_MAX_ARRAYS];
    int n_items, n_markers, n_report;
    struct nf_inputs_item items[NF_INPUTS_MAX_ITEMS], markers[NF_INPUTS_MAX_ITEMS];
    struct nf_inputs_item report[NF_INPUTS_MAX_ITEMS]; /* report.json members, in order */
    void * priv; /* a model's own state (e.g. TabSTAR's cells), freed by priv_free */
    void (*priv_free)(void * priv);
};
/* the next array: data (malloc'ed, owned by the set unless own == 0) */
void nf__inputs_array(struct nf_inputs * in, const char * name, int dtype, int ndim, const int64_t * shape, void * data,
                      int own);
/* list: 0 items, 1 markers, 2 report members */
void nf__inputs_item_num(struct nf_inputs * in, int marker, const char * key, int64_t num);
void nf__inputs_item_str(struct nf_inputs * in, int marker, const char * key, const char * str);
/* the value of key among (keys, values), or NULL; *used set when found */
const char * nf__inputs_opt(int n, const char * const * keys, const char * const * values, const char * key);
/* every key one of allowed[] (NULL-terminated), else NF_ERR_ARG naming it */
int nf__inputs_keys_check(const char * type, int n, const char * const * keys, const char * const * allowed,
                          nf_err * err);
/* an integer option value in [min, max], default def when absent */
int nf__inputs_int(int n, const char * const * keys, const char * const * values, const char * key, int64_t min,
                   int64_t max, int64_t def, int64_t * out, nf_err * err);

/* the registry */
const struct nf_model_i * nf__model_find(const char * type);
/* type's, or (NULL, "", unknown) the default type's (Mitra: a config without "model_type") */
const struct nf_model_i * nf__model_type_or_default(const char * type);
/* gen-weights with one tensor shifted by delta (bisect tests); perturb_key may be NULL */
int nf__model_gen_weights_ex(const char * type, const char * dir, uint64_t seed, int n, const char * const * keys,
                             const char * const * values, const char * perturb_key, float perturb_delta, char * summary,
                             size_t summary_n, nf_err * err);
/* the same in a format: "safetensors" (or NULL) or "ckpt" (also DIR/<ckpt_name>, a
 * torch.save checkpoint of the same tensors; NF_ERR_ARG for a model without one) */
int nf__model_gen_weights_fmt(const char * type, const char * dir, const char * format, uint64_t seed, int n,
                              const char * const * keys, const char * const * values, const char * perturb_key,
                              float perturb_delta, char * summary, size_t summary_n, nf_err * err);

/* ---- config.json helpers: messages name the file and the key ------------------- */
int nf__config_int(const struct cJSON * doc, const char * key, const char * path, int * out, nf_err * err);
/* a string member that must be one of names[0..n): *out = its index */
int nf__config_enum(const struct cJSON * doc, const char * key, const char * path, const char * const * names, int n,
                    int * out, nf_err * err);

/* gen-weights option values: an integer / one of names (case-sensitive) */
int nf__option_int(const char * key, const char * value, int * out, nf_err * err);

/* ---- stage dumps (nf_model_set_stage_callback) ----------------------------------- */
/* a host buffer for the dumps, grown on demand */
struct nf_stage_buf {
    float * host;
    size_t n;
};
/* (tensor.c) hand the first numel(shape) elements of device tensor t to fn (as float;
 * an NF_I32 tensor's small integers converted exactly); an error naming the
 * stage when fn returns non-zero */
int nf__stage_emit(nf_stage_fn fn, void * user, struct nf_stage_buf * buf, const char * name, const nf_tensor * t,
                   int ndim, const int64_t * shape, nf_err * err);

/* ---- a model forward's device workspace (workspace.c) ---------------------------- */
/* The tensors a forward allocates (freed together) and the host buffer of its
 * stage dumps; a model keeps one for the next forward of the same shape. */
#define NF_WORKSPACE_MAX_TENSORS 32
struct nf_workspace {
    nf_tensor * tensors[NF_WORKSPACE_MAX_TENSORS];
    int n_tensors;
    struct nf_stage_buf dump;
};
/* allocate *t (nf__tensor_alloc: ndim, ne, name) on be, to be freed with ws */
int nf__workspace_tensor(struct nf_workspace * ws, nf_backend * be, nf_tensor * t, enum nf_dtype type, int ndim,
                         const int64_t * ne, const char * name, nf_err * err);
/* free every tensor of ws and its dump buffer; ws is empty after (reusable) */
void nf__workspace_release(struct nf_workspace * ws);
/* a stage dump of t (nf__stage_emit into ws's buffer) when the stages asked
 * for (enum nf_stages) report it: every stage with NF_STAGES_ALL, the
 * `always` ones (inputs, head) with NF_STAGES_INPUTS too, none with NONE */
int nf__workspace_stage(struct nf_workspace * ws, int stages, nf_stage_fn fn, void * user, const char * name,
                        const nf_tensor * t, int ndim, const int64_t * shape, int always, nf_err * err);

#endif
