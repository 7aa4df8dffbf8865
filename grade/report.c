/* The reports of `falcon check` (see report.h). */
#include <jansson.h>
#include <stdarg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "grade.h"
#include "report.h"

int check_failed(const check_report *r)
{
    for (int i = 0; i < r->count; i++)
        if (r->cases[i].status == CHECK_FAIL) return 1;
    return 0;
}

/* One row of the table: a variant and form, in the order the set lists them. */
typedef struct group {
    const char *variant, *form;
    int cases, failed, skipped;
    double out_u, state_u, ratio;
} group;

static int groups_of(const check_report *r, group *g)
{
    int n = 0;
    for (int i = 0; i < r->count; i++) {
        const check_case *c = &r->cases[i];
        int k = 0;
        while (k < n && (strcmp(g[k].variant, c->variant) || strcmp(g[k].form, c->form))) k++;
        if (k == n) g[n++] = (group){c->variant, c->form, 0, 0, 0, 0, 0, 0};
        g[k].cases++;
        if (c->status == CHECK_SKIP) {
            g[k].skipped++;
            continue;
        }
        g[k].failed += c->status == CHECK_FAIL;
        if (c->out_u > g[k].out_u) g[k].out_u = c->out_u;
        if (c->state_u > g[k].state_u) g[k].state_u = c->state_u; /* NaN compares false */
        if (c->ratio > g[k].ratio) g[k].ratio = c->ratio;
    }
    return n;
}

/* Text from the results (a skip reason) on one line of the table: control
 * bytes escaped, so that a reason cannot add lines that read as results. */
static void put_one_line(FILE *f, const char *s)
{
    for (; *s; s++) {
        const unsigned char ch = (unsigned char)*s;
        if (ch < 0x20 || ch == 0x7f) fprintf(f, "\\x%02x", ch);
        else fputc(ch, f);
    }
}

static void print_case(FILE *f, const check_case *c)
{
    if (c->status == CHECK_SKIP) {
        fprintf(f, "skip %s: ", c->name);
        put_one_line(f, c->reason);
        fputc('\n', f);
        return;
    }
    fprintf(f, "%s %s: out %.3g u (threshold %.3g)", c->status == CHECK_PASS ? "pass" : "FAIL", c->name, c->out_u,
            c->thr_out_u);
    if (isnan(c->state_u)) fprintf(f, ", S not given\n");
    else fprintf(f, ", S %.3g u (threshold %.3g)\n", c->state_u, c->thr_state_u);
}

void check_print(FILE *f, const check_report *r, int verbose)
{
    int pass = 0, fail = 0, skip = 0;
    for (int i = 0; i < r->count; i++) {
        const check_case *c = &r->cases[i];
        pass += c->status == CHECK_PASS, fail += c->status == CHECK_FAIL, skip += c->status == CHECK_SKIP;
        if (verbose || c->status == CHECK_FAIL) print_case(f, c);
    }
    group *g = calloc((size_t)r->count + 1, sizeof *g);
    const int ng = g ? groups_of(r, g) : 0;
    fprintf(f, "\n%-9s %-10s %6s %7s %12s %12s %10s  %s\n", "variant", "form", "cases", "skipped", "max out (u)",
            "max S (u)", "max/thr", "result");
    for (int k = 0; k < ng; k++) {
        const group *x = &g[k];
        const int judged = x->cases - x->skipped;
        if (judged == 0)
            fprintf(f, "%-9s %-10s %6d %7d %12s %12s %10s  %s\n", x->variant, x->form, x->cases, x->skipped, "-", "-",
                    "-", "skipped");
        else
            fprintf(f, "%-9s %-10s %6d %7d %12.3g %12.3g %10.3f  %s\n", x->variant, x->form, x->cases, x->skipped,
                    x->out_u, x->state_u, x->ratio, x->failed ? "FAIL" : "pass");
    }
    free(g);
    fprintf(f, "\ncheck (%s units, u = %.3g): %d cases: %d passed, %d failed, %d skipped: %s\n", r->unit, r->u,
            r->count, pass, fail, skip, fail ? "FAILED" : "passed");
}

static json_t *number_or_null(double x) { return isfinite(x) ? json_real(x) : json_null(); }

char *check_json_text(const check_report *r)
{
    static const char *const status[] = {"pass", "fail", "skip"};
    json_t *root = json_object(), *cases = json_array(), *groups = json_array();
    int pass = 0, fail = 0, skip = 0;
    for (int i = 0; i < r->count; i++) {
        const check_case *c = &r->cases[i];
        pass += c->status == CHECK_PASS, fail += c->status == CHECK_FAIL, skip += c->status == CHECK_SKIP;
        json_t *j = json_object();
        json_object_set_new(j, "name", json_string(c->name));
        json_object_set_new(j, "variant", json_string(c->variant));
        json_object_set_new(j, "form", json_string(c->form));
        json_object_set_new(j, "align", json_string(c->align));
        json_object_set_new(j, "decay", json_string(c->decay));
        json_object_set_new(j, "status", json_string(status[c->status]));
        if (c->status == CHECK_SKIP) json_object_set_new(j, "reason", json_string(c->reason));
        const int judged = c->status != CHECK_SKIP;
        json_object_set_new(j, "out_u", judged ? number_or_null(c->out_u) : json_null());
        json_object_set_new(j, "state_u", judged ? number_or_null(c->state_u) : json_null());
        json_object_set_new(j, "thr_out_u", json_real(c->thr_out_u));
        json_object_set_new(j, "thr_state_u", json_real(c->thr_state_u));
        json_object_set_new(j, "ratio", judged ? number_or_null(c->ratio) : json_null());
        json_array_append_new(cases, j);
    }
    group *g = calloc((size_t)r->count + 1, sizeof *g);
    const int ng = g ? groups_of(r, g) : 0;
    for (int k = 0; k < ng; k++) {
        json_t *j = json_object();
        json_object_set_new(j, "variant", json_string(g[k].variant));
        json_object_set_new(j, "form", json_string(g[k].form));
        json_object_set_new(j, "cases", json_integer(g[k].cases));
        json_object_set_new(j, "failed", json_integer(g[k].failed));
        json_object_set_new(j, "skipped", json_integer(g[k].skipped));
        json_object_set_new(j, "max_out_u", json_real(g[k].out_u));
        json_object_set_new(j, "max_state_u", json_real(g[k].state_u));
        json_object_set_new(j, "worst_ratio", json_real(g[k].ratio));
        json_array_append_new(groups, j);
    }
    free(g);
    json_t *counts = json_object();
    json_object_set_new(counts, "pass", json_integer(pass));
    json_object_set_new(counts, "fail", json_integer(fail));
    json_object_set_new(counts, "skip", json_integer(skip));
    json_object_set_new(root, "format", json_string("falcon-check"));
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "cases_dir", json_string(r->cases_dir));
    json_object_set_new(root, "results_dir", json_string(r->results_dir));
    json_object_set_new(root, "precision", json_string(r->unit));
    json_object_set_new(root, "u", json_real(r->u));
    json_object_set_new(root, "passed", json_boolean(!fail));
    json_object_set_new(root, "counts", counts);
    json_object_set_new(root, "cases", cases);
    json_object_set_new(root, "groups", groups);
    char *text = json_dumps(root, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    json_decref(root);
    if (text) { /* end with a newline */
        char *t = realloc(text, strlen(text) + 2);
        if (t) strcat(t, "\n");
        else free(text);
        text = t;
    }
    return text;
}

/* A growing text buffer; `oom` records a failed allocation, so that a
 * truncated document is never written. */
typedef struct text {
    char *b;
    size_t len, cap;
    int oom;
} text;

static void put(text *t, const char *s, size_t n)
{
    if (t->oom) return;
    if (t->len + n + 1 > t->cap) {
        const size_t grown = t->cap * 2 + n + 64;
        char *b = realloc(t->b, grown);
        if (!b) {
            t->oom = 1;
            return;
        }
        t->b = b, t->cap = grown;
    }
    memcpy(t->b + t->len, s, n);
    t->len += n;
    t->b[t->len] = '\0';
}

/* Text with XML's five special characters escaped (control bytes dropped). */
static void xml_put(text *t, const char *s)
{
    for (; s && *s; s++) {
        const char *rep = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '"' ? "&quot;"
                        : *s == '\'' ? "&apos;" : NULL;
        if (rep) put(t, rep, strlen(rep));
        else if ((unsigned char)*s >= 0x20 || *s == '\n' || *s == '\t') put(t, s, 1);
    }
}

/* Markup (no text from the outside), formatted. */
static void xml_raw(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void xml_raw(text *t, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    put(t, tmp, strlen(tmp));
}

char *check_junit_text(const check_report *r)
{
    text b = {0};
    put(&b, "", 0);
    int fail = 0, skip = 0;
    for (int i = 0; i < r->count; i++) fail += r->cases[i].status == CHECK_FAIL, skip += r->cases[i].status == CHECK_SKIP;
    xml_raw(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    xml_raw(&b, "<testsuites name=\"falcon check (%s units)\" tests=\"%d\" failures=\"%d\" skipped=\"%d\">\n",
            r->unit, r->count, fail, skip);
    group *g = calloc((size_t)r->count + 1, sizeof *g);
    const int ng = g ? groups_of(r, g) : 0;
    for (int k = 0; k < ng; k++) {
        xml_raw(&b, "  <testsuite name=\"");
        xml_put(&b, g[k].variant);
        xml_raw(&b, ".");
        xml_put(&b, g[k].form);
        xml_raw(&b, "\" tests=\"%d\" failures=\"%d\" skipped=\"%d\">\n", g[k].cases, g[k].failed,
                g[k].skipped);
        for (int i = 0; i < r->count; i++) {
            const check_case *c = &r->cases[i];
            if (strcmp(c->variant, g[k].variant) || strcmp(c->form, g[k].form)) continue;
            xml_raw(&b, "    <testcase classname=\"falcon.");
            xml_put(&b, c->variant);
            xml_raw(&b, ".");
            xml_put(&b, c->form);
            xml_raw(&b, "\" name=\"");
            xml_put(&b, c->name);
            xml_raw(&b, "\" time=\"0\">");
            if (c->status == CHECK_SKIP) {
                xml_raw(&b, "<skipped message=\"");
                xml_put(&b, c->reason);
                xml_raw(&b, "\"/>");
            } else if (c->status == CHECK_FAIL) {
                xml_raw(&b,
                        "<failure message=\"error above threshold (%s units)\">out %.6g u (threshold %.6g u)",
                        r->unit, c->out_u, c->thr_out_u);
                if (!isnan(c->state_u))
                    xml_raw(&b, ", S %.6g u (threshold %.6g u)", c->state_u, c->thr_state_u);
                xml_raw(&b, "</failure>");
            } else {
                xml_raw(&b, "<system-out>out %.6g u, max/thr %.4f</system-out>", c->out_u, c->ratio);
            }
            xml_raw(&b, "</testcase>\n");
        }
        xml_raw(&b, "  </testsuite>\n");
    }
    free(g);
    xml_raw(&b, "</testsuites>\n");
    if (b.oom) {
        free(b.b);
        return NULL;
    }
    return b.b;
}
