/* build/falcon-study: the study's commands without the CLI (mk/study.mk):
 *   falcon-study stability [options]   falcon-study merge [--out DIR] DIR...
 *   falcon-study bench-dat [options]
 * `falcon-study stability` is `falcon stability`: both call
 * falcon_stability_main (study/stability.c), the one implementation, so the
 * options, outputs and messages are the same; this program only spares the
 * study's users (make stability, make report, Slurm jobs) the CLI's
 * dependencies. */
#include <stdio.h>
#include <string.h>
#include "falcon.h"
#include "stability.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: falcon-study stability [options]             (falcon-study stability --help)\n"
               "       falcon-study merge [--out DIR] SHARD_DIR...  (falcon-study merge --help)\n"
               "       falcon-study bench-dat BENCH.json --out DIR   (falcon-study bench-dat --help)\n\n"
               "  stability  the long-sequence error study; with --learning, the learning curves\n"
               "             (the same command as falcon stability: same options and outputs)\n"
               "  merge      the shards of a study (stability --shard K/N) into its outputs\n"
               "  bench-dat  falcon-bench JSON to the data files of the benchmark plots\n");
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--version")) {
        printf("falcon-study %s\n", falcon_version());
        return 0;
    }
    if (argc > 1 && !strcmp(argv[1], "stability")) return falcon_stability_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "merge")) return falcon_stability_merge_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "bench-dat")) return falcon_benchdat_main(argc - 1, argv + 1);
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help"))) {
        usage(stdout);
        return 0;
    }
    if (argc > 1) fprintf(stderr, "falcon-study: error: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
