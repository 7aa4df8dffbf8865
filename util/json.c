/*
 * json.c: a recursive-descent JSON reader (RFC 8259), strict except for
 * NaN / Infinity / -Infinity, which Google Benchmark's JSON reporter writes
 * for non-finite values. Depth is capped so hostile input cannot exhaust the
 * stack.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "json.h"

#define MAX_DEPTH 200

typedef struct parser {
    const char *s, *end, *p;
    char *err;
    size_t errlen;
    int failed;
} parser;

static void fail(parser *ps, const char *fmt, ...)
{
    if (ps->failed) return;
    ps->failed = 1;
    int line = 1, col = 1;
    for (const char *c = ps->s; c < ps->p && c < ps->end; c++) {
        if (*c == '\n') line++, col = 1;
        else col++;
    }
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ps->err && ps->errlen) snprintf(ps->err, ps->errlen, "line %d, column %d: %s", line, col, msg);
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int literal(parser *ps, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, word, n) == 0) {
        ps->p += n;
        return 1;
    }
    return 0;
}

static const char *describe(parser *ps)
{
    static char buf[32];
    if (ps->p >= ps->end) return "end of input";
    unsigned char c = (unsigned char)*ps->p;
    if (c >= 0x20 && c < 0x7f) snprintf(buf, sizeof buf, "'%c'", c);
    else snprintf(buf, sizeof buf, "byte 0x%02x", c);
    return buf;
}

static int hex4(parser *ps, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++, ps->p++) {
        if (ps->p >= ps->end) return fail(ps, "truncated \\u escape"), 0;
        char c = *ps->p;
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return fail(ps, "bad hex digit in \\u escape"), 0;
    }
    *out = v;
    return 1;
}

/* A string at ps->p (the opening quote); returns a malloc'ed UTF-8 copy. */
static char *parse_string(parser *ps)
{
    ps->p++;
    /* Escapes never lengthen the text (\uXXXX is 6 bytes for <= 4 of UTF-8). */
    const char *q = ps->p;
    while (q < ps->end && *q != '"') q += (*q == '\\' && q + 1 < ps->end) ? 2 : 1;
    if (q >= ps->end) return fail(ps, "unterminated string"), NULL;
    char *out = malloc((size_t)(q - ps->p) + 1), *o = out;
    if (!out) return fail(ps, "out of memory"), NULL;
    while (*ps->p != '"') {
        unsigned char c = (unsigned char)*ps->p;
        if (c < 0x20) {
            fail(ps, "control character (byte 0x%02x) inside a string", c);
            goto bad;
        }
        if (c != '\\') {
            *o++ = (char)c;
            ps->p++;
            continue;
        }
        ps->p++;
        char e = *ps->p++;
        switch (e) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            unsigned cp, lo;
            if (!hex4(ps, &cp)) goto bad;
            if (cp >= 0xD800 && cp < 0xDC00) { /* a surrogate pair */
                if (!(literal(ps, "\\u") && hex4(ps, &lo) && lo >= 0xDC00 && lo < 0xE000)) {
                    fail(ps, "unpaired UTF-16 surrogate in \\u escape");
                    goto bad;
                }
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp < 0xE000) {
                fail(ps, "unpaired UTF-16 surrogate in \\u escape");
                goto bad;
            }
            if (cp == 0) {
                fail(ps, "\\u0000 is not supported in strings");
                goto bad;
            }
            if (cp < 0x80) *o++ = (char)cp;
            else if (cp < 0x800) *o++ = (char)(0xC0 | cp >> 6), *o++ = (char)(0x80 | (cp & 0x3F));
            else if (cp < 0x10000)
                *o++ = (char)(0xE0 | cp >> 12), *o++ = (char)(0x80 | ((cp >> 6) & 0x3F)),
                *o++ = (char)(0x80 | (cp & 0x3F));
            else
                *o++ = (char)(0xF0 | cp >> 18), *o++ = (char)(0x80 | ((cp >> 12) & 0x3F)),
                *o++ = (char)(0x80 | ((cp >> 6) & 0x3F)), *o++ = (char)(0x80 | (cp & 0x3F));
            break;
        }
        default:
            ps->p--;
            fail(ps, "unknown escape \\%c in a string", e);
            goto bad;
        }
    }
    ps->p++;
    *o = 0;
    return out;
bad:
    free(out);
    return NULL;
}

/* A number: the JSON grammar checked here, the value from strtod. */
static int parse_number(parser *ps, double *out)
{
    const char *start = ps->p, *p = ps->p, *end = ps->end;
    if (p < end && *p == '-') p++;
    if (p < end && *p == '0') p++;
    else if (p < end && *p >= '1' && *p <= '9') while (p < end && *p >= '0' && *p <= '9') p++;
    else return fail(ps, "expected a value, found %s", describe(ps)), 0;
    if (p < end && *p == '.') {
        p++;
        if (!(p < end && *p >= '0' && *p <= '9')) return ps->p = p, fail(ps, "expected a digit after '.'"), 0;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (!(p < end && *p >= '0' && *p <= '9')) return ps->p = p, fail(ps, "expected a digit in the exponent"), 0;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    char buf[64];
    size_t n = (size_t)(p - start);
    if (n >= sizeof buf) return fail(ps, "number too long"), 0;
    memcpy(buf, start, n);
    buf[n] = 0;
    errno = 0;
    *out = strtod(buf, NULL); /* overflow gives +-HUGE_VAL, underflow 0: both fine here */
    ps->p = p;
    return 1;
}

static int parse_value(parser *ps, falcon_json *v, int depth);

static int grow(parser *ps, falcon_json *v, size_t *cap, int object)
{
    if (v->count < *cap) return 1;
    size_t nc = *cap ? 2 * *cap : 8;
    falcon_json *items = realloc(v->items, nc * sizeof *items);
    if (!items) return fail(ps, "out of memory"), 0;
    v->items = items;
    if (object) {
        char **keys = realloc(v->keys, nc * sizeof *keys);
        if (!keys) return fail(ps, "out of memory"), 0;
        v->keys = keys;
    }
    *cap = nc;
    return 1;
}

static int parse_container(parser *ps, falcon_json *v, int depth, int object)
{
    const char close = object ? '}' : ']';
    size_t cap = 0;
    v->type = object ? FALCON_JSON_OBJECT : FALCON_JSON_ARRAY;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) return ps->p++, 1;
    for (;;) {
        skip_ws(ps);
        if (!grow(ps, v, &cap, object)) return 0;
        char *key = NULL;
        if (object) {
            if (ps->p >= ps->end || *ps->p != '"')
                return fail(ps, "expected a string key in an object, found %s", describe(ps)), 0;
            if (!(key = parse_string(ps))) return 0;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                free(key);
                return fail(ps, "expected ':' after an object key, found %s", describe(ps)), 0;
            }
            ps->p++;
            v->keys[v->count] = key;
        }
        /* Count the member before parsing it, so a failure frees it. */
        memset(&v->items[v->count], 0, sizeof v->items[0]);
        v->count++;
        if (!parse_value(ps, &v->items[v->count - 1], depth + 1)) return 0;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) return ps->p++, 1;
        return fail(ps, "expected ',' or '%c' in %s, found %s", close, object ? "an object" : "an array",
                    describe(ps)),
               0;
    }
}

static int parse_value(parser *ps, falcon_json *v, int depth)
{
    if (depth > MAX_DEPTH) return fail(ps, "nested deeper than %d levels", MAX_DEPTH), 0;
    skip_ws(ps);
    if (ps->p >= ps->end) return fail(ps, "expected a value, found end of input"), 0;
    switch (*ps->p) {
    case '{': return parse_container(ps, v, depth, 1);
    case '[': return parse_container(ps, v, depth, 0);
    case '"':
        v->type = FALCON_JSON_STRING;
        return (v->string = parse_string(ps)) != NULL;
    default: break;
    }
    if (literal(ps, "true")) return v->type = FALCON_JSON_BOOL, v->boolean = 1, 1;
    if (literal(ps, "false")) return v->type = FALCON_JSON_BOOL, v->boolean = 0, 1;
    if (literal(ps, "null")) return v->type = FALCON_JSON_NULL, 1;
    v->type = FALCON_JSON_NUMBER;
    if (literal(ps, "NaN")) return v->number = NAN, 1;
    if (literal(ps, "Infinity")) return v->number = INFINITY, 1;
    if (literal(ps, "-Infinity")) return v->number = -INFINITY, 1;
    return parse_number(ps, &v->number);
}

static void free_members(falcon_json *v)
{
    if (!v) return;
    free(v->string);
    for (size_t i = 0; i < v->count; i++) {
        free_members(&v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
}

void falcon_json_free(falcon_json *v)
{
    free_members(v);
    free(v);
}

falcon_json *falcon_json_parse(const char *text, size_t len, char *err, size_t errlen)
{
    parser ps = {.s = text, .end = text + len, .p = text, .err = err, .errlen = errlen};
    falcon_json *v = calloc(1, sizeof *v);
    if (!v) {
        if (err && errlen) snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) ps.p += 3; /* a UTF-8 BOM */
    if (parse_value(&ps, v, 0)) {
        skip_ws(&ps);
        if (ps.p < ps.end) fail(&ps, "unexpected %s after the document", describe(&ps));
    }
    if (ps.failed) {
        falcon_json_free(v);
        return NULL;
    }
    return v;
}

/* The largest JSON file read. */
#define FALCON_JSON_MAX_BYTES (256 << 20)

falcon_json *falcon_json_parse_file(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    /* A result file is a few MiB; a bound keeps /dev/zero or a huge file
     * from taking all the memory. */
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap) break;
        if (cap >= FALCON_JSON_MAX_BYTES) {
            fclose(f);
            free(buf);
            snprintf(err, errlen, "%s: larger than %d MiB: not a benchmark result file", path,
                     FALCON_JSON_MAX_BYTES >> 20);
            return NULL;
        }
        char *nb = realloc(buf, cap * 2);
        if (!nb) free(buf);
        buf = nb;
        cap *= 2;
    }
    int bad = !buf || ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        snprintf(err, errlen, "%s: cannot read%s", path, buf ? "" : ": out of memory");
        return NULL;
    }
    char msg[256];
    falcon_json *v = falcon_json_parse(buf, len, msg, sizeof msg);
    free(buf);
    if (!v) snprintf(err, errlen, "%s: %s", path, msg);
    return v;
}

const falcon_json *falcon_json_get(const falcon_json *obj, const char *key)
{
    if (!obj || obj->type != FALCON_JSON_OBJECT) return NULL;
    for (size_t i = 0; i < obj->count; i++)
        if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
    return NULL;
}

const char *falcon_json_get_string(const falcon_json *obj, const char *key)
{
    const falcon_json *v = falcon_json_get(obj, key);
    return v && v->type == FALCON_JSON_STRING ? v->string : NULL;
}

double falcon_json_get_number(const falcon_json *obj, const char *key, double dflt)
{
    const falcon_json *v = falcon_json_get(obj, key);
    return v && v->type == FALCON_JSON_NUMBER ? v->number : dflt;
}
