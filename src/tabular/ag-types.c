/* ag-types.c -- what AutoGluon's type inference makes of a text (object)
 * column besides a category (autogluon.common.features.infer_types,
 * get_types_special), and the dates nofall reads:
 *
 *   datetime_as_object  pd.to_numeric fails on the column, and pd.to_datetime
 *                       (errors="coerce", format="mixed") parses at least 20 %
 *                       of its values, missing ones counted as failures; on
 *                       Series.sample(n=500, random_state=0) above 500 rows
 *                       (nf__np_choice: numpy's RandomState(0))
 *                       -> DatetimeFeatureGenerator (predictor.c)
 *   text                not a date; unique values / rows > 0.01 (NaN one of
 *                       the values) and the unique values have on average at
 *                       least 3 whitespace-separated words; on
 *                       Series.sample(n=5000, random_state=0) above 5,000 rows
 *                       -> binned text statistics and n-gram counts, which
 *                       nofall does not compute: the predictor refuses it
 *
 * pandas parses dates with dateutil, which reads far more than ISO 8601
 * ("03/04/2021", "1999", "10:30" as today's date). nofall reads only ISO 8601
 * (nf__iso_datetime_ns), and for every other value decides whether pandas
 * might read it as a date (nf__date_maybe: pandas' own pre-check -- a number
 * is a date only from 1000 on or with a leading 0 -- and then digits next to
 * a date separator, or a month name). A column whose reading depends on such
 * a value is refused by the predictor, naming the value, never guessed. */
#include "tabular-impl.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm) */
static int64_t nf_days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const int64_t yoe = y - era * 400;
    const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

void nf__civil_from_ns(int64_t ns, int64_t * year, int * month, int * day, int * dayofweek) {
    int64_t z = ns / 86400000000000LL;
    if (ns % 86400000000000LL < 0) z--;         /* floor */
    *dayofweek = (int) (((z % 7) + 7 + 3) % 7); /* 1970-01-01 was a Thursday; Monday = 0 */
    z += 719468;
    const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const int64_t doe = z - era * 146097;
    const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const int64_t mp = (5 * doy + 2) / 153;
    *day = (int) (doy - (153 * mp + 2) / 5 + 1);
    *month = (int) (mp < 10 ? mp + 3 : mp - 9);
    *year = yoe + era * 400 + (*month <= 2);
}

static int nf_digits(const char ** s, int lo, int hi, int * v) {
    int n = 0, x = 0;
    while (n < hi && isdigit((unsigned char) (*s)[n])) x = x * 10 + ((*s)[n++] - '0');
    if (n < lo) return 0;
    *s += n;
    *v = x;
    return 1;
}

/* YYYY-M[M]-D[D][(T| )HH:MM[:SS[.f{1,9}]][Z|(+|-)HH[[:]MM]]], years 1678..2261
 * (pandas' nanosecond range); as UTC nanoseconds since the epoch */
int nf__iso_datetime_ns(const char * s, int64_t * ns) {
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y, mo, d, h = 0, mi = 0, sec = 0, oh = 0, om = 0, sign = 0;
    int64_t frac = 0;
    if (!nf_digits(&s, 4, 4, &y) || *s++ != '-' || !nf_digits(&s, 1, 2, &mo) || *s++ != '-' || !nf_digits(&s, 1, 2, &d))
        return 0;
    if (y < 1678 || y > 2261 || mo < 1 || mo > 12 || d < 1) return 0;
    const int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (d > mdays[mo - 1] + (mo == 2 && leap)) return 0;
    if (*s == 'T' || *s == ' ') {
        s++;
        if (!nf_digits(&s, 2, 2, &h) || *s++ != ':' || !nf_digits(&s, 2, 2, &mi)) return 0;
        if (*s == ':') {
            s++;
            if (!nf_digits(&s, 2, 2, &sec)) return 0;
            if (*s == '.') {
                s++;
                int n = 0;
                while (n < 9 && isdigit((unsigned char) s[n])) frac = frac * 10 + (s[n++] - '0');
                if (n == 0 || isdigit((unsigned char) s[n])) return 0;
                for (int k = n; k < 9; k++) frac *= 10;
                s += n;
            }
        }
        if (h > 23 || mi > 59 || sec > 59) return 0;
        if (*s == 'Z') {
            s++;
        } else if (*s == '+' || *s == '-') {
            sign = *s++ == '-' ? -1 : 1;
            if (!nf_digits(&s, 2, 2, &oh)) return 0;
            if (*s == ':') s++;
            if (isdigit((unsigned char) *s) && !nf_digits(&s, 2, 2, &om)) return 0;
            if (oh > 23 || om > 59) return 0;
        }
    }
    if (*s) return 0;
    const int64_t secs = nf_days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - sign * (oh * 3600 + om * 60);
    *ns = secs * 1000000000LL + frac;
    return 1;
}

/* a value that is not ISO 8601: might pandas.to_datetime(format="mixed") read it as a date? */
/* numbers that to_datetime reads as no date (checked on pandas 2.3): a
 * decimal literal with an exponent (1e5, -2.5E400, overflowing ones too), and
 * an integer of more than 14 digits (dateutil reads at most YYYYMMDDhhmmss;
 * every integer beyond int64 is one) */
static int nf_never_date(const char * s) {
    while (*s == ' ' || *s == '\t') s++;
    if (*s == '+' || *s == '-') s++;
    int digits = 0, point = 0;
    while (isdigit((unsigned char) *s)) s++, digits++;
    if (*s == '.') s++, point = 1;
    while (isdigit((unsigned char) *s)) s++, digits++;
    if (!digits) return 0;
    int exp = 0;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-') s++;
        if (!isdigit((unsigned char) *s)) return 0;
        while (isdigit((unsigned char) *s)) s++;
        exp = 1;
    }
    while (*s == ' ' || *s == '\t') s++;
    return *s == 0 && (exp || (!point && digits > 14));
}

/* dateutil's parser (pandas.to_datetime's for what is not ISO 8601) reads
 * only words of its parserinfo; any other word makes it raise, and pandas
 * gives NaT (checked on pandas 2.3.3, tests/fixtures/tables/dates.tsv made by
 * reference/date_forms_fixture.py). Its words, lower case: */
static const char * const nf_du_words[] = {
    "at",    "on",        "and",     "ad",      "m",      "t",         "of",      "st",       "nd",     "rd",
    "th", /* jump */
    "mon",   "monday",    "tue",     "tuesday", "wed",    "wednesday", "thu",     "thursday", "fri",    "friday",
    "sat",   "saturday",  "sun",     "sunday",  "jan",    "january",   "feb",     "february", "mar",    "march",
    "apr",   "april",     "may",     "jun",     "june",   "jul",       "july",    "aug",      "august", "sep",
    "sept",  "september", "oct",     "october", "nov",    "november",  "dec",     "december", "h",      "hour",
    "hours", "minute",    "minutes", "s",       "second", "seconds", /* hms ("m": jump) */
    "utc",   "gmt",       "z",       "now",     "today",  "yesterday", "tomorrow"};
/* words valid only after an hour was read (so after a digit): AM / PM, a time
 * zone name (dateutil: up to 5 upper-case ASCII letters), pandas' quarters
 * ("2020q1", "4Q2005") */
static const char * const nf_du_after_digit[] = {"a", "am", "p", "pm", "q"};

static int nf_in(const char * w, size_t n, const char * const * list, size_t k) {
    for (size_t i = 0; i < k; i++)
        if (strlen(list[i]) == n && strncasecmp(w, list[i], n) == 0) return 1;
    return 0;
}

/* 1: some ASCII word of s makes dateutil raise (no date: NaT to pandas);
 * -1: none does and one is an AM/PM, zone or quarter word after a digit
 * (might be a date); 0: neither */
static int nf_unknown_word(const char * s) {
    int digit = 0, after_digit = 0;
    for (size_t i = 0; s[i];) {
        const unsigned char ch = (unsigned char) s[i];
        if (isdigit(ch)) digit = 1;
        if (!(ch < 128 && isalpha(ch))) {
            i++;
            continue;
        }
        size_t j = i, upper = 1;
        while (s[j] && (unsigned char) s[j] < 128 && isalpha((unsigned char) s[j]))
            upper &= isupper((unsigned char) s[j]) != 0, j++;
        const size_t n = j - i;
        if (!nf_in(s + i, n, nf_du_words, sizeof(nf_du_words) / sizeof(nf_du_words[0]))) {
            const int late = nf_in(s + i, n, nf_du_after_digit,
                                   sizeof(nf_du_after_digit) / sizeof(nf_du_after_digit[0])) ||
                             (upper && n <= 5);
            if (!late || !digit) return 1;
            after_digit = 1; /* "5 pm", "12:00 EST", "2020Q1": might be read */
        }
        i = j;
    }
    return after_digit ? -1 : 0;
}

/* 1: a value dateutil can read only without a year: ASCII, one run of digits, of
 * 1-2 digits and at most 31 (never a year to dateutil), not a time first
 * (pandas reads "H:MM..." with today's date). pandas parses the rest with
 * dateutil's default year 1, out of its range: NaT ("sept 5", "T5", "Z 5",
 * "5 pm", "05"; 23,328 such forms of words, numbers and separators checked
 * on pandas 2.3.3, all NaT) */
static int nf_no_year(const char * s) {
    int runs = 0, len = 0, v = 0;
    for (const unsigned char * p = (const unsigned char *) s; *p; p++) {
        if (*p >= 128 || *p == ':') return 0;
        if (!isdigit(*p)) continue;
        if (p == (const unsigned char *) s || !isdigit(p[-1])) runs++, len = 0, v = 0;
        len++;
        v = v * 10 + (*p - '0');
    }
    return runs == 1 && len <= 2 && v <= 31;
}

int nf__date_maybe(const char * s) {
    static const char * const names[] = {"jan", "feb", "mar", "apr", "may",   "jun",       "jul",     "aug",
                                         "sep", "oct", "nov", "dec", "mon",   "tue",       "wed",     "thu",
                                         "fri", "sat", "sun", "now", "today", "yesterday", "tomorrow"};
    size_t n = strlen(s);
    if (n == 0) return 0;
    double v;
    int ii;
    if (nf_never_date(s) || nf_no_year(s)) return 0;
    if (nf__csv_parse_number(s, &v, &ii)) return s[0] == '0' || v >= 1000; /* pandas' pre-check */
    const int w = nf_unknown_word(s);
    if (w) return w < 0;
    int digit = 0, sep = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char) s[i])) continue;
        digit = 1;
        const char a = i > 0 ? s[i - 1] : 0, b = s[i + 1];
        if (strchr("/-:., T", a ? a : '#') || strchr("/-:., T", b ? b : '#')) sep = 1;
    }
    if (sep) return 1;
    /* pandas' own words (the whole value), and a month or day name with a number */
    for (size_t k = 19; k < sizeof(names) / sizeof(names[0]); k++)
        if (strlen(names[k]) == n && strncasecmp(s, names[k], n) == 0) return 1;
    for (size_t k = 0; digit && k < 19; k++)
        for (size_t i = 0; i + 3 <= n; i++)
            if (strncasecmp(s + i, names[k], 3) == 0) return 1;
    return 0;
}

/* Python's str.split(): the code points str.isspace() is true for */
static int nf_py_space(const unsigned char * s, int * len) {
    const unsigned c = s[0];
    *len = 1;
    if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) return 1;
    if (c == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0)) return *len = 2, 1;
    if (c == 0xe1 && s[1] == 0x9a && s[2] == 0x80) return *len = 3, 1; /* U+1680 */
    if (c == 0xe2 && s[1] == 0x80 && ((s[2] >= 0x80 && s[2] <= 0x8a) || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf))
        return *len = 3, 1;                                            /* U+2000-200A, 2028, 2029, 202F */
    if (c == 0xe2 && s[1] == 0x81 && s[2] == 0x9f) return *len = 3, 1; /* U+205F */
    if (c == 0xe3 && s[1] == 0x80 && s[2] == 0x80) return *len = 3, 1; /* U+3000 */
    return 0;
}

static int64_t nf_words(const char * s) {
    int64_t w = 0;
    int in = 0, len;
    for (const unsigned char * p = (const unsigned char *) s; *p; p += len) {
        const int sp = nf_py_space(p, &len);
        if (!sp && !in) w++;
        in = !sp;
    }
    return w;
}

static int nf_cmp_pstr(const void * a, const void * b) {
    return strcmp(*(const char * const *) a, *(const char * const *) b);
}

/* pandas' Series.sample(n=k, random_state=0) above k rows: the rows
 * RandomState(0).choice(n, k, replace=False) picks (*m = k); NULL with *m = n
 * for every row; NULL with *m = -1 when out of memory */
static int64_t * nf_sample(int64_t n, int64_t k, int64_t * m) {
    *m = n;
    if (n <= k) return NULL;
    int64_t * perm = malloc((size_t) n * sizeof(int64_t));
    if (!perm) {
        *m = -1;
        return NULL;
    }
    struct nf_np_rng rng;
    nf__np_rng_seed(&rng, 0);
    nf__np_choice(&rng, n, k, perm, NULL);
    *m = k;
    return perm;
}

int nf__ag_special_type(const struct nf_csv_column * c, int64_t n, int64_t * bad_row, nf_err * err) {
    *bad_row = -1;
    if (c->type != NF_CSV_TEXT || c->bools || c->n_missing == n || n == 0) return NF_AG_PLAIN;
    /* pd.to_numeric succeeds: a column of numbers held as text is no date */
    int64_t r = 0;
    for (double v; r < n; r++) {
        int ii;
        if (!c->missing[r] && !nf__csv_parse_number(c->raw[r], &v, &ii)) break;
    }
    if (r == n) return NF_AG_PLAIN;
    /* datetime: the NaT fraction <= 0.8, on X.sample(n=500, random_state=0) above 500 rows */
    int64_t m;
    int64_t * rows = nf_sample(n, 500, &m);
    if (!rows && m < 0) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    int64_t iso = 0, maybe = 0, first_maybe = -1;
    for (int64_t i = 0; i < m; i++) {
        const int64_t q = rows ? rows[i] : i;
        int64_t ns;
        if (c->missing[q]) continue;
        if (nf__iso_datetime_ns(c->raw[q], &ns))
            iso++;
        else if (nf__date_maybe(c->raw[q])) {
            maybe++;
            if (first_maybe < 0 || q < first_maybe) first_maybe = q;
        }
    }
    free(rows);
    if (iso * 5 >= m) { /* a date column: every value is converted, so any doubtful one counts */
        for (r = 0; r < n; r++) {
            int64_t ns;
            if (!c->missing[r] && !nf__iso_datetime_ns(c->raw[r], &ns) && nf__date_maybe(c->raw[r])) {
                *bad_row = r;
                break;
            }
        }
        return NF_AG_DATETIME;
    }
    if ((iso + maybe) * 5 >= m) {
        *bad_row = first_maybe;
        return NF_AG_DATE_UNSURE;
    }
    /* text: X.unique() (NaN one value, "nan" as a string: 1 word), on
     * X.sample(n=5000, random_state=0) above 5,000 rows */
    rows = nf_sample(n, 5000, &m);
    if (!rows && m < 0) return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    const char ** u = malloc((size_t) m * sizeof(char *));
    if (!u) {
        free(rows);
        return nf__err_set(err, NF_ERR_NOMEM, "out of memory");
    }
    int64_t k = 0, has_nan = 0;
    for (int64_t i = 0; i < m; i++) {
        const int64_t q = rows ? rows[i] : i;
        if (c->missing[q])
            has_nan = 1;
        else
            u[k++] = c->raw[q];
    }
    free(rows);
    qsort(u, (size_t) k, sizeof(char *), nf_cmp_pstr);
    int64_t nu = 0, words = has_nan;
    for (int64_t i = 0; i < k; i++)
        if (i == 0 || strcmp(u[i], u[i - 1]) != 0) nu++, words += nf_words(u[i]);
    free(u);
    nu += has_nan;
    if ((double) nu / (double) m <= 0.01) return NF_AG_PLAIN;
    return (double) words / (double) nu >= 3 ? NF_AG_TEXT : NF_AG_PLAIN;
}
