/*
 * Fuzzing `falcon run`'s argument parsing (cli/args.c) without running: the
 * input is the argument list, NUL-separated. cli_parse_run only parses (no
 * file is opened); its verdict is checked for consistency: on success every
 * required option is there, the enums are in range, --segment is >= 0 and
 * falcon2/falcon2a have --gain; the configuration it describes then goes
 * through falcon_validate (with T = 0: no data) to exercise the library's
 * checks of it. Errors are printed to /dev/null.
 */
#include <math.h>
#include "fuzz.h"
#include "../cli/cli.h"

enum { MAX_ARGS = 64 };

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    devnull = fopen("/dev/null", "w");
    if (!devnull) abort();
    cli_set_error_stream(devnull);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!devnull) LLVMFuzzerInitialize(NULL, NULL);
    /* Arguments: "run", then the input split at NUL bytes. */
    char *text = malloc(size + 1);
    FUZZ_CHECK(text != NULL, "malloc");
    memcpy(text, data, size);
    text[size] = '\0';
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = (char *)"run";
    for (size_t i = 0, start = 0; i <= size && argc <= MAX_ARGS; i++) {
        if (i < size && text[i] != '\0') continue;
        if (i == size && start == size && size > 0) break; /* a trailing NUL ends the list */
        argv[argc++] = text + start;
        start = i + 1;
    }
    argv[argc] = NULL;

    cli_run_args a;
    memset(&a, 0x5A, sizeof a);
    const int rc = cli_parse_run(argc, argv, &a);
    FUZZ_CHECK(rc == 0 || rc == CLI_FAIL, "status %d", rc);
    if (rc == 0 && a.help) {
        cli_print_run_help(devnull);
    } else if (rc == 0) {
        FUZZ_CHECK(a.variant >= FALCON_1 && a.variant <= FALCON_3A, "variant %d", a.variant);
        FUZZ_CHECK(a.form >= FALCON_FORM_RECURRENT && a.form <= FALCON_FORM_PARALLEL, "form %d", a.form);
        FUZZ_CHECK(falcon_backend_name((falcon_backend)a.backend) != NULL, "backend %d", a.backend);
        FUZZ_CHECK(a.precision >= FALCON_FP32 && a.precision <= FALCON_BF16, "precision %d", a.precision);
        FUZZ_CHECK(a.q && a.k && a.v && a.beta && a.out, "a required path is missing");
        FUZZ_CHECK(*a.q && *a.k && *a.v && *a.beta && *a.out, "an empty path was taken");
        FUZZ_CHECK(a.segment >= 0, "segment %lld", (long long)a.segment);
        FUZZ_CHECK(a.layout >= 0 && a.layout < CLI_NUM_LAYOUTS, "layout %d", a.layout);
        FUZZ_CHECK(a.scale == 0 || (a.layout == CLI_LAYOUT_FLA && a.scale > 0 && isfinite(a.scale)), "scale %g",
                   a.scale);
        FUZZ_CHECK(!falcon_variant_has_gain((falcon_variant)a.variant) || a.gain, "falcon2 without --gain");
        /* Every path points into the argument strings. */
        const char *paths[] = {a.q, a.k, a.v, a.beta, a.alpha, a.gain, a.out, a.state_out, a.ckpt_in, a.ckpt_out};
        for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
            FUZZ_CHECK(!paths[i] || (paths[i] >= text && paths[i] <= text + size), "path %zu points elsewhere", i);
        const falcon_config cfg = cli_config(&a);
        static const float dummy[1];
        const falcon_inputs in = {.B = 1, .T = 0, .H = 1, .n = 4, .m = 3, .q = dummy, .k = dummy,
                                  .v = dummy, .beta = dummy, .alpha = a.alpha ? dummy : NULL,
                                  .gain = a.gain ? dummy : NULL};
        const falcon_status s = falcon_validate(&cfg, &in, NULL);
        FUZZ_CHECK(s == FALCON_OK || *falcon_last_error(), "a failure without a message");
    }
    free(text);
    return 0;
}
