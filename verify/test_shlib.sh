#!/bin/bash
# The shared library as it sits in the build directory:
#
#   verify/test_shlib.sh build
#
# - libfalcon.so -> libfalcon.so.<major> -> libfalcon.so.<version>, with the
#   soname libfalcon.so.<major> (<major> from the header's FALCON_VERSION);
# - it exports only falcon_* symbols (the statically linked CUDA runtime, if
#   any, stays inside) and needs no libcudart.so or libcuda.so: it loads on a
#   machine with no GPU and no driver;
# - a C program compiled with nothing but -I include -L BUILD -lfalcon runs
#   Falcon-1 on every CPU backend this machine has and on the mpfr backend,
#   and the results agree to a few units of roundoff; asking for the cuda
#   backend without a GPU is FALCON_E_UNAVAILABLE, not a crash;
# - Python's ctypes loads it (when python3 is there).
# Ends with "N passed, M failed"; exits non-zero if any failed.
set -eu
BUILD=$(cd "${1:?usage: verify/test_shlib.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$(dirname "$0")/lib.sh"
test_workdir
falcon_version

# ---- the files and the soname ----
if [ "$(readlink "$BUILD/libfalcon.so")" = "libfalcon.so.$major" ] &&
   [ "$(readlink "$BUILD/libfalcon.so.$major")" = "libfalcon.so.$version" ] &&
   [ -f "$BUILD/libfalcon.so.$version" ] && [ ! -L "$BUILD/libfalcon.so.$version" ]; then
    ok "links libfalcon.so -> .so.$major -> .so.$version"
else
    bad links "$(ls -l "$BUILD"/libfalcon.so* 2>&1 | tr '\n' ' ')"
fi
soname=$(readelf -d "$BUILD/libfalcon.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libfalcon.so.$major" ] && ok "soname $soname" || bad soname "'$soname', expected libfalcon.so.$major"

needed=$(readelf -d "$BUILD/libfalcon.so.$version" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
case " $needed" in
*" libcuda"*) bad needed "needs a CUDA library: $needed" ;;
*) ok "needs no CUDA library ($needed)" ;;
esac

others=$(nm -D --defined-only "$BUILD/libfalcon.so.$version" | awk '$3 !~ /^falcon_/ { print $3 }' | head -5)
[ -z "$others" ] && ok "exports only falcon_* symbols" || bad exports "also exports: $(echo $others)"
for f in falcon_run falcon_config_default falcon_state_create falcon_last_error falcon_npy_read; do
    nm -D --defined-only "$BUILD/libfalcon.so.$version" | grep -qw "$f" || bad exports "$f is not exported"
done

# ---- a program linked with -lfalcon alone ----
cat > prog.c <<'EOF'
#include <math.h>
#include <stdio.h>
#include <falcon.h>

enum { T = 200, N = 8, M = 4 };

/* Runs Falcon-1 (fp64, recurrent) on backend b; 0 on success. */
static int run(falcon_backend b, const double *q, const double *k, const double *v,
               const double *beta, const double *alpha, double *out)
{
    falcon_config cfg;
    falcon_config_default(&cfg);
    cfg.precision = FALCON_FP64;
    cfg.backend = b;
    falcon_inputs in = falcon_inputs_sequence(T, N, M, q, k, v, beta, alpha, NULL);
    falcon_state *st;
    if (falcon_state_create(1, N, M, 1, &st) != FALCON_OK) return 1;
    falcon_status s = falcon_run(&cfg, &in, st, out);
    falcon_state_free(st);
    return s == FALCON_OK ? 0 : (int)s;
}

int main(void)
{
    static double q[T * N], k[T * N], v[T * M], beta[T], alpha[T], ref[T * M], out[T * M];
    unsigned x = 12345;
    for (int i = 0; i < T * N; i++) {
        x = x * 1103515245u + 12345u; q[i] = (double)(x >> 8) / (1 << 24) - 0.5;
        x = x * 1103515245u + 12345u; k[i] = (double)(x >> 8) / (1 << 24) - 0.5;
    }
    for (int i = 0; i < T * M; i++) { x = x * 1103515245u + 12345u; v[i] = (double)(x >> 8) / (1 << 24) - 0.5; }
    for (int t = 0; t < T; t++) { beta[t] = 0.8; alpha[t] = 0.97; }
    if (run(FALCON_BACKEND_MPFR, q, k, v, beta, alpha, ref)) { printf("mpfr failed: %s\n", falcon_last_error()); return 1; }
    int bad = 0;
    const falcon_backend cpu[] = { FALCON_BACKEND_AUTO, FALCON_BACKEND_SCALAR, FALCON_BACKEND_AVX2, FALCON_BACKEND_AVX512 };
    for (unsigned i = 0; i < sizeof cpu / sizeof cpu[0]; i++) {
        if (!falcon_backend_available(cpu[i])) { printf("%s: not here\n", falcon_backend_name(cpu[i])); continue; }
        if (run(cpu[i], q, k, v, beta, alpha, out)) { printf("%s failed: %s\n", falcon_backend_name(cpu[i]), falcon_last_error()); bad = 1; continue; }
        double e = 0, r = 0;
        for (int j = 0; j < T * M; j++) { e += (out[j] - ref[j]) * (out[j] - ref[j]); r += ref[j] * ref[j]; }
        double err_u = sqrt(e / r) / 0x1p-53;
        printf("%s: error %.2f u\n", falcon_backend_name(cpu[i]), err_u);
        if (!(err_u < 1000)) bad = 1;
    }
    if (!falcon_backend_available(FALCON_BACKEND_CUDA)) {
        int s = run(FALCON_BACKEND_CUDA, q, k, v, beta, alpha, out);
        printf("cuda: %s (%s)\n", falcon_status_name((falcon_status)s), falcon_backend_describe(FALCON_BACKEND_CUDA));
        if (s != FALCON_E_UNAVAILABLE) bad = 1;
    }
    return bad;
}
EOF
if ${CC:-cc} -std=c11 -Wall -Wextra -Werror -I "$ROOT/include" -o prog prog.c -L "$BUILD" -lfalcon -lm 2> cc.log; then
    ok "a program links with -lfalcon alone"
    if LD_LIBRARY_PATH="$BUILD" ./prog > prog.log 2>&1; then
        ok "it runs: $(tr '\n' ';' < prog.log)"
    else
        bad run "$(tr '\n' ';' < prog.log)"
    fi
    lib=$(LD_LIBRARY_PATH="$BUILD" ldd ./prog | awk '$1 == "libfalcon.so.'"$major"'" { print $3 }')
    [ "$lib" -ef "$BUILD/libfalcon.so.$version" ] && ok "it loads libfalcon.so.$major from $BUILD" \
        || bad ldd "libfalcon.so.$major resolved to '$lib'"
else
    bad link "$(head -5 cc.log | tr '\n' ' ')"
fi

# ---- Python's ctypes ----
if command -v python3 >/dev/null; then
    if out=$(LD_LIBRARY_PATH="$BUILD" python3 -c '
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
lib.falcon_backend_name.restype = ctypes.c_char_p
print(lib.falcon_backend_name(lib.falcon_backend_resolve(0)).decode())' "$BUILD/libfalcon.so" 2>&1); then
        ok "python ctypes loads it (auto = $out)"
    else
        bad ctypes "$out"
    fi
fi

test_end
