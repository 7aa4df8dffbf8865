/*
 * falcon: run a Falcon recurrence on .npy files, or run the accuracy gate.
 *
 *   falcon run --variant V --form F --q FILE ... --out FILE   (cli/run_cmd.c)
 *   falcon grad --variant V --form F --q FILE ... --dO FILE --out DIR (cli/grad_cmd.c)
 *   falcon verify [gate options]                              (gate/gate-main.c)
 *   falcon compare A.json B.json [C.json ...] [--out FILE]    (bench/compare.c)
 *   falcon stability [study options]                          (study/stability.c)
 *   falcon cases export DIR [options]                         (grade/export.c)
 *   falcon check DIR --results RDIR [options]                 (grade/check.c)
 *   falcon --help | --version
 *
 * Every failure prints one line "falcon: error: <message>" on stderr and
 * exits with status 2; success prints nothing unless asked (--verbose).
 */
#include <stdio.h>
#include <string.h>
#include "cli.h"
#include "../gate/gate.h"
#include "../bench/compare.h"
#include "../study/stability.h"
#include "../grade/grade.h"
#include "falcon_io.h"

static void print_usage(FILE *f)
{
    fprintf(f, "usage: falcon run --variant V --form F --q FILE --k FILE --v FILE --beta FILE\n"
               "                  --out FILE [options]\n"
               "       falcon grad --variant V --form F --q FILE --k FILE --v FILE --beta FILE\n"
               "                   --dO FILE --out DIR [options]\n"
               "       falcon verify [--profile quick|full] [--backend B] [--variant V]\n"
               "                     [--form F] [--precision P] [--json FILE] ...\n"
               "       falcon compare A.json B.json [C.json ...] [--out FILE]\n"
               "       falcon stability [--profile quick|full|huge|deep] [--shard K/N] ...\n"
               "       falcon cases export DIR [--profile quick|full] [filters] [--layout L]\n"
               "       falcon check DIR --results RDIR [--precision P] [--json F] [--junit F]\n"
               "                    [--trust-set]\n"
               "       falcon --help | --version\n\n"
               "  run        run a Falcon recurrence on .npy inputs (options: falcon run --help)\n"
               "  grad       the gradients of a run's inputs and carried state for given\n"
               "             cotangents (options: falcon grad --help)\n"
               "  verify     the accuracy gate against the MPFR reference, as a table (quick\n"
               "             profile by default, --profile full: the whole case table)\n"
               "  compare    benchmark result files (falcon-bench JSON) case by case: two side\n"
               "             by side, or N machines with geometric means\n"
               "  stability  the long-sequence error study (--learning: the learning curves);\n"
               "             falcon-study stability is the same command, without the CLI\n"
               "  cases      export the gate's cases with MPFR references and thresholds, to\n"
               "             grade any implementation (falcon cases export --help)\n"
               "  check      judge an implementation's results on an exported case set\n");
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
        printf("falcon %s\n", falcon_version());
        return 0;
    }
    if (!strcmp(cmd, "run")) return cli_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "grad")) return cli_grad(argc - 1, argv + 1);
    if (!strcmp(cmd, "verify")) return falcon_gate_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "compare")) return falcon_compare_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "stability")) return falcon_stability_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "check")) {
        falcon_outputs_clean_on_signals(); /* its reports are output transactions */
        return falcon_grade_check_main(argc - 1, argv + 1);
    }
    if (!strcmp(cmd, "cases")) {
        if (argc > 2 && !strcmp(argv[2], "export")) {
            falcon_grade_export_catch_signals();
            return falcon_grade_export_main(argc - 2, argv + 2);
        }
        if (argc > 2 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) {
            printf("usage: falcon cases export DIR [options] (falcon cases export --help)\n");
            return 0;
        }
        return cli_error("cases: the subcommand is export (falcon cases export DIR)");
    }
    return cli_error("unknown command '%s' (see falcon --help)", cmd);
}
