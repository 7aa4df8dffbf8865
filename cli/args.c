/*
 * Options of `falcon run`: one table drives parsing and --help, so the two
 * cannot drift apart. The syntax (--name VALUE, --name=VALUE, flags, and
 * the words about it) is the scanner every command shares (util/opts.c).
 * Values are checked for syntax here (a number that is not one, an unknown
 * name); their ranges are the library's to check, so the command and the
 * API reject the same configurations with the same words.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

typedef enum { K_ENUM, K_INT64, K_INT, K_REAL, K_PATH, K_FLAG } opt_kind;

/* The enum names come from the library: these adapt its name functions to
 * one signature so that the table can list the choices. */
static const char *variant_name(int i) { return falcon_variant_name((falcon_variant)i); }
static const char *form_name(int i) { return falcon_form_name((falcon_form)i); }
static const char *backend_name(int i) { return falcon_backend_name((falcon_backend)i); }
static const char *precision_name(int i) { return falcon_precision_name((falcon_precision)i); }
static const char *align_name(int i) { return falcon_align_name((falcon_align)i); }
static const char *phi_name(int i) { return falcon_phi_name((falcon_phi)i); }

static const char *const layout_names[CLI_NUM_LAYOUTS] = {"falcon", "fla", "bhtd"};
static const char *layout_name(int i) { return i >= 0 && i < CLI_NUM_LAYOUTS ? layout_names[i] : "unknown"; }
static int layout_parse(const char *s)
{
    for (int i = 0; i < CLI_NUM_LAYOUTS; i++)
        if (!strcmp(s, layout_names[i])) return i;
    return -1;
}

typedef struct opt_spec {
    const char *name;
    opt_kind kind;
    size_t offset;                /* of the field in cli_run_args */
    int required;
    const char *meta, *help;
    const char *(*name_of)(int);  /* K_ENUM: the names of 0, 1, ... */
    int (*parse)(const char *);   /* K_ENUM: name -> value, -1 if unknown */
} opt_spec;

#define AT(field) offsetof(cli_run_args, field)
static const opt_spec specs[] = {
    {"variant", K_ENUM, AT(variant), 1, NULL, "the recurrence", variant_name, falcon_variant_parse},
    {"form", K_ENUM, AT(form), 1, NULL, "how it is evaluated", form_name, falcon_form_parse},
    {"backend", K_ENUM, AT(backend), 0, NULL, "kernels to use (default auto: the best here)", backend_name,
     falcon_backend_parse},
    {"precision", K_ENUM, AT(precision), 0, NULL, "arithmetic and output dtype (default fp32)", precision_name,
     falcon_precision_parse},
    {"align", K_ENUM, AT(align), 0, NULL, "which pair a step learns (default prefix)", align_name,
     falcon_align_parse},
    {"phi", K_ENUM, AT(phi), 0, NULL, "feature map of keys and queries (default identity)", phi_name,
     falcon_phi_parse},
    {"window", K_INT64, AT(window), 0, "W", "rehearsal window, falcon3/falcon3a only (default 1)", NULL, NULL},
    {"chunk", K_INT64, AT(chunk), 0, "C", "chunk size of the chunk form, or auto (the default: picked from n, m and "
     "the window)", NULL, NULL},
    {"eps", K_REAL, AT(eps), 0, "E", "normaliser floor, > 0 (default 1e-6)", NULL, NULL},
    {"threads", K_INT, AT(threads), 0, "N", "threads over heads (default 0: OpenMP's choice)", NULL, NULL},
    {"mpfr-bits", K_INT, AT(mpfr_bits), 0, "B", "precision of the mpfr backend (default 256)", NULL, NULL},
    {"segment", K_INT64, AT(segment), 0, "S", "steps per segment: inputs are read and the output written S "
     "steps at a time, the state carried (default: about 32 MiB of buffers, a multiple of the chunk or "
     "block)", NULL, NULL},
    {"layout", K_ENUM, AT(layout), 0, NULL, "batched arrays: falcon [B,T,H,D], state [B,H,m,n] (the default); "
     "fla: inputs as falcon, --state-out [B,H,n,m] (the transpose) and the reads times --scale; bhtd: "
     "head-first q, k, v, gain [B,H,T,D], beta, alpha [B,H,T], --out [B,H,T,m], state as falcon",
     layout_name, layout_parse},
    {"scale", K_REAL, AT(scale), 0, "S", "--layout fla only: the reads are scale * phi(q)^T h, rounded once "
     "(default 1/sqrt(n))", NULL, NULL},
    {"q", K_PATH, AT(q), 1, "FILE", "queries [T,n] or [B,T,H,n]", NULL, NULL},
    {"k", K_PATH, AT(k), 1, "FILE", "keys, shaped as q", NULL, NULL},
    {"v", K_PATH, AT(v), 1, "FILE", "values [T,m] or [B,T,H,m]", NULL, NULL},
    {"beta", K_PATH, AT(beta), 1, "FILE", "step sizes [T] or [B,T,H]", NULL, NULL},
    {"alpha", K_PATH, AT(alpha), 0, "FILE", "decays in (0, 1], shaped as beta (default: none)", NULL, NULL},
    {"gain", K_PATH, AT(gain), 0, "FILE", "per-column gains, shaped as q (falcon2/falcon2a)", NULL, NULL},
    {"out", K_PATH, AT(out), 1, "FILE", "reads [T,m] or [B,T,H,m], in the run's precision", NULL, NULL},
    {"state-out", K_PATH, AT(state_out), 0, "FILE", "final memory [m,n] or [B,H,m,n]", NULL, NULL},
    {"checkpoint-in", K_PATH, AT(ckpt_in), 0, "DIR", "carried state to start from", NULL, NULL},
    {"checkpoint-out", K_PATH, AT(ckpt_out), 0, "DIR", "save the final carried state", NULL, NULL},
    {"verbose", K_FLAG, AT(verbose), 0, NULL, "print backend, sizes and time on stdout", NULL, NULL},
    {"progress", K_FLAG, AT(progress), 0, NULL, "report progress on stderr, a line about every second "
     "(default: only when stderr is a terminal, and only after the run has taken a second); without "
     "--segment the run is then split into short segments at the form's block: the CPU backends' results are unchanged bit "
     "for bit, the mpfr backend's to rounding (its state carried in double between segments)",
     NULL, NULL},
    {"help", K_FLAG, AT(help), 0, NULL, "this text", NULL, NULL},
};
#define NUM_SPECS ((int)(sizeof specs / sizeof specs[0]))

/* `falcon grad`'s own options; its --out replaces the run's. */
static const opt_spec grad_specs[] = {
    {"dO", K_PATH, AT(dO), 1, "FILE", "cotangent of the reads, shaped as the reads: [T,m] or [B,T,H,m]", NULL, NULL},
    {"dS", K_PATH, AT(dS), 0, "FILE", "cotangent of the final memory, [m,n] or [B,H,m,n] (default 0)", NULL, NULL},
    {"out", K_PATH, AT(out), 1, "DIR", "directory of the gradients, one .npy per input: dq, dk, dv, dbeta, "
     "dalpha (with --alpha), dgain (with --gain), dS0, and with --checkpoint-in dprev_key, dhist_k, dhist_v "
     "(written together, or not at all)", NULL, NULL},
};
#define NUM_GRAD_SPECS ((int)(sizeof grad_specs / sizeof grad_specs[0]))

/* The run's options `falcon grad` does not take: it reads whole arrays in
 * the library's layout and writes gradients, not a state. */
static int grad_skips(const opt_spec *s)
{
    static const char *const skipped[] = {"segment", "layout", "scale", "out", "state-out", "checkpoint-out",
                                          "progress"};
    for (size_t i = 0; i < sizeof skipped / sizeof skipped[0]; i++)
        if (!strcmp(s->name, skipped[i])) return 1;
    return 0;
}

/* The options of `cmd`, in help order, into tab; returns how many. */
static int command_specs(cli_command cmd, const opt_spec **tab)
{
    int count = 0;
    for (int i = 0; i < NUM_SPECS; i++)
        if (cmd == CLI_CMD_RUN || !grad_skips(&specs[i])) tab[count++] = &specs[i];
    if (cmd == CLI_CMD_GRAD)
        for (int i = 0; i < NUM_GRAD_SPECS; i++) tab[count++] = &grad_specs[i];
    return count;
}
#define MAX_SPECS (NUM_SPECS + NUM_GRAD_SPECS)

static void *field(cli_run_args *a, const opt_spec *s) { return (char *)a + s->offset; }

/* "{a,b,c}" from the library's names. */
static const char *choices(const opt_spec *s, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "{");
    for (int i = 0; used < size && strcmp(s->name_of(i), "unknown") != 0; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? "," : "", s->name_of(i));
    if (used < size) snprintf(buf + used, size - used, "}");
    return buf;
}

/* Help text is wrapped at this many columns. */
#define HELP_WIDTH 80
#define HELP_INDENT 24 /* where descriptions start */

/* Prints text from column `col` (the cursor's), words wrapped before
 * HELP_WIDTH and continued at column `indent`. */
static void wrap(FILE *f, const char *text, int col, int indent)
{
    while (*text) {
        while (*text == ' ') text++;
        const size_t word = strcspn(text, " ");
        if (!word) break;
        if (col > indent && col + 1 + (int)word > HELP_WIDTH) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        }
        fprintf(f, "%.*s", (int)word, text);
        col += (int)word;
        text += word;
    }
    fputc('\n', f);
}

void cli_print_run_help(FILE *f) { cli_print_help(f, CLI_CMD_RUN); }

void cli_print_help(FILE *f, cli_command cmd)
{
    char list[160], meta[200], help[400];
    const opt_spec *tab[MAX_SPECS];
    const int count = command_specs(cmd, tab);
    if (cmd == CLI_CMD_RUN)
        fprintf(f, "usage: falcon run --variant V --form F --q FILE --k FILE --v FILE --beta FILE\n"
                   "                  --out FILE [options]\n\n");
    else
        fprintf(f, "usage: falcon grad --variant V --form F --q FILE --k FILE --v FILE --beta FILE\n"
                   "                   --dO FILE --out DIR [options]\n\n");
    wrap(f, "Inputs are .npy float16/float32/float64 files (little-endian), converted to the run's precision; q with 2 dimensions "
            "is one sequence, with 4 a [B,T,H,n] batch. Outputs are written only when the whole run "
            "succeeded.", 0, 0);
    if (cmd == CLI_CMD_GRAD)
        wrap(f, "falcon grad differentiates L = <O, dO> + <S_T, dS> (docs/math.md section 12): the gradients "
                "of the run's inputs in its precision, the carried state's in float64.", 0, 0);
    fputc('\n', f);
    for (int i = 0; i < count; i++) {
        const opt_spec *s = tab[i];
        const int col = snprintf(meta, sizeof meta, "  --%s%s%s", s->name, s->meta || s->name_of ? " " : "",
                                 s->name_of ? choices(s, list, sizeof list) : s->meta ? s->meta : "");
        snprintf(help, sizeof help, "%s%s", s->help, s->required ? " (required)" : "");
        /* A long option (a list of choices) gets its description on the next line. */
        if (col + 1 > HELP_INDENT) fprintf(f, "%s\n%*s", meta, HELP_INDENT, "");
        else fprintf(f, "%s%*s", meta, HELP_INDENT - col, "");
        wrap(f, help, HELP_INDENT, HELP_INDENT);
    }
}

static void set_defaults(cli_run_args *a)
{
    falcon_config d;
    falcon_config_default(&d);
    memset(a, 0, sizeof *a);
    a->variant = a->form = -1;
    a->backend = (int)d.backend;
    a->precision = (int)d.precision;
    a->align = (int)d.align;
    a->phi = (int)d.phi;
    a->window = d.window;
    a->chunk = d.chunk;
    a->threads = d.threads;
    a->mpfr_bits = d.mpfr_bits;
    a->eps = d.eps;
}

falcon_config cli_config(const cli_run_args *a)
{
    falcon_config c;
    falcon_config_default(&c);
    c.variant = (falcon_variant)a->variant;
    c.form = (falcon_form)a->form;
    c.backend = (falcon_backend)a->backend;
    c.precision = (falcon_precision)a->precision;
    c.align = (falcon_align)a->align;
    c.phi = (falcon_phi)a->phi;
    c.window = a->window;
    c.chunk = a->chunk;
    c.threads = a->threads;
    c.mpfr_bits = a->mpfr_bits;
    c.eps = a->eps;
    return c;
}

/* A whole-string number: no leading space, no trailing junk ("12x"). */
static int parse_number(const opt_spec *s, const char *text, int64_t *i, double *x)
{
    char *end = NULL;
    errno = 0;
    if (*text && !isspace((unsigned char)*text)) {
        if (i) *i = strtoll(text, &end, 10);
        else *x = strtod(text, &end);
    }
    if (!end || *end != '\0')
        return cli_error("--%s: '%s' is not %s", s->name, text, i ? "an integer" : "a number");
    /* strtod reports a subnormal result as ERANGE too: it is a number all
     * the same (eps = 1e-320 is > 0 in fp64); only overflow and a total
     * underflow to 0 are out of range. */
    if (errno == ERANGE && (i || !isfinite(*x) || *x == 0))
        return cli_error("--%s: '%s' is out of range", s->name, text);
    return 0;
}

static int set_value(cli_run_args *a, const opt_spec *s, const char *text)
{
    char list[160];
    int64_t i;
    switch (s->kind) {
    case K_ENUM:
        if ((*(int *)field(a, s) = s->parse(text)) < 0)
            return cli_error("--%s: unknown value '%s' (choose one of %s)", s->name, text, choices(s, list, sizeof list));
        return 0;
    case K_INT64:
        if (s->offset == AT(chunk) && !strcmp(text, "auto")) {
            *(int64_t *)field(a, s) = FALCON_CHUNK_AUTO;
            return 0;
        }
        return parse_number(s, text, field(a, s), NULL);
    case K_INT:
        if (parse_number(s, text, &i, NULL)) return CLI_FAIL;
        if (i < INT_MIN || i > INT_MAX) return cli_error("--%s: '%s' is out of range", s->name, text);
        *(int *)field(a, s) = (int)i;
        return 0;
    case K_REAL:
        return parse_number(s, text, NULL, field(a, s));
    case K_PATH:
        if (!*text) return cli_error("--%s: the path is empty", s->name);
        *(const char **)field(a, s) = text;
        return 0;
    case K_FLAG:
        *(int *)field(a, s) = 1;
        return 0;
    }
    return 0;
}

/* The scanner's id of an option: its index in the command's table + 1. */
static int spec_id(const opt_spec *const *tab, int count, const char *name)
{
    int i = 0;
    while (i < count && strcmp(tab[i]->name, name) != 0) i++;
    return i + 1;
}

int cli_parse_run(int argc, char **argv, cli_run_args *a) { return cli_parse_args(argc, argv, CLI_CMD_RUN, a); }

int cli_parse_args(int argc, char **argv, cli_command cmd, cli_run_args *a)
{
    const opt_spec *tab[MAX_SPECS];
    const int count = command_specs(cmd, tab);
    opt_def defs[MAX_SPECS + 1] = {{0}};
    for (int i = 0; i < count; i++) defs[i] = (opt_def){tab[i]->name, i + 1, tab[i]->kind != K_FLAG};
    opt_scan sc;
    opt_begin(&sc, argc, argv, cmd == CLI_CMD_RUN ? "falcon run" : "falcon grad", defs, OPT_ONCE);
    set_defaults(a);
    for (int id; (id = opt_next(&sc)) != OPT_END;)
        if (id < 0 || set_value(a, tab[id - 1], sc.value ? sc.value : "")) return CLI_FAIL;
    if (a->help) return 0;
    if (a->segment < 0 || (a->segment == 0 && opt_given(&sc, spec_id(tab, count, "segment"))))
        return cli_error("--segment = %lld: must be >= 1 (steps per segment)", (long long)a->segment);
    if (opt_given(&sc, spec_id(tab, count, "scale"))) {
        if (a->layout != CLI_LAYOUT_FLA)
            return cli_error("--scale applies to --layout fla only (the reads of the other layouts are unscaled)");
        if (!(a->scale > 0) || !isfinite(a->scale))
            return cli_error("--scale = %g: must be finite and > 0", a->scale);
    }
    for (int i = 0; i < count; i++)
        if (tab[i]->required && !opt_given(&sc, i + 1))
            return cli_error("missing required option --%s (see %s --help)", tab[i]->name,
                             cmd == CLI_CMD_RUN ? "falcon run" : "falcon grad");
    if (falcon_variant_has_gain((falcon_variant)a->variant) && !a->gain)
        return cli_error("--gain is required by %s: per-column gains shaped as q",
                         falcon_variant_name((falcon_variant)a->variant));
    return 0;
}
