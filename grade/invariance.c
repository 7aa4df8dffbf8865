/* Batch invariance of a set's results (invariance.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "invariance.h"
#include "grade.h"       /* cli_error */
#include "check-grad.h" /* check_read_array */
#include "report.h"     /* check_copy_text */

/* One member's results for the group's sequence: its outputs' rows
 * [t0, t1) of batch row b ([t1 - t0][H][m]) and its state row ([H][x][y]),
 * as doubles (NULL state: none given). */
typedef struct member {
    char name[256];
    double *out, *state;
    int64_t out_count, state_count, H, m;
} member;

static void member_free(member *m)
{
    free(m->out), free(m->state);
    memset(m, 0, sizeof *m);
}

static int64_t dim(json_t *shape, size_t i) { return json_integer_value(json_array_get(shape, i)); }

/* The member `name` (its case.json c, results in rdir); 0, 1 when it has no
 * results to compare (none there), or 2. */
static int member_read(const char *name, json_t *c, const char *rdir, member *mb)
{
    char path[4700];
    struct stat st;
    memset(mb, 0, sizeof *mb);
    check_copy_text(mb->name, sizeof mb->name, name);
    snprintf(path, sizeof path, "%s/out.npy", rdir);
    if (stat(path, &st)) return 1;
    json_t *inv = json_object_get(c, "invariance"), *exp = json_object_get(c, "expected");
    json_t *so = json_object_get(exp, "out"), *ss = json_object_get(exp, "state");
    const int64_t b = json_integer_value(json_object_get(inv, "b")), t0 = json_integer_value(json_object_get(inv, "t0")),
                  t1 = json_integer_value(json_object_get(inv, "t1")),
                  row = json_integer_value(json_object_get(inv, "state_row"));
    double *x = NULL;
    int64_t count;
    falcon_dtype dt;
    if (check_read_array(name, path, "out", so, 1, &x, &count, &dt)) return 2;
    mb->H = dim(so, 2), mb->m = dim(so, 3);
    const int64_t per = mb->H * mb->m;
    mb->out_count = (t1 - t0) * per;
    mb->out = malloc(sizeof(double) * (size_t)(mb->out_count + 1));
    if (mb->out) memcpy(mb->out, x + (b * dim(so, 1) + t0) * per, sizeof(double) * (size_t)mb->out_count);
    free(x);
    snprintf(path, sizeof path, "%s/state.npy", rdir);
    if (mb->out && !stat(path, &st)) {
        if (check_read_array(name, path, "state", ss, 1, &x, &count, &dt)) return member_free(mb), 2;
        mb->state_count = count / dim(ss, 0);
        mb->state = malloc(sizeof(double) * (size_t)(mb->state_count + 1));
        if (mb->state) memcpy(mb->state, x + row * mb->state_count, sizeof(double) * (size_t)mb->state_count);
        free(x);
        if (!mb->state) return member_free(mb), cli_error("out of memory");
    }
    return mb->out ? 0 : cli_error("out of memory");
}

/* Whether b's results for the sequence equal a's bit for bit; where not. */
static int same(const member *a, const member *b, char *where, size_t size)
{
    for (int64_t i = 0; i < a->out_count; i++)
        if (memcmp(a->out + i, b->out + i, sizeof(double))) {
            snprintf(where, size, "out[t=%lld, h=%lld, j=%lld]: %.9g vs %.9g", (long long)(i / (a->H * a->m)),
                     (long long)(i / a->m % a->H), (long long)(i % a->m), a->out[i], b->out[i]);
            return 0;
        }
    for (int64_t i = 0; a->state && b->state && i < a->state_count; i++)
        if (memcmp(a->state + i, b->state + i, sizeof(double))) {
            snprintf(where, size, "state[%lld]: %.9g vs %.9g", (long long)i, a->state[i], b->state[i]);
            return 0;
        }
    return 1;
}

/* One group: its members' names, case.json objects and result folders. */
static int compare_group(json_t *rows, const char *results_dir, check_invariance *g)
{
    member first = {0}, mb;
    int rc = 0;
    g->members = (int)json_array_size(rows);
    for (size_t i = 0; i < json_array_size(rows) && !rc; i++) {
        json_t *r = json_array_get(rows, i);
        const char *name = json_string_value(json_object_get(r, "name"));
        char rdir[4400];
        snprintf(rdir, sizeof rdir, "%s/%s", results_dir, name);
        const int got = member_read(name, json_object_get(r, "case"), rdir, &mb);
        if (got == 2) rc = 2;
        if (got) continue;
        g->compared++;
        if (!first.out) {
            first = mb;
            check_copy_text(g->first, sizeof g->first, name);
            continue;
        }
        if (!g->variant && !same(&first, &mb, g->where, sizeof g->where)) /* the first that differs */
            g->variant = 1, check_copy_text(g->other, sizeof g->other, name);
        member_free(&mb);
    }
    member_free(&first);
    return rc;
}

/* The groups' members: {"b1-chunk": [{"name", "case"}, ...], ...}, the
 * skipped cases left out. */
static int collect(const char *cases_dir, json_t *index, json_t *skip, json_t *groups)
{
    json_t *cases = json_object_get(index, "cases");
    for (size_t i = 0; i < json_array_size(cases); i++) {
        json_t *row = json_array_get(cases, i);
        const char *name = json_string_value(json_object_get(row, "name")), *dir = json_string_value(json_object_get(row, "dir"));
        if (!name || !dir || json_object_get(skip, name)) continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s/case.json", cases_dir, dir);
        json_t *c = json_load_file(path, 0, NULL);
        json_t *inv = json_object_get(c, "invariance");
        if (inv) {
            char key[128];
            snprintf(key, sizeof key, "%s-%s", json_string_value(json_object_get(inv, "group")),
                     json_string_value(json_object_get(c, "form")));
            json_t *list = json_object_get(groups, key);
            if (!list) json_object_set_new(groups, key, list = json_array());
            json_t *m = json_object();
            json_object_set_new(m, "name", json_string(name));
            json_object_set(m, "case", c);
            json_array_append_new(list, m);
        }
        json_decref(c);
    }
    return 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

int check_invariance_groups(const char *cases_dir, const char *results_dir, json_t *index, json_t *skip,
                            check_invariance **out, int *count)
{
    json_t *groups = json_object();
    *out = NULL, *count = 0;
    int rc = groups ? collect(cases_dir, index, skip, groups) : cli_error("out of memory");
    const size_t n = json_object_size(groups);
    if (!rc && n && !(*out = calloc(n, sizeof **out))) rc = cli_error("out of memory");
    const char **keys = n ? calloc(n, sizeof *keys) : NULL;
    if (!rc && n && !keys) rc = cli_error("out of memory");
    const char *key;
    json_t *rows;
    size_t k = 0;
    json_object_foreach(groups, key, rows) if (keys) keys[k++] = key;
    if (keys) qsort(keys, k, sizeof *keys, by_name); /* the same order on every run */
    for (size_t i = 0; i < k && !rc; i++) {
        check_invariance *g = &(*out)[(*count)++];
        check_copy_text(g->group, sizeof g->group, keys[i]);
        rc = compare_group(json_object_get(groups, keys[i]), results_dir, g);
    }
    free(keys);
    json_decref(groups);
    return rc;
}

/* Counts: groups compared (two or more members with results), variant. */
static void tally(const check_invariance *g, int n, int *compared, int *variant)
{
    *compared = *variant = 0;
    for (int i = 0; i < n; i++) *compared += g[i].compared >= 2, *variant += g[i].variant;
}

void check_invariance_print(FILE *f, const check_invariance *g, int n, int lines)
{
    int compared, variant;
    tally(g, n, &compared, &variant);
    if (!n) return;
    for (int i = 0; lines && i < n; i++) /* --format lines: the variant groups alone */
        if (g[i].variant)
            fprintf(f, "%s: BATCH-VARIANT %s differs from %s at %s\n", g[i].group, g[i].other, g[i].first, g[i].where);
    if (lines) return;
    if (variant)
        fprintf(f, "batch invariance: %d of %d groups compared (a sequence alone, between neighbours, packed), "
                   "%d BATCH-VARIANT (not the same bits, within the thresholds or not)\n", compared, n, variant);
    else
        fprintf(f, "batch invariance: %d of %d groups compared (a sequence alone, between neighbours, packed), "
                   "every one invariant bit for bit\n", compared, n);
    for (int i = 0; i < n; i++)
        if (g[i].variant)
            fprintf(f, "BATCH-VARIANT %s: %s differs from %s at %s\n", g[i].group, g[i].other, g[i].first,
                    g[i].where);
}

json_t *check_invariance_json(const check_invariance *g, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "group", json_string(g[i].group));
        json_object_set_new(o, "members", json_integer(g[i].members));
        json_object_set_new(o, "compared", json_integer(g[i].compared));
        json_object_set_new(o, "batch_variant", json_boolean(g[i].variant));
        if (g[i].variant) {
            json_object_set_new(o, "first", json_string(g[i].first));
            json_object_set_new(o, "differs", json_string(g[i].other));
            json_object_set_new(o, "where", json_string(g[i].where));
        }
        json_array_append_new(a, o);
    }
    return a;
}

int check_invariance_variant(const check_invariance *g, int n)
{
    int compared, variant;
    tally(g, n, &compared, &variant);
    return variant;
}
