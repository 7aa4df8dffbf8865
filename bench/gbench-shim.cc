// gbench-shim.cc: the only C++ of bench/. It forwards the C API of
// gbench-shim.h to Google Benchmark and holds main(); everything measured is
// C (bench/cases.c). Kept minimal so it builds against any Google Benchmark
// >= 1.7 (Debian 12 ships 1.7.1).
#include <benchmark/benchmark.h>

#include <cctype>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gbench-shim.h"

namespace {

benchmark::State &S(fb_state *st) { return *reinterpret_cast<benchmark::State *>(st); }

void help()
{
    benchmark::PrintDefaultHelp();
    fb_usage();
}

// The value of Google Benchmark's flag --NAME=V in argv, else of its
// environment variable (NAME in capitals, which the library also reads),
// else dflt.
std::string flag_value(int argc, char **argv, const char *name, const char *dflt)
{
    const std::string prefix = std::string("--") + name + "=";
    std::string value;
    bool found = false;
    for (int i = 1; i < argc; i++)
        if (std::string(argv[i]).compare(0, prefix.size(), prefix) == 0) value = argv[i] + prefix.size(), found = true;
    if (found) return value;
    std::string env(name);
    for (char &c : env) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const char *e = std::getenv(env.c_str());
    return e && *e ? e : dflt;
}

// A boolean flag as Google Benchmark reads one: bare ("--name"), or a value
// whose truth it takes from the first letters ("true", "yes", "on", "1").
bool flag_true(int argc, char **argv, const char *name)
{
    const std::string bare = std::string("--") + name;
    for (int i = 1; i < argc; i++)
        if (bare == argv[i]) return true;
    std::string v = flag_value(argc, argv, name, "false");
    for (char &c : v) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return v == "1" || v == "t" || v == "y" || v == "true" || v == "yes" || v == "on";
}

// The file's reporter: Google Benchmark names a case given repetitions of
// its own ".../repeats:N" (falcon-bench --scalar-reps); the file keeps the
// name the case has in every other run, so that the report's tables,
// `falcon compare` and the baselines find it (its "repetitions" says N).
class SameNames : public benchmark::BenchmarkReporter
{
  public:
    explicit SameNames(benchmark::BenchmarkReporter *inner) : inner_(inner) {}
    bool ReportContext(const Context &context) override
    {
        inner_->SetOutputStream(&GetOutputStream());
        inner_->SetErrorStream(&GetErrorStream());
        return inner_->ReportContext(context);
    }
    void ReportRuns(const std::vector<Run> &runs) override
    {
        std::vector<Run> same(runs);
        for (Run &r : same) r.run_name.repetitions.clear();
        inner_->ReportRuns(same);
    }
    void Finalize() override { inner_->Finalize(); }

  private:
    std::unique_ptr<benchmark::BenchmarkReporter> inner_;
};

}  // namespace

extern "C" int fb_register_reps(const char *name, fb_fn fn, void *user, int repetitions)
{
    if (!name || !fn || repetitions < 0) return -1;
    auto *b = benchmark::RegisterBenchmark(name, [fn, user](benchmark::State &st) {
        fn(reinterpret_cast<fb_state *>(&st), user);
    })->UseRealTime()->Unit(benchmark::kMillisecond);
    if (repetitions > 0) b->Repetitions(repetitions);
    return 0;
}

extern "C" int fb_register(const char *name, fb_fn fn, void *user) { return fb_register_reps(name, fn, user, 0); }

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
    // The protocol, for `falcon compare` to check that two files measured
    // the same statistic (read before Initialize takes the flags away).
    const std::string reps = flag_value(argc, argv, "benchmark_repetitions", "1");
    const std::string min_time = flag_value(argc, argv, "benchmark_min_time", "0.5");
    const bool interleaved = flag_true(argc, argv, "benchmark_enable_random_interleaving");
    if (int rc = fb_out_begin(&argc, &argv)) return rc;
    const bool to_file = !flag_value(argc, argv, "benchmark_out", "").empty();
    const std::string out_format = flag_value(argc, argv, "benchmark_out_format", "json");
    benchmark::Initialize(&argc, argv, help);  // takes the --benchmark_* flags
    benchmark::AddCustomContext("falcon_repetitions", reps);
    benchmark::AddCustomContext("falcon_min_time", min_time);
    benchmark::AddCustomContext("falcon_interleaved", interleaved ? "true" : "false");
    int rc = fb_setup(&argc, argv);            // takes ours, registers, probes
    if (rc >= 0) return rc;
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
    // --out and --benchmark_out write JSON (the default format) with the
    // names kept; another --benchmark_out_format is the library's own.
    SameNames file(new benchmark::JSONReporter());
    const size_t ran = to_file && out_format == "json" ? benchmark::RunSpecifiedBenchmarks(nullptr, &file)
                                                        : benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    fb_teardown();
    return fb_out_end(ran);
}
