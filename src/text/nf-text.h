/* nf-text.h -- text handling: TabSTAR's BERT WordPiece tokenizer (wordpiece.c).
 *
 * Token ids identical to Hugging Face's BertTokenizerFast (tokenizers 0.21,
 * transformers 4.49) with e5-small-v2's settings: do_lower_case=True,
 * strip_accents unset (so on), tokenize_chinese_chars=True, truncation at
 * max_len (512). Per text, as the Rust tokenizer does it:
 *   1. the literal special tokens [PAD] [UNK] [CLS] [SEP] [MASK] are matched
 *      in the raw text (case-sensitive) and map to their ids; the text
 *      between them is tokenized on its own (so "a[SEP]b" is a, [SEP], b);
 *   2. clean: drop U+0000, U+FFFD and categories Cc, Cf, Co except \t \n \r;
 *      every White_Space character becomes ' ';
 *   3. spaces around CJK ideographs (BERT's block list);
 *   4. NFD, drop category Mn; then lower-case;
 *   5. split on White_Space, then isolate every punctuation character
 *      (ASCII !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~ and categories P*);
 *   6. WordPiece per word: [UNK] if the word has more than 100 code points,
 *      else greedy longest-match-first with "##" continuations, [UNK] for
 *      the whole word when some position matches nothing;
 *   7. [CLS] + the first max_len - 2 pieces + [SEP].
 * Unassigned code points (U+0378) are not dropped: they stay in their word,
 * which then becomes [UNK] (unless the vocabulary has them). Unicode data
 * (categories, NFD, case) come from utf8proc; where Hugging Face's older
 * Unicode tables differ, see src/text/README.md. */
#ifndef NF_TEXT_H
#define NF_TEXT_H

#include "nf-impl.h"

#include <stddef.h>
#include <stdint.h>

#define NF_WP_MAX_WORD_CHARS  100 /* longer words are [UNK] (max_input_chars_per_word) */
#define NF_WP_MAX_VOCAB_BYTES (64u << 20)

struct nf__wordpiece; /* a vocabulary: immutable after loading, so one object may serve many threads */

/* Load vocab.txt: one token per line, id = line number from 0, lines ended
 * by '\n' (the last may lack it). Strict: an empty file, an empty line, a
 * '\r', a NUL, invalid UTF-8, a token twice, more than INT32_MAX lines, or a
 * missing [PAD] [UNK] [CLS] [SEP] [MASK] is NF_ERR_FORMAT with a message
 * naming the file and the line. */
int nf__wp_load(const char * path, struct nf__wordpiece ** out, nf_err * err);
/* The same on a file image in memory (copied); name is for messages. */
int nf__wp_load_mem(const char * buf, size_t len, const char * name, struct nf__wordpiece ** out, nf_err * err);
void nf__wp_free(struct nf__wordpiece * wp);

int nf__wp_vocab_size(const struct nf__wordpiece * wp);
/* id of token s (exact bytes), or -1 */
int nf__wp_token_id(const struct nf__wordpiece * wp, const char * s);
/* the token of id, or NULL when out of range (NUL-terminated, owned by wp) */
const char * nf__wp_token(const struct nf__wordpiece * wp, int id);

enum nf_wp_special { NF_WP_PAD, NF_WP_UNK, NF_WP_CLS, NF_WP_SEP, NF_WP_MASK, NF_WP_N_SPECIAL };
int nf__wp_special_id(const struct nf__wordpiece * wp, enum nf_wp_special s);

/* Encode text[0, len) (UTF-8, NULs allowed) into at most max_len ids
 * (max_len >= 2; ids has room for max_len) as BertTokenizerFast(text,
 * truncation=True, max_length=max_len)["input_ids"]; *n_ids is the count.
 * Invalid UTF-8 (a bad lead or continuation byte, an overlong form, a
 * surrogate, past U+10FFFF, a truncated sequence) is NF_ERR_INPUT with
 * "<ctx>: invalid UTF-8 at byte B" (ctx NULL: "text"), and *bad_offset
 * (when not NULL) = B, the offset of the first byte of the bad sequence;
 * nothing is written to ids then. max_len < 2 is NF_ERR_ARG. */
int nf__wp_encode(const struct nf__wordpiece * wp, const char * text, size_t len, int max_len, int32_t * ids,
                  int * n_ids, const char * ctx, size_t * bad_offset, nf_err * err);

/* BERT's normalizer + pre-tokenizer alone (steps 2-5, no special-token
 * matching) on valid UTF-8 text[0, len): the words, each followed by one
 * ' ', NUL-terminated, malloc'ed into *out (*out_len bytes without the NUL).
 * For tests that compare the word split with Hugging Face's. Invalid UTF-8
 * as in nf__wp_encode. */
int nf__wp_basic_tokenize(const char * text, size_t len, char ** out, size_t * out_len, const char * ctx,
                          size_t * bad_offset, nf_err * err);

/* Strict UTF-8 decoding of s[0, n) at *i: the code point, *i advanced; -1 on
 * an invalid sequence (*i unchanged). */
int32_t nf__utf8_next(const unsigned char * s, size_t n, size_t * i);

#endif /* NF_TEXT_H */
