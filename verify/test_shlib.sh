#!/bin/bash
# The shared library as it sits in the build directory:
#
#   verify/test_shlib.sh build
#
# - libfalcon.so -> libfalcon.so.<major> -> libfalcon.so.<version>, with the
#   soname libfalcon.so.<major> (<major> from the header's FALCON_VERSION);
# - it exports exactly the functions the public headers declare (falcon.h,
#   falcon_io.h, falcon_advanced.h; falcon_reference_attach is
#   libfalcon-ref's), and mk/libfalcon.map lists exactly those: no internal
#   symbol, nothing of the statically linked CUDA runtime;
# - it needs no libcudart.so or libcuda.so (it loads on a machine with no
#   GPU and no driver), and no MPFR or GMP: the reference is libfalcon-ref;
# - a C program compiled with nothing but -I include -L BUILD -lfalcon runs
#   Falcon-1 on every CPU backend this machine has, and finds the mpfr
#   backend unavailable; the same program linked with -lfalcon-ref too gets
#   the mpfr backend, and the CPU backends agree with it to a few units of
#   roundoff; asking for the cuda backend without a GPU is
#   FALCON_E_UNAVAILABLE, not a crash;
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

case " $needed" in
*" libmpfr"* | *" libgmp"*) bad needed "needs MPFR or GMP: $needed" ;;
*) ok "needs no MPFR or GMP" ;;
esac

# The functions the public headers declare (comments stripped; a typedef's
# "(*name)" is not one), less libfalcon-ref's attach function.
for h in falcon.h falcon_io.h falcon_advanced.h; do
    ${CC:-cc} -fpreprocessed -dD -E -P "$ROOT/include/$h"
done | grep -oP '\bfalcon_\w+\s*\((?!\*)' | tr -d ' (' | grep -vx falcon_reference_attach | sort -u > declared.txt
nm -D --defined-only "$BUILD/libfalcon.so.$version" | awk '{ print $3 }' | sort -u > exported.txt
sed -n 's/^ *\(falcon_[a-z0-9_]*\);$/\1/p' "$ROOT/mk/libfalcon.map" | sort -u > listed.txt
unlisted=$(comm -13 declared.txt exported.txt | head -20)
[ -z "$unlisted" ] && ok "exports only the headers' $(wc -l < declared.txt) functions" \
    || bad exports "$(comm -13 declared.txt exported.txt | wc -l) exports no public header declares: $(echo $unlisted)"
missing=$(comm -23 declared.txt exported.txt)
[ -z "$missing" ] && ok "exports every function the headers declare" || bad exports "not exported: $(echo $missing)"
cmp -s declared.txt listed.txt && ok "mk/libfalcon.map lists exactly the headers' functions" \
    || bad map "mk/libfalcon.map and the headers differ: $(diff declared.txt listed.txt | grep '^[<>]' | tr '\n' ' ')"
if [ -f "$BUILD/libfalcon-ref.so" ]; then
    refx=$(nm -D --defined-only "$BUILD/libfalcon-ref.so" | awk '$3 !~ /^falcon_ref_/ && $3 != "falcon_reference_attach" { print $3 }')
    [ -z "$refx" ] && ok "libfalcon-ref.so exports the reference only" || bad exports "libfalcon-ref.so also exports: $(echo $refx)"
fi

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

int main(int argc, char **argv)
{
    /* argv[1]: "ref" when linked with libfalcon-ref (the mpfr backend is then
     * attached), "noref" when linked with libfalcon alone. */
    const int with_ref = argc > 1 && argv[1][0] == 'r';
    static double q[T * N], k[T * N], v[T * M], beta[T], alpha[T], ref[T * M], out[T * M];
    unsigned x = 12345;
    for (int i = 0; i < T * N; i++) {
        x = x * 1103515245u + 12345u; q[i] = (double)(x >> 8) / (1 << 24) - 0.5;
        x = x * 1103515245u + 12345u; k[i] = (double)(x >> 8) / (1 << 24) - 0.5;
    }
    for (int i = 0; i < T * M; i++) { x = x * 1103515245u + 12345u; v[i] = (double)(x >> 8) / (1 << 24) - 0.5; }
    for (int t = 0; t < T; t++) { beta[t] = 0.8; alpha[t] = 0.97; }
    if (!with_ref) {
        int s = run(FALCON_BACKEND_MPFR, q, k, v, beta, alpha, ref);
        printf("mpfr: %s (%s);", falcon_status_name((falcon_status)s), falcon_backend_describe(FALCON_BACKEND_MPFR));
        if (s != FALCON_E_UNAVAILABLE || falcon_backend_available(FALCON_BACKEND_MPFR)) return 1;
        /* the CPU backends against the scalar fp64 one instead */
        if (run(FALCON_BACKEND_SCALAR, q, k, v, beta, alpha, ref)) return 1;
    } else if (run(FALCON_BACKEND_MPFR, q, k, v, beta, alpha, ref)) { printf("mpfr failed: %s\n", falcon_last_error()); return 1; }
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
    if LD_LIBRARY_PATH="$BUILD" ./prog noref > prog.log 2>&1; then
        ok "it runs, without the mpfr backend: $(tr '\n' ';' < prog.log)"
    else
        bad run "$(tr '\n' ';' < prog.log)"
    fi
    lib=$(LD_LIBRARY_PATH="$BUILD" ldd ./prog | awk '$1 == "libfalcon.so.'"$major"'" { print $3 }')
    [ "$lib" -ef "$BUILD/libfalcon.so.$version" ] && ok "it loads libfalcon.so.$major from $BUILD" \
        || bad ldd "libfalcon.so.$major resolved to '$lib'"
else
    bad link "$(head -5 cc.log | tr '\n' ' ')"
fi
if [ -f "$BUILD/libfalcon-ref.so" ]; then
    # --no-as-needed: the program names nothing of libfalcon-ref; loading it attaches the reference.
    if ${CC:-cc} -std=c11 -Wall -Wextra -Werror -I "$ROOT/include" -o prog-ref prog.c -L "$BUILD" \
           -Wl,--no-as-needed -lfalcon-ref -Wl,--as-needed -lfalcon -lm 2> cc.log &&
       LD_LIBRARY_PATH="$BUILD" ./prog-ref ref > prog.log 2>&1; then
        ok "linked with -lfalcon-ref, it checks against mpfr: $(tr '\n' ';' < prog.log)"
    else
        bad ref "$(cat cc.log prog.log | tr '\n' ';')"
    fi
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
