/*
 * compare.h: `falcon compare A.json B.json [--out FILE]`, two Google
 * Benchmark JSON files (from build/falcon-bench) side by side per case.
 */
#ifndef FALCON_BENCH_COMPARE_H
#define FALCON_BENCH_COMPARE_H

/* argv[0] is the command's name (ignored), then the arguments. Returns 0,
 * or 2 on bad usage, an unreadable or malformed file (message on stderr). */
int falcon_compare_main(int argc, char **argv);

#endif
