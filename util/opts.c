/* The tools' option scanner and error line (see opts.h). */
#include <stdarg.h>
#include <string.h>
#include "opts.h"

static FILE *error_stream; /* NULL: stderr */
static int progress_open;  /* a progress line without its newline is on stderr */

void cli_set_error_stream(FILE *f) { error_stream = f; }
void cli_progress_line(int open) { progress_open = open; }

int cli_error(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* One line, whatever a library message or a file name contains. */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    if (progress_open && !error_stream) fputc('\n', stderr);
    progress_open = 0;
    fprintf(error_stream ? error_stream : stderr, "falcon: error: %s\n", msg);
    return CLI_FAIL;
}

void opt_begin(opt_scan *s, int argc, char **argv, const char *cmd, const opt_def *defs, int flags)
{
    memset(s, 0, sizeof *s);
    s->argc = argc, s->argv = argv, s->next = 1, s->cmd = cmd, s->defs = defs, s->flags = flags;
}

int opt_given(const opt_scan *s, int id)
{
    for (int k = 0; s->defs[k].name && k < 64; k++)
        if (s->defs[k].id == id) return (int)(s->seen >> k & 1);
    return 0;
}

/* Optimal-string-alignment distance between a[0..la) and b[0..lb): edits,
 * and swaps of two neighbours, each 1. Names are short (< 32). */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
    enum { MAX = 32 };
    size_t d[MAX + 1][MAX + 1];
    if (la > MAX || lb > MAX) return MAX;
    for (size_t i = 0; i <= la; i++) d[i][0] = i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

/* The option a mistyped name most likely meant: the closest within two
 * edits (one for names of up to four letters), or NULL. */
static const char *closest_option(const opt_def *defs, const char *name, size_t len)
{
    const char *best = NULL;
    size_t best_d = len <= 4 ? 2 : 3;
    for (int k = 0; defs[k].name; k++) {
        const size_t d = edit_distance(name, len, defs[k].name, strlen(defs[k].name));
        if (d < best_d) best = defs[k].name, best_d = d;
    }
    return best;
}

int opt_next(opt_scan *s)
{
    s->opt = NULL, s->value = NULL;
    if (s->next >= s->argc) return OPT_END;
    const char *arg = s->argv[s->next++];
    if (arg[0] != '-' || !arg[1]) {
        s->value = arg;
        if (s->flags & OPT_POSITIONALS) return OPT_POSITIONAL;
        cli_error("unexpected argument '%s' (see %s --help)", arg, s->cmd);
        return OPT_ERROR;
    }
    if (!strcmp(arg, "-h")) arg = "--help";
    const char *eq = strchr(arg, '=');
    const size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
    int k = 0;
    if (arg[1] == '-')
        while (s->defs[k].name && !(strlen(s->defs[k].name) == len - 2 && !strncmp(s->defs[k].name, arg + 2, len - 2)))
            k++;
    const opt_def *d = arg[1] == '-' ? &s->defs[k] : NULL;
    if (!d || !d->name) {
        const char *guess = arg[1] == '-' ? closest_option(s->defs, arg + 2, len - 2) : NULL;
        if (guess) cli_error("unknown option '%.*s': did you mean --%s? (see %s --help)", (int)len, arg, guess, s->cmd);
        else cli_error("unknown option '%.*s' (see %s --help)", (int)len, arg, s->cmd);
        return OPT_ERROR;
    }
    if ((s->flags & OPT_ONCE) && k < 64 && (s->seen >> k & 1)) {
        cli_error("--%s given twice", d->name);
        return OPT_ERROR;
    }
    if (k < 64) s->seen |= 1ull << k;
    s->opt = d;
    if (!d->takes_value) {
        if (!eq) return d->id;
        cli_error("--%s takes no value", d->name);
        return OPT_ERROR;
    }
    if (eq) s->value = eq + 1;
    else if (s->next < s->argc) s->value = s->argv[s->next++];
    else {
        cli_error("--%s needs a value (see %s --help)", d->name, s->cmd);
        return OPT_ERROR;
    }
    return d->id;
}
