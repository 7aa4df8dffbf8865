/*
 * json.h: a small JSON reader, enough for Google Benchmark's output (objects,
 * arrays, strings, numbers, true/false/null; plus the NaN, Infinity and
 * -Infinity that Google Benchmark writes for non-finite counters).
 * Why not a packaged library: Debian's jansson (2.14, used by the grading
 * layer for the strict JSON it writes and reads) rejects those three tokens
 * ("invalid token near 'NaN'", tried with json_loads), and so does cJSON
 * (libcjson-dev 1.7.15, cJSON_Parse): neither can read a benchmark file with
 * a failed or unmeasured counter.
 * The whole document is parsed into a tree; malformed input gets a message
 * with the line and column.
 * It is tools-level code (util/), not the benchmark's: `falcon compare`
 * (bench/compare.c) and `falcon-study bench-dat` (study/benchdat.c) both
 * read benchmark files through it, and neither tool reaches into the
 * other's sources.
 */
#ifndef FALCON_UTIL_JSON_H
#define FALCON_UTIL_JSON_H

#include <stddef.h>

typedef enum falcon_json_type {
    FALCON_JSON_NULL = 0,
    FALCON_JSON_BOOL,
    FALCON_JSON_NUMBER,
    FALCON_JSON_STRING,
    FALCON_JSON_ARRAY,
    FALCON_JSON_OBJECT
} falcon_json_type;

typedef struct falcon_json falcon_json;
struct falcon_json {
    falcon_json_type type;
    int boolean;       /* BOOL */
    double number;     /* NUMBER */
    char *string;      /* STRING: UTF-8, NUL-terminated (\u0000 is rejected) */
    size_t count;      /* ARRAY, OBJECT: members */
    falcon_json *items; /* ARRAY: elements; OBJECT: values */
    char **keys;       /* OBJECT: keys, in document order */
};

/* Parse `len` bytes. Returns the tree, or NULL with a message in err
 * ("line L, column C: what was wrong") on malformed input or no memory. */
falcon_json *falcon_json_parse(const char *text, size_t len, char *err, size_t errlen);
/* Read and parse a file; the message names the file. */
falcon_json *falcon_json_parse_file(const char *path, char *err, size_t errlen);
void falcon_json_free(falcon_json *v);

/* The member `key` of an object (the first if repeated), or NULL. */
const falcon_json *falcon_json_get(const falcon_json *obj, const char *key);
/* Typed look-ups: the member if it has that type, else NULL / the default. */
const char *falcon_json_get_string(const falcon_json *obj, const char *key);
double falcon_json_get_number(const falcon_json *obj, const char *key, double dflt);

#endif
