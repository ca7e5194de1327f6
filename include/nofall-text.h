/*
 * nofall-text.h -- TabSTAR's text path in libnofall: its WordPiece tokenizer
 * (BertTokenizerFast with e5-small-v2's settings, truncation at
 * NF_TABSTAR_MAX_TOKENS; src/text/README.md), for `nofall tokenize` and any
 * other caller. Errors as in nofall.h: result codes, messages naming the
 * file and the item.
 */
#ifndef NOFALL_TEXT_H
#define NOFALL_TEXT_H

#include "nofall.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A JSON list of strings (strings_json) to out_dir/token_ids.json (out_dir
 * created if missing): a list of id lists ([CLS] ... [SEP], truncated at
 * NF_TABSTAR_MAX_TOKENS), as BertTokenizerFast gives them; the vocabulary is
 * model_dir/vocab.txt. *n_strings (may be NULL): the strings tokenized.
 * Every string is tokenized before anything is written; token_ids.json is
 * written atomically (a temporary name, fsync, rename), so nothing is left
 * of a failed call. */
NF_API int nf_tokenize_json(const char * model_dir, const char * strings_json, const char * out_dir, int * n_strings,
                            nf_err * err);

#ifdef __cplusplus
}
#endif

#endif
