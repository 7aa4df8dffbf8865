# Throughput figures from `falcon-study bench-dat` output (plots/plot-all.sh runs it; variable `which`):
#   T  tokens/s vs sequence length, per backend and form (Falcon-1, fp32,
#      n = m = 128, 8 heads, 1 thread: the benchmark's base point)
#   n  fraction of the probed FMA peak vs n = m, per backend and form (T = 4096)
#   C  tokens/s vs chunk size C (chunk form, T = 4096, n = 128)
# Each file of DIR/<which>/ is one series (its name: the fixed parameters).
# Variables: dir (the bench-dat output directory), out, fmt, which.
name = which eq 'T' ? 'bench-throughput-T' : which eq 'n' ? 'bench-peak-n' : 'bench-chunk'
call 'plots/common.gp' name 1300 800
# The base point of the other parameters (chunk size 64), every backend and form.
rest = which eq 'T' ? 'fp32_n128' : 'fp32_T4096'
pat = which eq 'C' ? 'chunk_falcon1_*_fp32_T4096_n128_h8_p1.dat' : \
      sprintf('recurrent_falcon1_*_%s_h8_p1.dat chunk_falcon1_*_%s_C64_h8_p1.dat parallel_falcon1_*_%s_h8_p1.dat', rest, rest, rest)
list = system(sprintf("cd %s/%s && ls %s 2>/dev/null | sed 's|^|%s/%s/|'", dir, which, pat, dir, which))
# Fallback for another sweep: every series of this axis.
if (words(list) == 0) { list = system(sprintf("ls %s/%s/*.dat", dir, which)) }
# Series title: form and backend (fields 1 and 3 of the file name); colour: backend.
bcol(f) = strstrt(f, '_avx512-simde_') ? 4 : strstrt(f, '_avx512_') ? 3 : strstrt(f, '_avx2_') ? 2 : \
          strstrt(f, '_scalar_') ? 1 : strstrt(f, '_cuda_') ? 5 : 6
stitle(f) = system(sprintf("basename %s .dat | cut -d_ -f1,3 | tr _ ' '", f))
set logscale x 2
set offsets graph 0.03, graph 0.03, 0, 0
set key outside right top Left reverse samplen 3 font ',11'
set grid mxtics
if (which eq 'T') {
    set title 'Throughput vs sequence length (Falcon-1, fp32, n = m = 128, 8 heads, 1 thread; medians)'
    set logscale y
    set format y '10^{%T}'
    set format x '2^{%L}'
    set xlabel 'sequence length T (tokens)'
    set ylabel 'throughput (tokens/s, all heads)'
    col = 2
}
if (which eq 'n') {
    set title 'Fraction of the probed FMA peak vs width (Falcon-1, fp32, T = 4096, 8 heads, 1 thread)'
    set xlabel 'key/value width n = m'
    set ylabel 'GFLOPS / peak (%)'
    set yrange [0:*]
    col = 4
}
if (which eq 'C') {
    set title 'Chunk-size sweep (chunk form, Falcon-1, fp32, T = 4096, n = m = 128, 8 heads, 1 thread)'
    set xlabel 'chunk size C (steps)'
    set ylabel 'throughput (tokens/s, all heads)'
    set yrange [0:*]
    col = 2
}
plot for [i = 1:words(list)] word(list, i) using 1:(col == 4 ? 100 * column(col) : column(col)) \
     with linespoints lw 2 pt 7 lc (bcol(word(list, i))) \
     dt 3 - 2 * (strstrt(word(list, i), '/recurrent_') > 0) - (strstrt(word(list, i), '/chunk_') > 0) \
     title stitle(word(list, i))
