/* The Chrome/Kineto events array -> Arrow-ready columns, in one pass over the bytes (explorer.ingest.kscan).
 *
 * A strict JSON reader for the one shape the explorer reads: an array of event objects. It fills, per event,
 * the columns the DuckDB path's SELECT gives (explorer.ingest.chrome_fast._SELECT): eleven text columns as
 * Arrow offsets + data, ts and dur as signed ns (µs rounded half away from zero at the third decimal, as the
 * DECIMAL(38,3) cast and explorer.ingest.times do), and the Kineto args the slice table reads. It refuses
 * (KS_BAD, with the place and a reason) anything it does not read exactly as the msgspec path does, and the
 * caller then takes the file to the other readers: invalid JSON, invalid UTF-8, lone surrogates, a field of
 * an unexpected type (a time as text other than a plain number among them), a key spelled with escapes, a
 * repeated field, a time past 9 * 10**15 µs (2**62 ns is the range), nesting past MAX_DEPTH, `id2`.
 * It holds no state between calls: threads read pieces of one file at once (ctypes drops the GIL in a call).
 */
#include <stdint.h>
#include <string.h>

enum { C_PH, C_NAME, C_CAT, C_PID, C_TID, C_ID, C_BP, C_S, C_SCOPE, C_DIMS, C_ARGS, NSTR };
enum { N_TS, N_DUR, N_EXT, N_CORR, NNUM };
enum { F_TS = 1, F_DUR = 2, F_ID = 4 };
enum { KS_DONE = 0, KS_FULL = 1, KS_BAD = -1 };
enum { OK = 0, E_FULL = 1, E_BAD = 2 };
#define KSCAN_ABI 2
#define MAX_DEPTH 64

typedef struct {
    const uint8_t *b;
    int64_t p, end;
    int64_t rows, cap_rows;
    int64_t *num;     /* NNUM x cap_rows */
    uint8_t *flags;   /* cap_rows */
    int32_t *off;     /* NSTR x (cap_rows + 1) */
    uint8_t **data;   /* NSTR */
    const int64_t *cap; /* NSTR */
    int64_t used[NSTR];
    const char *why;
} S;

static int bad(S *s, const char *why) {
    if (!s->why) s->why = why;
    return E_BAD;
}

static inline void ws(S *s) {
    const uint8_t *b = s->b;
    int64_t p = s->p, end = s->end;
    while (p < end && (b[p] == ' ' || b[p] == '\n' || b[p] == '\r' || b[p] == '\t')) p++;
    s->p = p;
}

/* the length of a valid UTF-8 sequence starting at a byte >= 0x80, 0 if invalid */
static inline int utf8_len(const uint8_t *c, int64_t n) {
    uint8_t c0 = c[0];
    if (c0 < 0xC2) return 0;
    if (c0 < 0xE0) return (n >= 2 && (c[1] & 0xC0) == 0x80) ? 2 : 0;
    if (c0 < 0xF0) {
        if (n < 3 || (c[1] & 0xC0) != 0x80 || (c[2] & 0xC0) != 0x80) return 0;
        if (c0 == 0xE0 && c[1] < 0xA0) return 0; /* overlong */
        if (c0 == 0xED && c[1] >= 0xA0) return 0; /* a surrogate */
        return 3;
    }
    if (c0 < 0xF5) {
        if (n < 4 || (c[1] & 0xC0) != 0x80 || (c[2] & 0xC0) != 0x80 || (c[3] & 0xC0) != 0x80) return 0;
        if (c0 == 0xF0 && c[1] < 0x90) return 0;
        if (c0 == 0xF4 && c[1] >= 0x90) return 0;
        return 4;
    }
    return 0;
}

/* bytes that stand for themselves inside a JSON string: not a quote, a backslash, a control or non-ASCII */
static const uint8_t PLAIN[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};

static inline int hex4(const uint8_t *c, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t h = c[i];
        v <<= 4;
        if (h >= '0' && h <= '9') v |= (uint32_t)(h - '0');
        else if (h >= 'a' && h <= 'f') v |= (uint32_t)(h - 'a' + 10);
        else if (h >= 'A' && h <= 'F') v |= (uint32_t)(h - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

/* A string at s->p (on its opening quote). With col >= 0 its decoded text is appended to that column (E_FULL
 * when it does not fit); with col < 0 it is only checked. */
static int string(S *s, int col) {
    const uint8_t *b = s->b;
    int64_t p = s->p + 1, end = s->end;
    uint8_t *out = col >= 0 ? s->data[col] : 0;
    int64_t u = col >= 0 ? s->used[col] : 0, cap = col >= 0 ? s->cap[col] : 0;
    for (;;) {
        /* the plain run up to a quote, a backslash, a control or a non-ASCII byte */
        int64_t q = p;
        while (q + 4 <= end && PLAIN[b[q]] && PLAIN[b[q + 1]] && PLAIN[b[q + 2]] && PLAIN[b[q + 3]]) q += 4;
        while (q < end && PLAIN[b[q]]) q++;
        if (out) {
            if (u + (q - p) > cap) return E_FULL;
            memcpy(out + u, b + p, (size_t)(q - p));
            u += q - p;
        }
        p = q;
        if (p >= end) return bad(s, "a string without its closing quote");
        uint8_t c = b[p];
        if (c == '"') {
            s->p = p + 1;
            if (out) s->used[col] = u;
            return OK;
        }
        if (c < 0x20) return bad(s, "a control character inside a string");
        if (c >= 0x80) {
            int n = utf8_len(b + p, end - p);
            if (!n) return bad(s, "a string that is not valid UTF-8");
            if (out) {
                if (u + n > cap) return E_FULL;
                memcpy(out + u, b + p, (size_t)n);
                u += n;
            }
            p += n;
            continue;
        }
        /* an escape */
        if (p + 1 >= end) return bad(s, "a string without its closing quote");
        uint8_t e = b[p + 1], one;
        switch (e) {
        case '"': one = '"'; break;
        case '\\': one = '\\'; break;
        case '/': one = '/'; break;
        case 'b': one = '\b'; break;
        case 'f': one = '\f'; break;
        case 'n': one = '\n'; break;
        case 'r': one = '\r'; break;
        case 't': one = '\t'; break;
        case 'u': {
            uint32_t cp, lo;
            if (p + 6 > end || !hex4(b + p + 2, &cp)) return bad(s, "a bad \\u escape");
            p += 6;
            if (cp >= 0xDC00 && cp <= 0xDFFF) return bad(s, "a lone surrogate escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (p + 6 > end || b[p] != '\\' || b[p + 1] != 'u' || !hex4(b + p + 2, &lo) || lo < 0xDC00 ||
                    lo > 0xDFFF)
                    return bad(s, "a lone surrogate escape");
                p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            if (out) {
                uint8_t enc[4];
                int n;
                if (cp < 0x80) { enc[0] = (uint8_t)cp; n = 1; }
                else if (cp < 0x800) { enc[0] = (uint8_t)(0xC0 | (cp >> 6)); enc[1] = (uint8_t)(0x80 | (cp & 0x3F)); n = 2; }
                else if (cp < 0x10000) {
                    enc[0] = (uint8_t)(0xE0 | (cp >> 12)); enc[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
                    enc[2] = (uint8_t)(0x80 | (cp & 0x3F)); n = 3;
                } else {
                    enc[0] = (uint8_t)(0xF0 | (cp >> 18)); enc[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
                    enc[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F)); enc[3] = (uint8_t)(0x80 | (cp & 0x3F)); n = 4;
                }
                if (u + n > cap) return E_FULL;
                memcpy(out + u, enc, (size_t)n);
                u += n;
            }
            continue;
        }
        default: return bad(s, "a bad escape in a string");
        }
        if (out) {
            if (u + 1 > cap) return E_FULL;
            out[u++] = one;
        }
        p += 2;
    }
}

static inline int digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* A JSON number's extent from s->p: its parts' positions; 0 if the text is not a JSON number. */
typedef struct { int64_t start, int_lo, int_hi, frac_lo, frac_hi, end; int neg, exp; } Num;

static int number(S *s, Num *n) {
    const uint8_t *b = s->b;
    int64_t p = s->p, end = s->end;
    n->start = p;
    n->neg = 0;
    n->exp = 0;
    if (p < end && b[p] == '-') { n->neg = 1; p++; }
    n->int_lo = p;
    if (p >= end || !digit(b[p])) return bad(s, "not a JSON value");
    if (b[p] == '0') p++;
    else while (p < end && digit(b[p])) p++;
    n->int_hi = p;
    n->frac_lo = n->frac_hi = p;
    if (p < end && b[p] == '.') {
        p++;
        n->frac_lo = p;
        if (p >= end || !digit(b[p])) return bad(s, "a number without digits after its point");
        while (p < end && digit(b[p])) p++;
        n->frac_hi = p;
    }
    if (p < end && (b[p] == 'e' || b[p] == 'E')) {
        n->exp = 1;
        p++;
        if (p < end && (b[p] == '+' || b[p] == '-')) p++;
        if (p >= end || !digit(b[p])) return bad(s, "a number without exponent digits");
        while (p < end && digit(b[p])) p++;
    }
    n->end = p;
    s->p = p;
    return OK;
}

/* digit i of a number's digits (its integer then its fraction digits), 0 past them */
static inline int64_t digit_at(const uint8_t *b, const Num *n, int64_t i) {
    int64_t ni = n->int_hi - n->int_lo, nf = n->frac_hi - n->frac_lo;
    if (i < 0 || i >= ni + nf) return 0;
    return i < ni ? b[n->int_lo + i] - '0' : b[n->frac_lo + i - ni] - '0';
}

/* A µs time -> signed ns, rounded half away from zero at the ns digit (explorer.ingest.times): the digits up
 * to 3 past the (exponent-shifted) point, plus one when the next digit is 5 or more. */
static int time_ns(S *s, int64_t *out) {
    Num n;
    if (s->p < s->end && s->b[s->p] == '"') {
        /* numeric text ("7.5") is the number on the other paths; any other text is left to them */
        const uint8_t *q = memchr(s->b + s->p + 1, '"', (size_t)(s->end - s->p - 1));
        int64_t close = q ? q - s->b : -1, end = s->end;
        if (close < 0 || memchr(s->b + s->p + 1, '\\', (size_t)(close - s->p - 1)))
            return bad(s, "a time as text that is not a plain number");
        s->p++;
        s->end = close;
        int r = time_ns(s, out);
        s->end = end;
        if (r) return r;
        if (s->p != close) return bad(s, "a time as text that is not a plain number");
        s->p = close + 1;
        return OK;
    }
    if (s->p < s->end && s->b[s->p] != '-' && !digit(s->b[s->p])) return bad(s, "a time that is not a number");
    if (number(s, &n)) return E_BAD;
    int64_t e = 0;
    if (n.exp) {
        int64_t at = (n.frac_hi > n.frac_lo ? n.frac_hi : n.int_hi) + 1, sign = 1;
        if (s->b[at] == '+' || s->b[at] == '-') sign = s->b[at++] == '-' ? -1 : 1;
        if (n.end - at > 4) return bad(s, "a time with an exponent past 4 digits");
        for (; at < n.end; at++) e = e * 10 + (s->b[at] - '0');
        e *= sign;
    }
    int64_t stop = (n.int_hi - n.int_lo) + e + 3; /* digits that make the ns count */
    int64_t v = 0;
    for (int64_t i = 0; i < stop; i++) {
        if (v >= 900000000000000000LL) return bad(s, "a time past 9 * 10**15 µs");
        v = v * 10 + digit_at(s->b, &n, i);
    }
    if (digit_at(s->b, &n, stop) >= 5) v += 1;
    *out = n.neg ? -v : v;
    return OK;
}

/* An integer literal (no point, no exponent, not -0, at most 18 digits): its value. */
static int integer(S *s, int64_t *value, Num *n) {
    if (s->p < s->end && s->b[s->p] != '-' && !digit(s->b[s->p])) return bad(s, "an id that is not a number or text");
    if (number(s, n)) return E_BAD;
    if (n->exp || n->frac_hi > n->frac_lo || n->int_hi - n->int_lo > 18) return bad(s, "an id that is not an integer");
    int64_t v = 0;
    for (int64_t i = n->int_lo; i < n->int_hi; i++) v = v * 10 + (s->b[i] - '0');
    if (n->neg && v == 0) return bad(s, "an id of -0");
    *value = n->neg ? -v : v;
    return OK;
}

static int put(S *s, int col, const uint8_t *text, int64_t len) {
    if (s->used[col] + len > s->cap[col]) return E_FULL;
    memcpy(s->data[col] + s->used[col], text, (size_t)len);
    s->used[col] += len;
    return OK;
}

/* pid, tid, id: an integer's text or a string's (json_extract_string) */
static int id_text(S *s, int col) {
    if (s->p < s->end && s->b[s->p] == '"') {
        int64_t from = s->used[col];
        int r = string(s, col);
        /* the columnar feed keys a thread by pid NUL tid (chrome_fast._thread_index) */
        if (!r && memchr(s->data[col] + from, 0, (size_t)(s->used[col] - from))) return bad(s, "an id holding a NUL");
        return r;
    }
    Num n;
    int64_t v;
    int r = integer(s, &v, &n);
    if (r) return r;
    return put(s, col, s->b + n.start, n.end - n.start);
}

static int literal(S *s, const char *word, int len) {
    if (s->end - s->p < len || memcmp(s->b + s->p, word, (size_t)len)) return bad(s, "not a JSON value");
    s->p += len;
    return OK;
}

/* Any JSON value, checked and skipped. */
static int skip(S *s, int depth) {
    if (s->p >= s->end) return bad(s, "a value is missing");
    uint8_t c = s->b[s->p];
    int r;
    if (c == '"') return string(s, -1);
    if (c == '{' || c == '[') {
        if (depth >= MAX_DEPTH) return bad(s, "values nested past 64 levels");
        uint8_t close = c == '{' ? '}' : ']';
        s->p++;
        ws(s);
        if (s->p < s->end && s->b[s->p] == close) { s->p++; return OK; }
        for (;;) {
            if (c == '{') {
                if (s->p >= s->end || s->b[s->p] != '"') return bad(s, "an object key that is not a string");
                if ((r = string(s, -1))) return r;
                ws(s);
                if (s->p >= s->end || s->b[s->p] != ':') return bad(s, "an object key without its colon");
                s->p++;
                ws(s);
            }
            if ((r = skip(s, depth + 1))) return r;
            ws(s);
            if (s->p >= s->end) return bad(s, "an unclosed object or array");
            if (s->b[s->p] == ',') {
                s->p++;
                ws(s);
                continue;
            }
            if (s->b[s->p] == close) { s->p++; return OK; }
            return bad(s, "a missing comma in an object or array");
        }
    }
    if (c == 't') return literal(s, "true", 4);
    if (c == 'f') return literal(s, "false", 5);
    if (c == 'n') return literal(s, "null", 4);
    Num n;
    return number(s, &n);
}

/* "Input Dims": the value's raw text (chrome_feed.shapes_text writes it as every path does) */
static int dims(S *s, int depth) {
    int64_t lo = s->p;
    int r = skip(s, depth);
    if (r) return r;
    return put(s, C_DIMS, s->b + lo, s->p - lo);
}

/* A key at s->p: its raw text (unescaped keys only: a key spelled with escapes is refused). */
static int key(S *s, const uint8_t **k, int64_t *len) {
    const uint8_t *b = s->b;
    int64_t p = s->p, end = s->end;
    if (p >= end || b[p] != '"') return bad(s, "an object key that is not a string");
    int64_t lo = ++p;
    for (;;) {
        while (p < end && PLAIN[b[p]]) p++;
        if (p >= end) return bad(s, "a string without its closing quote");
        if (b[p] == '"') break;
        if (b[p] == '\\') return bad(s, "a key spelled with escapes");
        if (b[p] < 0x20) return bad(s, "a control character inside a string");
        int n = utf8_len(b + p, end - p);
        if (!n) return bad(s, "a string that is not valid UTF-8");
        p += n;
    }
    *k = b + lo;
    *len = p - lo;
    s->p = p + 1;
    ws(s);
    if (s->p >= s->end || s->b[s->p] != ':') return bad(s, "an object key without its colon");
    s->p++;
    ws(s);
    return OK;
}

enum { A_EXT, A_EXT2021, A_CORR, A_DIMS };

/* args: the object's raw text to C_ARGS; External id, correlation and Input Dims read from its top level. */
static int args(S *s, int64_t *ext, int64_t *corr) {
    if (s->p >= s->end || s->b[s->p] != '{') return bad(s, "args that are not an object");
    int64_t lo = s->p;
    int seen = 0, r;
    int64_t ext_a = -1, ext_b = -1;
    s->p++;
    ws(s);
    if (s->p < s->end && s->b[s->p] == '}') s->p++;
    else for (;;) {
        const uint8_t *k;
        int64_t len;
        if ((r = key(s, &k, &len))) return r;
        int which = -1;
        if (len == 11) which = !memcmp(k, "External id", 11) ? A_EXT : !memcmp(k, "external id", 11) ? A_EXT2021 :
                               !memcmp(k, "correlation", 11) ? A_CORR : -1;
        else if (len == 10 && !memcmp(k, "Input Dims", 10)) which = A_DIMS;
        if (which >= 0) {
            if (seen & (1 << which)) return bad(s, "a Kineto arg given twice");
            seen |= 1 << which;
            Num n;
            int64_t v = 0;
            if (which == A_DIMS) r = dims(s, 2);
            else if ((r = integer(s, &v, &n)) == OK) {
                if (which == A_EXT) ext_a = v;
                else if (which == A_EXT2021) ext_b = v;
                else *corr = v;
            }
        } else r = skip(s, 2);
        if (r) return r;
        ws(s);
        if (s->p >= s->end) return bad(s, "an unclosed args object");
        if (s->b[s->p] == ',') { s->p++; ws(s); continue; }
        if (s->b[s->p] == '}') { s->p++; break; }
        return bad(s, "a missing comma in args");
    }
    *ext = (seen & (1 << A_EXT)) ? ext_a : (seen & (1 << A_EXT2021)) ? ext_b : -1;
    return put(s, C_ARGS, s->b + lo, s->p - lo);
}

enum { K_PH, K_NAME, K_CAT, K_TS, K_DUR, K_PID, K_TID, K_ID, K_BP, K_S, K_SCOPE, K_ARGS };

static int which_key(const uint8_t *k, int64_t len) {
    switch (len) {
    case 1: return k[0] == 's' ? K_S : -1;
    case 2:
        if (k[0] == 'p' && k[1] == 'h') return K_PH;
        if (k[0] == 't' && k[1] == 's') return K_TS;
        if (k[0] == 'i' && k[1] == 'd') return K_ID;
        if (k[0] == 'b' && k[1] == 'p') return K_BP;
        return -1;
    case 3:
        if (!memcmp(k, "cat", 3)) return K_CAT;
        if (!memcmp(k, "dur", 3)) return K_DUR;
        if (!memcmp(k, "pid", 3)) return K_PID;
        if (!memcmp(k, "tid", 3)) return K_TID;
        if (!memcmp(k, "id2", 3)) return -2;
        return -1;
    case 4:
        if (!memcmp(k, "name", 4)) return K_NAME;
        if (!memcmp(k, "args", 4)) return K_ARGS;
        return -1;
    case 5: return memcmp(k, "scope", 5) ? -1 : K_SCOPE;
    default: return -1;
    }
}

static const int TEXT_COL[] = {
    [K_PH] = C_PH, [K_NAME] = C_NAME, [K_CAT] = C_CAT, [K_BP] = C_BP, [K_S] = C_S, [K_SCOPE] = C_SCOPE,
};

/* One event object at s->p into row s->rows (not yet counted). */
static int event(S *s) {
    if (s->p >= s->end || s->b[s->p] != '{') return bad(s, "an event that is not a JSON object");
    int64_t row = s->rows, cap = s->cap_rows;
    int64_t ts = 0, dur = 0, ext = -1, corr = -1;
    uint8_t flags = 0;
    int seen = 0, r;
    s->p++;
    ws(s);
    if (s->p < s->end && s->b[s->p] == '}') s->p++;
    else for (;;) {
        const uint8_t *k;
        int64_t len;
        if ((r = key(s, &k, &len))) return r;
        int which = which_key(k, len);
        if (which == -2) return bad(s, "an event with id2");
        if (which >= 0) {
            if (seen & (1 << which)) return bad(s, "an event field given twice");
            seen |= 1 << which;
        }
        switch (which) {
        case K_PH: case K_NAME: case K_CAT: case K_BP: case K_S: case K_SCOPE:
            if (s->p >= s->end || s->b[s->p] != '"') return bad(s, "an event field that is not text");
            r = string(s, TEXT_COL[which]);
            break;
        case K_TS: r = time_ns(s, &ts); flags |= F_TS; break;
        case K_DUR: r = time_ns(s, &dur); flags |= F_DUR; break;
        case K_PID: r = id_text(s, C_PID); break;
        case K_TID: r = id_text(s, C_TID); break;
        case K_ID: r = id_text(s, C_ID); flags |= F_ID; break;
        case K_ARGS: r = args(s, &ext, &corr); break;
        default: r = skip(s, 1);
        }
        if (r) return r;
        ws(s);
        if (s->p >= s->end) return bad(s, "an unclosed event object");
        if (s->b[s->p] == ',') { s->p++; ws(s); continue; }
        if (s->b[s->p] == '}') { s->p++; break; }
        return bad(s, "a missing comma in an event");
    }
    /* the SELECT's coalesce() defaults */
    if (!(seen & (1 << K_PID)) && (r = put(s, C_PID, (const uint8_t *)"0", 1))) return r;
    if (!(seen & (1 << K_TID)) && (r = put(s, C_TID, (const uint8_t *)"0", 1))) return r;
    if (!(seen & (1 << K_ARGS)) && (r = put(s, C_ARGS, (const uint8_t *)"{}", 2))) return r;
    s->num[N_TS * cap + row] = ts;
    s->num[N_DUR * cap + row] = dur;
    s->num[N_EXT * cap + row] = ext;
    s->num[N_CORR * cap + row] = corr;
    s->flags[row] = flags;
    for (int c = 0; c < NSTR; c++) s->off[c * (cap + 1) + row + 1] = (int32_t)s->used[c];
    return OK;
}

/* Events from buf[lo] (an event's start, after optional whitespace) to buf[hi] (after the last one's `}` and
 * optional whitespace): `ws event ws (, ws event ws)*`. Fills at most cap_rows rows and each text column's
 * data to its capacity (< 2 GiB). out = [rows, next, error at]. KS_DONE: the range is read; KS_FULL: stopped
 * before the event at `next` (the call goes on from there); KS_BAD: refused at `error at`, the reason in why. */
int64_t kscan(const uint8_t *buf, int64_t lo, int64_t hi, int64_t cap_rows, int64_t *num, uint8_t *flags,
              int32_t *off, uint8_t **data, const int64_t *cap, int64_t *out, const char **why) {
    S s = {.b = buf, .p = lo, .end = hi, .rows = 0, .cap_rows = cap_rows, .num = num, .flags = flags, .off = off,
           .data = data, .cap = cap, .why = 0};
    for (int c = 0; c < NSTR; c++) {
        s.used[c] = 0;
        off[c * (cap_rows + 1)] = 0;
    }
    int64_t status = KS_DONE;
    ws(&s);
    for (;;) {
        int64_t start = s.p, used[NSTR];
        if (s.rows == cap_rows) { status = KS_FULL; break; }
        memcpy(used, s.used, sizeof used);
        int r = event(&s);
        if (r == E_FULL) {
            memcpy(s.used, used, sizeof used);
            s.p = start;
            if (s.rows == 0) { s.why = "an event larger than the read buffers"; status = KS_BAD; }
            else status = KS_FULL;
            break;
        }
        if (r) { status = KS_BAD; break; }
        s.rows++;
        ws(&s);
        if (s.p >= s.end) break;
        if (s.b[s.p] != ',') { bad(&s, "a missing comma between events"); status = KS_BAD; break; }
        s.p++;
        ws(&s);
        if (s.p >= s.end) { bad(&s, "a trailing comma after the last event"); status = KS_BAD; break; }
    }
    out[0] = s.rows;
    out[1] = s.p;
    out[2] = s.p;
    *why = s.why;
    return status;
}

/* The interface's version: explorer.ingest.kscan loads a library only of its own (a stale build is not used). */
int64_t kscan_abi(void) { return KSCAN_ABI; }
