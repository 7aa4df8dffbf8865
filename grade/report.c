/* The reports of `falcon check` (see report.h). */
#include <jansson.h>
#include <stdarg.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "grade.h"
#include "report.h"
#include "grad-gate.h"

/* ---- text from the outside: UTF-8 ---- */

/* The length of the well-formed UTF-8 character at s (1 to 4 bytes: no
 * overlong form, no surrogate, at most U+10FFFF, as jansson requires), or 0
 * when s does not start one. */
static int utf8_char(const unsigned char *s)
{
    if (s[0] < 0x80) return 1;
    const int len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
    if (!len || s[0] > 0xf4) return 0;
    unsigned cp = s[0] & (0x7f >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    static const unsigned least[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

void check_copy_text(char *dst, size_t size, const char *src)
{
    size_t n = 0;
    for (int k; src && src[n] && (k = utf8_char((const unsigned char *)src + n)) && n + (size_t)k < size;) n += (size_t)k;
    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
}

/* s as a JSON string: a byte that is not part of a well-formed character
 * becomes U+FFFD, so that no key is ever lost to json_string's refusal. */
static json_t *json_text(const char *s)
{
    if (!s) return json_null();
    json_t *j = json_string(s);
    if (j) return j;
    const size_t len = strlen(s);
    char *b = malloc(3 * len + 1);
    if (!b) return json_null();
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        const int k = utf8_char((const unsigned char *)s + i);
        if (k) memcpy(b + n, s + i, (size_t)k), n += (size_t)k, i += (size_t)k;
        else memcpy(b + n, "\xef\xbf\xbd", 3), n += 3, i++;
    }
    j = json_stringn(b, n);
    free(b);
    return j ? j : json_null();
}

/* ---- counts ---- */

/* One row of the table: a variant and form, in the order the set lists them.
 * read: cases not skipped (their results were read); no_state: of those, the
 * ones without a state.npy; identical: the ones equal to the reference. */
typedef struct group {
    const char *variant, *form;
    int cases, failed, skipped, unjudgeable, read, no_state, identical;
    double out_u, state_u, ratio;
} group;

static int group_identical(const group *g) { return g->read > 0 && g->identical == g->read; }

static int groups_of(const check_report *r, group *g)
{
    int n = 0;
    for (int i = 0; i < r->count; i++) {
        const check_case *c = &r->cases[i];
        int k = 0;
        while (k < n && (strcmp(g[k].variant, c->variant) || strcmp(g[k].form, c->form))) k++;
        if (k == n) g[n++] = (group){.variant = c->variant, .form = c->form};
        g[k].cases++;
        if (c->status == CHECK_SKIP) {
            g[k].skipped++;
            continue;
        }
        g[k].read++;
        g[k].failed += c->status == CHECK_FAIL;
        g[k].unjudgeable += c->status == CHECK_UNJUDGEABLE;
        g[k].no_state += isnan(c->state_u);
        g[k].identical += c->identical;
        if (c->out_u > g[k].out_u) g[k].out_u = c->out_u;
        if (c->state_u > g[k].state_u) g[k].state_u = c->state_u; /* NaN compares false */
        if (c->ratio > g[k].ratio) g[k].ratio = c->ratio;
    }
    return n;
}

check_tally check_count(const check_report *r)
{
    check_tally t = {0};
    for (int i = 0; i < r->count; i++) {
        const check_case *c = &r->cases[i];
        t.pass += c->status == CHECK_PASS, t.fail += c->status == CHECK_FAIL, t.skip += c->status == CHECK_SKIP;
        t.unjudgeable += c->status == CHECK_UNJUDGEABLE;
        t.no_state += c->status != CHECK_SKIP && isnan(c->state_u);
        t.grad_cases += c->status != CHECK_SKIP && c->grad_ref;
        t.no_grad += c->status != CHECK_SKIP && c->grad_ref && !c->grad_given;
    }
    t.judged = t.pass + t.fail;
    t.too_many_skips = r->max_skipped >= 0 && t.skip > r->max_skipped * r->count;
    group *g = calloc((size_t)r->count + 1, sizeof *g);
    const int ng = g ? groups_of(r, g) : 0;
    for (int k = 0; k < ng; k++) t.identical_groups += group_identical(&g[k]);
    free(g);
    return t;
}

int check_failed(const check_report *r)
{
    const check_tally t = check_count(r);
    return t.fail || t.too_many_skips || (r->require_inv && check_invariance_variant(r->inv, r->ninv));
}

/* ---- gradients: one row per gradient tensor ---- */

/* A gradient over the cases read: cases that have its reference, the ones
 * whose results hold it, failed and not judgeable among those, the largest
 * error and error over threshold. */
typedef struct grad_row {
    int cases, given, failed, unjudgeable;
    double err_u, ratio;
} grad_row;

static void grad_rows(const check_report *r, grad_row rows[CHECK_NGRAD])
{
    memset(rows, 0, sizeof(grad_row) * CHECK_NGRAD);
    for (int i = 0; i < r->count; i++)
        for (int t = 0; t < CHECK_NGRAD && r->cases[i].status != CHECK_SKIP; t++) {
            const check_grad *g = &r->cases[i].grad[t];
            grad_row *w = &rows[t];
            w->cases += g->has;
            if (!g->given) continue;
            w->given++;
            w->failed += g->status == CHECK_FAIL;
            w->unjudgeable += g->status == CHECK_UNJUDGEABLE;
            if (!(g->err_u <= w->err_u)) w->err_u = g->err_u; /* an infinite one (not finite) too */
            if (!(g->err_u / g->thr_u <= w->ratio)) w->ratio = g->err_u / g->thr_u;
        }
}

/* The gradients of a case beyond their thresholds, "dq, dS0" ("" if none). */
static void grads_failed(char *b, size_t n, const check_case *c)
{
    size_t at = 0;
    b[0] = '\0';
    for (int t = 0; t < CHECK_NGRAD && at < n; t++)
        if (c->grad[t].given && c->grad[t].status == CHECK_FAIL)
            at += (size_t)snprintf(b + at, n - at, "%s%s", at ? ", " : "", gate_grad_name(t));
}

/* The forward results are within their thresholds (a failure is then the gradients'). */
static int forward_ok(const check_case *c)
{
    return c->out_u <= c->thr_out_u && (isnan(c->state_u) || c->state_u <= c->thr_state_u);
}

/* ---- words shared by the reports ---- */

/* Why a case is not judgeable: its threshold in the unit, as a relative
 * error (the words after "not judgeable in <unit>: "). */
static void unjudgeable_detail(char *b, size_t n, const check_case *c, const check_report *r)
{
    const double thr = c->thr_out_u > c->thr_state_u ? c->thr_out_u : c->thr_state_u;
    snprintf(b, n, "its threshold %.3g u is a relative error of %.3g, above 2^-4 (judge it in a smaller unit)",
             thr, thr * r->u);
}

static void unjudgeable_why(char *b, size_t n, const check_case *c, const check_report *r)
{
    char detail[200];
    unjudgeable_detail(detail, sizeof detail, c, r);
    snprintf(b, n, "not judgeable in %s: %s", r->unit, detail);
}

/* A failing result stored in a coarser format than the unit it is judged
 * in: the likely cause, named ("" otherwise). */
static const char *dtype_hint(const check_case *c, const check_report *r)
{
    if (c->status != CHECK_FAIL || !c->dtype) return "";
    if (!strcmp(c->dtype, "float16") && r->u < ldexp(1, -11))
        return " (the result is float16: judge it with --precision fp16)";
    if (!strcmp(c->dtype, "float32") && r->u < ldexp(1, -24))
        return " (the result is float32: judge it with --precision fp32)";
    return "";
}

/* Where a failing case went wrong: its first bad step, batch row and head
 * (its outputs exceed their threshold), or its state alone; "" for a case
 * that did not fail. */
static void where_text(char *b, size_t n, const check_case *c)
{
    if (c->status != CHECK_FAIL) snprintf(b, n, "%s", "");
    else if (c->where.seq >= 0)
        snprintf(b, n, "first bad step t = %lld (packed sequence %lld, its step %lld; head %lld)",
                 (long long)c->where.step, (long long)c->where.seq, (long long)c->where.seq_step,
                 (long long)c->where.head);
    else if (c->where.step >= 0)
        snprintf(b, n, "first bad step t = %lld (batch %lld, head %lld)", (long long)c->where.step,
                 (long long)c->where.batch, (long long)c->where.head);
    else if (forward_ok(c)) {
        char list[128];
        grads_failed(list, sizeof list, c);
        snprintf(b, n, "gradients only (%s)", list);
    } else snprintf(b, n, "state only (%s)", c->no_steps ? "the case has no steps" : "the outputs are within their threshold");
}

/* A gradient's error as words: "3.1 u" or "not finite". */
static void grad_err_text(char *b, size_t n, const check_grad *g)
{
    if (isfinite(g->err_u)) snprintf(b, n, "%.3g u", g->err_u);
    else snprintf(b, n, "not finite (a NaN or an infinity)");
}

#define IDENTICAL_WHY "identical to the reference bit for bit: a copy of the reference, or an fp64 kernel " \
                      "matching MPFR exactly"

/* ---- the table ---- */

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

static void print_case(FILE *f, const check_case *c, const check_report *r)
{
    if (c->status == CHECK_SKIP) {
        fprintf(f, "skip %s: ", c->name);
        put_one_line(f, c->reason);
        fputc('\n', f);
        return;
    }
    static const char *const word[] = {"pass", "FAIL", "skip", "not judgeable"};
    fprintf(f, "%s %s: out %.3g u (threshold %.3g)", word[c->status], c->name, c->out_u, c->thr_out_u);
    if (isnan(c->state_u)) fprintf(f, ", S not given");
    else fprintf(f, ", S %.3g u (threshold %.3g)", c->state_u, c->thr_state_u);
    for (int t = 0; t < CHECK_NGRAD; t++)
        if (c->grad[t].given) {
            char err[64];
            grad_err_text(err, sizeof err, &c->grad[t]);
            fprintf(f, ", %s %s (threshold %.3g)", gate_grad_name(t), err, c->grad[t].thr_u);
        }
    if (c->grad_ref && !c->grad_given) fprintf(f, ", gradients not given");
    if (c->status == CHECK_UNJUDGEABLE) {
        char why[256];
        unjudgeable_why(why, sizeof why, c, r);
        fprintf(f, ": %s", why);
    }
    char where[128];
    where_text(where, sizeof where, c);
    fprintf(f, "%s%s%s\n", *where ? " ; " : "", where, dtype_hint(c, r));
}

static void print_group(FILE *f, const group *x)
{
    fprintf(f, "%-9s %-10s %6d %7d %11d ", x->variant, x->form, x->cases, x->skipped, x->unjudgeable);
    if (x->read == 0) {
        fprintf(f, "%12s %12s %10s  %s\n", "-", "-", "-", "skipped");
        return;
    }
    fprintf(f, "%12.3g ", x->out_u);
    if (x->no_state == x->read) fprintf(f, "%12s ", "not given");
    else fprintf(f, "%12.3g ", x->state_u);
    fprintf(f, "%10.3f  %s\n", x->ratio,
            x->failed ? "FAIL" : x->unjudgeable == x->read ? "not judgeable" : "pass");
}

/* The gradients' table, after the forward one, when a case read has
 * reference gradients: one row per gradient. */
static void print_grad_table(FILE *f, const check_report *r)
{
    grad_row rows[CHECK_NGRAD];
    grad_rows(r, rows);
    fprintf(f, "%-10s %6s %9s %11s %12s %10s  %s\n", "gradient", "cases", "not given", "unjudgeable",
            "max err (u)", "max/thr", "result");
    for (int t = 0; t < CHECK_NGRAD; t++) {
        const grad_row *w = &rows[t];
        if (!w->cases) continue;
        fprintf(f, "%-10s %6d %9d %11d ", gate_grad_name(t), w->cases, w->cases - w->given, w->unjudgeable);
        if (!w->given) fprintf(f, "%12s %10s  %s\n", "-", "-", "not given");
        else fprintf(f, "%12.3g %10.3f  %s\n", w->err_u, w->ratio,
                     w->failed ? "FAIL" : w->unjudgeable == w->given ? "not judgeable" : "pass");
    }
    fputc('\n', f);
}

/* The lines that qualify the verdict, before the summary line. */
static void print_notes(FILE *f, const check_report *r, const check_tally *t, const group *g, int ng)
{
    if (t->unjudgeable)
        fprintf(f, "not judgeable in %s: %d case%s whose threshold allows more than 2^-4 relative error "
                "(too loose to tell a wrong result from a right one): neither passed nor failed; judge them in a "
                "smaller unit\n",
                r->unit, t->unjudgeable, t->unjudgeable == 1 ? "" : "s");
    if (t->no_state)
        fprintf(f, "state not given: %d case%s judged on their outputs alone, without state.npy "
                "(--require-state makes that an error)\n", t->no_state, t->no_state == 1 ? "" : "s");
    if (t->no_grad)
        fprintf(f, "gradients not given: %d of %d case%s with reference gradients judged on their forward results "
                "alone, without dq.npy ... (not graded for gradients)\n", t->no_grad, t->grad_cases,
                t->grad_cases == 1 ? "" : "s");
    for (int k = 0; k < ng; k++)
        if (group_identical(&g[k]))
            fprintf(f, "warning: %s %s: every result is " IDENTICAL_WHY "\n", g[k].variant, g[k].form);
    if (t->too_many_skips)
        fprintf(f, "FAIL: %d of %d cases skipped (%.1f%%), more than --max-skipped %g allows\n", t->skip, r->count,
                100.0 * t->skip / r->count, r->max_skipped);
}

/* The summary line; `tail` after the verdict. A run that skipped too many
 * cases fails with no case failed: its line says so first. */
static void print_summary(FILE *f, const check_report *r, const check_tally *t, const char *tail)
{
    fprintf(f, "check (%s units, u = %.3g): %d cases, judged %d of %d", r->unit, r->u, r->count, t->judged, r->count);
    const char *sep = " (";
    if (t->unjudgeable) fprintf(f, "%s%d not judgeable", sep, t->unjudgeable), sep = ", ";
    if (t->no_state) fprintf(f, "%s%d without state.npy", sep, t->no_state), sep = ", ";
    if (t->no_grad) fprintf(f, "%s%d without gradients", sep, t->no_grad), sep = ", ";
    if (*sep == ',') fputc(')', f);
    fprintf(f, ": %d passed, %d failed, %d skipped: %s%s\n", t->pass, t->fail, t->skip,
            t->fail || t->too_many_skips ? "FAILED" : "passed", tail);
}

void check_print(FILE *f, const check_report *r, int verbose)
{
    for (int i = 0; i < r->count; i++)
        if (verbose || r->cases[i].status == CHECK_FAIL) print_case(f, &r->cases[i], r);
    const check_tally t = check_count(r);
    group *g = calloc((size_t)r->count + 1, sizeof *g);
    const int ng = g ? groups_of(r, g) : 0;
    fprintf(f, "\n%-9s %-10s %6s %7s %11s %12s %12s %10s  %s\n", "variant", "form", "cases", "skipped",
            "unjudgeable", "max out (u)", "max S (u)", "max/thr", "result");
    for (int k = 0; k < ng; k++) print_group(f, &g[k]);
    fputc('\n', f);
    if (t.grad_cases) print_grad_table(f, r);
    print_notes(f, r, &t, g, ng);
    free(g);
    check_invariance_print(f, r->inv, r->ninv, 0);
    print_summary(f, r, &t, "");
}

/* ---- one line per case (--format lines) ---- */

/* "<case>: OK|FAIL|SKIP|NOT JUDGEABLE ...": the errors over their thresholds,
 * and for a failure where it went wrong. */
static void print_line(FILE *f, const check_case *c, const check_report *r)
{
    fprintf(f, "%s: ", c->name);
    if (c->status == CHECK_SKIP) {
        fprintf(f, "SKIP ");
        put_one_line(f, c->reason);
        fputc('\n', f);
        return;
    }
    if (c->status == CHECK_UNJUDGEABLE) {
        char why[256];
        unjudgeable_detail(why, sizeof why, c, r);
        fprintf(f, "NOT JUDGEABLE in %s (%s)\n", r->unit, why);
        return;
    }
    fprintf(f, "%s", c->status == CHECK_FAIL ? "FAIL" : "OK");
    if (!c->no_steps) fprintf(f, " out %.3g u / %.3g u", c->out_u, c->thr_out_u);
    if (c->where.seq >= 0)
        fprintf(f, " at t = %lld (packed sequence %lld, its step %lld), head %lld", (long long)c->where.step,
                (long long)c->where.seq, (long long)c->where.seq_step, (long long)c->where.head);
    else if (c->where.step >= 0)
        fprintf(f, " at t = %lld, batch %lld, head %lld", (long long)c->where.step, (long long)c->where.batch,
                (long long)c->where.head);
    if (isnan(c->state_u)) fprintf(f, ", state not given");
    else fprintf(f, "%s S %.3g u / %.3g u", c->no_steps ? "" : ",", c->state_u, c->thr_state_u);
    if (c->status == CHECK_FAIL && c->where.step < 0) fprintf(f, forward_ok(c) ? ": gradients only" : ": state only");
    if (c->grad_ref && !c->grad_given) fprintf(f, ", gradients not given");
    fprintf(f, "%s\n", dtype_hint(c, r));
    for (int t = 0; t < CHECK_NGRAD; t++) { /* one line per gradient given: "<case> dq: OK ..." */
        const check_grad *g = &c->grad[t];
        if (!g->given) continue;
        char err[64];
        grad_err_text(err, sizeof err, g);
        fprintf(f, "%s %s: %s %s / %.3g u (kappa %.3g)\n", c->name, gate_grad_name(t),
                g->status == CHECK_FAIL ? "FAIL" : g->status == CHECK_PASS ? "OK" : "NOT JUDGEABLE", err, g->thr_u,
                g->kappa);
    }
}

void check_print_lines(FILE *f, const check_report *r, int trust_set)
{
    for (int i = 0; i < r->count; i++) print_line(f, &r->cases[i], r);
    check_invariance_print(f, r->inv, r->ninv, 1);
    const check_tally t = check_count(r);
    print_summary(f, r, &t, trust_set ? " (set NOT verified: --trust-set)" : "");
}

/* ---- JSON ---- */

static json_t *number_or_null(double x) { return isfinite(x) ? json_real(x) : json_null(); }

static json_t *case_json(const check_case *c, const check_report *r)
{
    static const char *const status[] = {"pass", "fail", "skip", "unjudgeable"};
    json_t *j = json_object();
    json_object_set_new(j, "name", json_text(c->name));
    json_object_set_new(j, "variant", json_text(c->variant));
    json_object_set_new(j, "form", json_text(c->form));
    json_object_set_new(j, "align", json_text(c->align));
    json_object_set_new(j, "decay", json_text(c->decay));
    json_object_set_new(j, "status", json_string(status[c->status]));
    if (c->status == CHECK_SKIP) json_object_set_new(j, "reason", json_text(c->reason));
    if (c->status == CHECK_UNJUDGEABLE) {
        char why[256];
        unjudgeable_why(why, sizeof why, c, r);
        json_object_set_new(j, "reason", json_text(why));
    }
    const int read = c->status != CHECK_SKIP;
    json_object_set_new(j, "out_u", read ? number_or_null(c->out_u) : json_null());
    json_object_set_new(j, "state_u", read ? number_or_null(c->state_u) : json_null());
    json_object_set_new(j, "state_given", json_boolean(read && !isnan(c->state_u)));
    json_object_set_new(j, "thr_out_u", json_real(c->thr_out_u));
    json_object_set_new(j, "thr_state_u", json_real(c->thr_state_u));
    json_object_set_new(j, "ratio", read ? number_or_null(c->ratio) : json_null());
    json_object_set_new(j, "identical", json_boolean(read && c->identical));
    json_object_set_new(j, "dtype", read && c->dtype ? json_string(c->dtype) : json_null());
    const int at = c->status == CHECK_FAIL && c->where.step >= 0; /* where the outputs went wrong */
    json_object_set_new(j, "first_bad_step", at ? json_integer(c->where.step) : json_null());
    json_object_set_new(j, "first_bad_batch", at ? json_integer(c->where.batch) : json_null());
    json_object_set_new(j, "first_bad_head", at ? json_integer(c->where.head) : json_null());
    json_object_set_new(j, "state_only", json_boolean(c->status == CHECK_FAIL && !at && !forward_ok(c)));
    if (c->grad_ref) { /* a case of a --grad set: each gradient it has, given or not */
        json_t *grads = json_object();
        for (int t = 0; t < CHECK_NGRAD; t++) {
            const check_grad *g = &c->grad[t];
            if (!g->has) continue;
            static const char *const gstatus[] = {"pass", "fail", "not given", "unjudgeable"};
            json_t *e = json_object();
            json_object_set_new(e, "given", json_boolean(read && g->given));
            json_object_set_new(e, "status", json_string(read && g->given ? gstatus[g->status] : "not given"));
            json_object_set_new(e, "err_u", read && g->given ? number_or_null(g->err_u) : json_null());
            json_object_set_new(e, "finite", read && g->given ? json_boolean(g->finite) : json_null());
            json_object_set_new(e, "thr_u", json_real(g->thr_u));
            json_object_set_new(e, "kappa", number_or_null(g->kappa));
            json_object_set_new(grads, gate_grad_name(t), e);
        }
        json_object_set_new(j, "gradients", grads);
        json_object_set_new(j, "gradients_given", json_boolean(read && c->grad_given));
    }
    return j;
}

/* Per gradient over the cases (the gradients' table), when any case has one. */
static json_t *grad_rows_json(const check_report *r)
{
    grad_row rows[CHECK_NGRAD];
    grad_rows(r, rows);
    json_t *a = json_array();
    for (int t = 0; t < CHECK_NGRAD; t++) {
        const grad_row *w = &rows[t];
        if (!w->cases) continue;
        json_t *e = json_object();
        json_object_set_new(e, "gradient", json_string(gate_grad_name(t)));
        json_object_set_new(e, "cases", json_integer(w->cases));
        json_object_set_new(e, "not_given", json_integer(w->cases - w->given));
        json_object_set_new(e, "failed", json_integer(w->failed));
        json_object_set_new(e, "unjudgeable", json_integer(w->unjudgeable));
        json_object_set_new(e, "max_err_u", w->given ? number_or_null(w->err_u) : json_null());
        json_object_set_new(e, "worst_ratio", w->given ? number_or_null(w->ratio) : json_null());
        json_array_append_new(a, e);
    }
    return a;
}

/* A group's maxima are null where nothing was read (every case skipped), or
 * no state was given. */
static json_t *group_json(const group *g)
{
    json_t *j = json_object();
    json_object_set_new(j, "variant", json_text(g->variant));
    json_object_set_new(j, "form", json_text(g->form));
    json_object_set_new(j, "cases", json_integer(g->cases));
    json_object_set_new(j, "failed", json_integer(g->failed));
    json_object_set_new(j, "skipped", json_integer(g->skipped));
    json_object_set_new(j, "unjudgeable", json_integer(g->unjudgeable));
    json_object_set_new(j, "state_not_given", json_integer(g->no_state));
    json_object_set_new(j, "max_out_u", g->read ? json_real(g->out_u) : json_null());
    json_object_set_new(j, "max_state_u", g->read > g->no_state ? json_real(g->state_u) : json_null());
    json_object_set_new(j, "worst_ratio", g->read ? json_real(g->ratio) : json_null());
    json_object_set_new(j, "identical", json_boolean(group_identical(g)));
    return j;
}

char *check_json_text(const check_report *r)
{
    json_t *root = json_object(), *cases = json_array(), *groups = json_array();
    for (int i = 0; i < r->count; i++) json_array_append_new(cases, case_json(&r->cases[i], r));
    group *g = calloc((size_t)r->count + 1, sizeof *g);
    const int ng = g ? groups_of(r, g) : 0;
    for (int k = 0; k < ng; k++) json_array_append_new(groups, group_json(&g[k]));
    free(g);
    const check_tally t = check_count(r);
    json_t *counts = json_object();
    json_object_set_new(counts, "pass", json_integer(t.pass));
    json_object_set_new(counts, "fail", json_integer(t.fail));
    json_object_set_new(counts, "skip", json_integer(t.skip));
    json_object_set_new(counts, "unjudgeable", json_integer(t.unjudgeable));
    json_object_set_new(counts, "state_not_given", json_integer(t.no_state));
    if (t.grad_cases) json_object_set_new(counts, "gradients_not_given", json_integer(t.no_grad));
    if (t.grad_cases) json_object_set_new(root, "gradients", grad_rows_json(r));
    json_object_set_new(root, "format", json_string("falcon-check"));
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "cases_dir", json_text(r->cases_dir));
    json_object_set_new(root, "results_dir", json_text(r->results_dir));
    json_object_set_new(root, "precision", json_string(r->unit));
    json_object_set_new(root, "u", json_real(r->u));
    json_object_set_new(root, "max_relerr", json_real(CHECK_MAX_RELERR));
    json_object_set_new(root, "passed", json_boolean(!check_failed(r)));
    json_object_set_new(root, "judged", json_integer(t.judged));
    json_object_set_new(root, "max_skipped", r->max_skipped >= 0 ? json_real(r->max_skipped) : json_null());
    json_object_set_new(root, "too_many_skipped", json_boolean(t.too_many_skips));
    json_object_set_new(root, "identical_groups", json_integer(t.identical_groups));
    json_object_set_new(root, "counts", counts);
    json_object_set_new(root, "cases", cases);
    json_object_set_new(root, "groups", groups);
    json_object_set_new(root, "batch_invariance", check_invariance_json(r->inv, r->ninv));
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

/* ---- JUnit XML ---- */

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

/* Text with XML's five special characters escaped, control bytes dropped and
 * a byte that is not part of a well-formed UTF-8 character replaced by
 * U+FFFD: the document stays well-formed whatever the text holds. */
static void xml_put(text *t, const char *s)
{
    while (s && *s) {
        const char *rep = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '"' ? "&quot;"
                        : *s == '\'' ? "&apos;" : NULL;
        const int k = utf8_char((const unsigned char *)s);
        if (rep) put(t, rep, strlen(rep));
        else if (!k) put(t, "\xef\xbf\xbd", 3);
        else if ((unsigned char)*s >= 0x20 || *s == '\n' || *s == '\t') put(t, s, (size_t)k);
        s += k ? k : 1;
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

static void junit_case(text *b, const check_case *c, const check_report *r)
{
    xml_raw(b, "    <testcase classname=\"falcon.");
    xml_put(b, c->variant);
    xml_raw(b, ".");
    xml_put(b, c->form);
    xml_raw(b, "\" name=\"");
    xml_put(b, c->name);
    xml_raw(b, "\" time=\"0\">");
    const char *state = c->status != CHECK_SKIP && isnan(c->state_u) ? ", S not given (no state.npy)" : "";
    if (c->status == CHECK_SKIP) {
        xml_raw(b, "<skipped message=\"");
        xml_put(b, c->reason);
        xml_raw(b, "\"/>");
    } else if (c->status == CHECK_UNJUDGEABLE) {
        char why[256];
        unjudgeable_why(why, sizeof why, c, r);
        xml_raw(b, "<skipped message=\"");
        xml_put(b, why);
        xml_raw(b, "\"/><system-out>out %.6g u (threshold %.6g u)%s</system-out>", c->out_u, c->thr_out_u, state);
    } else if (c->status == CHECK_FAIL) {
        char where[128];
        where_text(where, sizeof where, c);
        xml_raw(b, "<failure message=\"error above threshold (%s units): %s\">out %.6g u (threshold %.6g u)",
                r->unit, where, c->out_u, c->thr_out_u);
        if (!isnan(c->state_u)) xml_raw(b, ", S %.6g u (threshold %.6g u)", c->state_u, c->thr_state_u);
        xml_raw(b, "%s%s</failure>", state, dtype_hint(c, r));
    } else {
        xml_raw(b, "<system-out>out %.6g u, max/thr %.4f%s%s</system-out>", c->out_u, c->ratio, state,
                c->identical ? ": identical to the reference bit for bit" : "");
    }
    xml_raw(b, "</testcase>\n");
}

/* The gradients' suite: one test per gradient given (classname
 * falcon.<variant>.<form>.gradients, name "<case> <gradient>"). */
static void junit_grads(text *b, const check_report *r)
{
    grad_row rows[CHECK_NGRAD];
    grad_rows(r, rows);
    int tests = 0, failures = 0, unjudgeable = 0;
    for (int t = 0; t < CHECK_NGRAD; t++) tests += rows[t].given, failures += rows[t].failed,
                                               unjudgeable += rows[t].unjudgeable;
    xml_raw(b, "  <testsuite name=\"gradients\" tests=\"%d\" failures=\"%d\" skipped=\"%d\">\n", tests, failures,
            unjudgeable);
    for (int i = 0; i < r->count; i++) {
        const check_case *c = &r->cases[i];
        for (int t = 0; t < CHECK_NGRAD && c->status != CHECK_SKIP; t++) {
            const check_grad *g = &c->grad[t];
            if (!g->given) continue;
            xml_raw(b, "    <testcase classname=\"falcon.");
            xml_put(b, c->variant);
            xml_raw(b, ".");
            xml_put(b, c->form);
            xml_raw(b, ".gradients\" name=\"");
            xml_put(b, c->name);
            xml_raw(b, " %s\" time=\"0\">", gate_grad_name(t));
            char err[64];
            grad_err_text(err, sizeof err, g);
            if (g->status == CHECK_FAIL)
                xml_raw(b, "<failure message=\"%s above threshold (%s units)\">%s %s (threshold %.6g u, kappa %.4g)"
                        "</failure>", gate_grad_name(t), r->unit, gate_grad_name(t), err, g->thr_u, g->kappa);
            else if (g->status == CHECK_UNJUDGEABLE)
                xml_raw(b, "<skipped message=\"not judgeable in %s: threshold %.3g u\"/>", r->unit, g->thr_u);
            else xml_raw(b, "<system-out>%s %s (threshold %.6g u)</system-out>", gate_grad_name(t), err, g->thr_u);
            xml_raw(b, "</testcase>\n");
        }
    }
    xml_raw(b, "  </testsuite>\n");
}

char *check_junit_text(const check_report *r)
{
    text b = {0};
    put(&b, "", 0);
    const check_tally t = check_count(r);
    xml_raw(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    grad_row rows[CHECK_NGRAD];
    grad_rows(r, rows);
    int gtests = 0, gfail = 0, gunj = 0;
    for (int k = 0; k < CHECK_NGRAD; k++) gtests += rows[k].given, gfail += rows[k].failed, gunj += rows[k].unjudgeable;
    xml_raw(&b, "<testsuites name=\"falcon check (%s units)\" tests=\"%d\" failures=\"%d\" skipped=\"%d\">\n",
            r->unit, r->count + gtests, t.fail + gfail, t.skip + t.unjudgeable + gunj);
    group *g = calloc((size_t)r->count + 1, sizeof *g);
    const int ng = g ? groups_of(r, g) : 0;
    for (int k = 0; k < ng; k++) {
        xml_raw(&b, "  <testsuite name=\"");
        xml_put(&b, g[k].variant);
        xml_raw(&b, ".");
        xml_put(&b, g[k].form);
        xml_raw(&b, "\" tests=\"%d\" failures=\"%d\" skipped=\"%d\">\n", g[k].cases, g[k].failed,
                g[k].skipped + g[k].unjudgeable);
        for (int i = 0; i < r->count; i++) {
            const check_case *c = &r->cases[i];
            if (!strcmp(c->variant, g[k].variant) && !strcmp(c->form, g[k].form)) junit_case(&b, c, r);
        }
        if (group_identical(&g[k])) xml_raw(&b, "    <system-out>warning: " IDENTICAL_WHY "</system-out>\n");
        xml_raw(&b, "  </testsuite>\n");
    }
    free(g);
    if (gtests) junit_grads(&b, r);
    xml_raw(&b, "</testsuites>\n");
    if (b.oom) {
        free(b.b);
        return NULL;
    }
    return b.b;
}
