/*
 * falcon: run a Falcon recurrence on .npy files, or run the accuracy gate.
 *
 *   falcon run --variant V --form F --q FILE ... --out FILE   (cli/run_cmd.c)
 *   falcon verify [gate options]                              (verify/gate-main.c)
 *   falcon --help | --version
 *
 * Every failure prints one line "falcon: error: <message>" on stderr and
 * exits with status 2; success prints nothing unless asked (--verbose).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "../verify/gate.h"

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
    fprintf(stderr, "falcon: error: %s\n", msg);
    return CLI_FAIL;
}

static void print_usage(FILE *f)
{
    fprintf(f, "usage: falcon run --variant V --form F --q FILE --k FILE --v FILE --beta FILE --out FILE [options]\n"
               "       falcon verify [gate options]\n"
               "       falcon --help | --version\n\n"
               "  run      run a Falcon recurrence on .npy inputs (falcon run --help for the options)\n"
               "  verify   run the accuracy gate's quick profile and print its table\n");
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : NULL;
    if (!cmd) return cli_error("no command given (see falcon --help)");
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        print_usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) {
        printf("falcon %s\n", FALCON_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "run")) return cli_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "verify")) return falcon_gate_main(argc - 1, argv + 1);
    return cli_error("unknown command '%s' (see falcon --help)", cmd);
}
