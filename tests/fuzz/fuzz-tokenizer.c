/* fuzz-tokenizer.c -- libFuzzer target: TabSTAR's WordPiece tokenizer
 * (src/text/wordpiece.c). The first byte picks the mode:
 *   even: encode the rest with a small built-in vocabulary, max_len from the
 *         byte (2..129) and 512. Checked: invalid UTF-8 is refused exactly
 *         when nf__utf8_valid says so, at an offset before which the text is
 *         valid; otherwise [CLS] ... [SEP], every id in the vocabulary, the
 *         short encoding a prefix of the long one (truncation keeps the
 *         first pieces), and the word split consistent with it.
 *   odd:  the rest is a vocab.txt image for nf__wp_load_mem; an accepted one
 *         has every line's token at its id, and encodes its own lines. */
#include "io/nf-io.h"
#include "text/nf-text.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size);

static const char nf__fuzz_vocab[] = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nb\nc\ne\ni\nn\no\nr\ns\nt\nu\n"
                                     "##a\n##b\n##c\n##e\n##n\n##s\n##t\nthe\nfeature\nvalue\n##ing\n:\n.\n(\n)\n%\n-\n"
                                     "0\n1\n2\n5\n##0\n##5\n中\n文\nß\nø\nα\n##α\nᄀ\n##ᅡ\n😀\n";

static struct nf__wordpiece * nf__fuzz_wp;

static void check_encoding(const struct nf__wordpiece * wp, const char * s, size_t n) {
    const int max_small = 2 + (int) (n % 128);
    int32_t * big = malloc(512 * sizeof(*big));
    int32_t * small = malloc((size_t) max_small * sizeof(*small));
    if (!big || !small) __builtin_trap();
    int nb = -1, ns = -1;
    size_t off = (size_t) -1;
    nf_err err;
    const int rc = nf__wp_encode(wp, s, n, 512, big, &nb, "fuzz", &off, &err);
    const int valid = nf__utf8_valid(s, n);
    if (!valid) {
        if (rc != NF_ERR_INPUT || off >= n || !nf__utf8_valid(s, off) || nb != 0) __builtin_trap();
    } else {
        if (rc != NF_OK || nb < 2 || nb > 512) __builtin_trap();
        if (big[0] != nf__wp_special_id(wp, NF_WP_CLS) || big[nb - 1] != nf__wp_special_id(wp, NF_WP_SEP))
            __builtin_trap();
        for (int i = 0; i < nb; i++)
            if (big[i] < 0 || big[i] >= nf__wp_vocab_size(wp)) __builtin_trap();
        if (nf__wp_encode(wp, s, n, max_small, small, &ns, "fuzz", NULL, &err) != NF_OK) __builtin_trap();
        const int want = nb < max_small ? nb : max_small;
        if (ns != want || small[ns - 1] != big[nb - 1]) __builtin_trap();
        for (int i = 0; i < ns - 1; i++)
            if (small[i] != big[i]) __builtin_trap();
        char * words = NULL;
        size_t wl = 0;
        if (nf__wp_basic_tokenize(s, n, &words, &wl, NULL, NULL, &err) != NF_OK) __builtin_trap();
        /* words: valid UTF-8, each followed by one space, none empty */
        if (!nf__utf8_valid(words, wl) || (wl && words[wl - 1] != ' ') || strstr(words, "  ") || words[0] == ' ')
            __builtin_trap();
        free(words);
    }
    free(big);
    free(small);
}

int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    nf_err err;
    if (!nf__fuzz_wp &&
        nf__wp_load_mem(nf__fuzz_vocab, sizeof(nf__fuzz_vocab) - 1, "fuzz-vocab", &nf__fuzz_wp, &err) != NF_OK)
        __builtin_trap();
    if (size == 0) return 0;
    const char * s = (const char *) data + 1;
    const size_t n = size - 1;
    if ((data[0] & 1) == 0) {
        check_encoding(nf__fuzz_wp, s, n);
        return 0;
    }
    struct nf__wordpiece * wp = NULL;
    if (nf__wp_load_mem(s, n, "fuzz/vocab.txt", &wp, &err) != NF_OK) {
        if (wp) __builtin_trap();
        return 0;
    }
    for (int i = 0; i < nf__wp_vocab_size(wp); i++)
        if (nf__wp_token_id(wp, nf__wp_token(wp, i)) != i) __builtin_trap();
    check_encoding(wp, s, n);
    nf__wp_free(wp);
    return 0;
}
