/* build/falcon-study: the study's commands without the CLI (mk/study.mk):
 *   falcon-study stability [options]   falcon-study bench-dat [options] */
#include <stdio.h>
#include <string.h>
#include "stability.h"

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "stability")) return falcon_stability_main(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "bench-dat")) return falcon_benchdat_main(argc - 1, argv + 1);
    fprintf(stderr, "usage: falcon-study stability|bench-dat [options] (--help for each)\n");
    return 2;
}
