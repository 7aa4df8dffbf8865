// gbench-shim.cc: the only C++ of bench/. It forwards the C API of
// gbench-shim.h to Google Benchmark and holds main(); everything measured is
// C (bench/cases.c). Kept minimal so it builds against any Google Benchmark
// >= 1.7 (Debian 12 ships 1.7.1).
#include <benchmark/benchmark.h>

#include "gbench-shim.h"

namespace {

benchmark::State &S(fb_state *st) { return *reinterpret_cast<benchmark::State *>(st); }

void help()
{
    benchmark::PrintDefaultHelp();
    fb_usage();
}

}  // namespace

extern "C" int fb_register(const char *name, fb_fn fn, void *user)
{
    if (!name || !fn) return -1;
    benchmark::RegisterBenchmark(name, [fn, user](benchmark::State &st) {
        fn(reinterpret_cast<fb_state *>(&st), user);
    })->UseRealTime()->Unit(benchmark::kMillisecond);
    return 0;
}

extern "C" int fb_state_keep_running(fb_state *st) { return S(st).KeepRunning(); }

extern "C" int64_t fb_state_iterations(const fb_state *st)
{
    return reinterpret_cast<const benchmark::State *>(st)->iterations();
}

extern "C" void fb_state_set_counter(fb_state *st, const char *name, double value, unsigned flags)
{
    // Explicit mapping: the C flag values are ours, not the library's.
    int f = benchmark::Counter::kDefaults;
    if (flags & FB_RATE) f |= benchmark::Counter::kIsRate;
    if (flags & FB_ITER_INVARIANT) f |= benchmark::Counter::kIsIterationInvariant;
    if (flags & FB_AVG_ITERATIONS) f |= benchmark::Counter::kAvgIterations;
    if (flags & FB_INVERT) f |= benchmark::Counter::kInvert;
    S(st).counters[name] = benchmark::Counter(value, static_cast<benchmark::Counter::Flags>(f));
}

extern "C" void fb_state_skip_with_error(fb_state *st, const char *msg) { S(st).SkipWithError(msg); }
extern "C" void fb_add_context(const char *key, const char *value) { benchmark::AddCustomContext(key, value); }

int main(int argc, char **argv)
{
    benchmark::Initialize(&argc, argv, help);  // takes the --benchmark_* flags
    int rc = fb_setup(&argc, argv);            // takes ours, registers, probes
    if (rc >= 0) return rc;
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    fb_teardown();
    return 0;
}
