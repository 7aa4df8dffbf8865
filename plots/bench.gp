# Throughput figures from `falcon-study bench-dat` output (plots/plot-all.sh runs it; variable `which`):
#   T  tokens/s vs sequence length, per backend and form (Falcon-1, fp32,
#      n = m = 128, 8 heads, 1 thread: the benchmark's base point)
#   n  fraction of the probed FMA peak vs n = m, per backend and form (T = 4096),
#      with the yardstick: OpenBLAS (1 thread) on the GEMMs of one chunk block
#      of C = 64 steps (DIR/blas.dat, the blas/sgemm/chunk-shapes entries)
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
# Series title: form and backend (fields 1 and 3 of the file name); colour:
# backend; point shape and line style: form (recurrent filled circles, solid;
# chunk open squares, dashed; parallel open triangles, dotted), so that two
# forms measured at one point stay visible where they coincide. A series of
# one point (the backends measured only at the base point) is drawn and keyed
# as a point, not as a line.
bcol(f) = strstrt(f, '_avx512-simde_') ? 4 : strstrt(f, '_avx512_') ? 3 : strstrt(f, '_avx2_') ? 2 : \
          strstrt(f, '_scalar_') ? 1 : strstrt(f, '_cuda_') ? 5 : 6
form(f) = strstrt(f, '/recurrent_') ? 1 : strstrt(f, '/chunk_') ? 2 : 3
fpt(f) = word('7 4 8', form(f)) + 0
fps(f) = word('1.3 2.2 2.2', form(f)) + 0
fdt(f) = form(f)
stitle(f) = system(sprintf("basename %s .dat | cut -d_ -f1,3 | tr _ ' '", f))
nl = words(list)
array NPTS[nl > 0 ? nl : 1]
do for [i = 1:nl] {
    stats word(list, i) using 1 nooutput
    NPTS[i] = STATS_records
}
set logscale x 2
set offsets graph 0.03, graph 0.03, 0, 0
set key outside right top Left reverse samplen 3 font ',11'
set grid mxtics
best_note = ''
if (which eq 'T') {
    set title "Throughput vs sequence length (Falcon-1, fp32, n = m = 128, 8 heads, 1 thread; medians)\nlines: the T sweep (best backend); single points: backends measured at T = 4096 only"
    set logscale y
    set format y '10^{%T}'
    set format x '2^{%L}'
    set xlabel 'sequence length T (tokens)'
    set ylabel 'throughput (tokens/s, all heads)'
    col = 2
}
blas = ''
if (which eq 'n') {
    blasdata = sprintf("%s/blas.dat", dir)
    nblas = system(sprintf("awk '$1 == \"fp32\" && $4 == 64' %s 2>/dev/null | wc -l", blasdata)) + 0
    if (nblas > 0) { blas = sprintf("< awk '$1 == \"fp32\" && $4 == 64' %s | sort -n -k2", blasdata) }
    set title sprintf("Fraction of the probed FMA peak vs width (Falcon-1, fp32, T = 4096, 8 heads, 1 thread)\n%s", \
        blas ne '' ? 'black: BLAS-achievable, OpenBLAS on 1 thread on the GEMMs of one chunk block (C = 64)' : \
        'no BLAS yardstick in this run (built without OpenBLAS)')
    set xlabel 'key/value width n = m'
    set ylabel 'GFLOPS / peak (%)'
    set yrange [0:*]
    col = 4
}
if (which eq 'C') {
    # The default chunk size (falcon_chunk_auto of the shape, the "auto_C"
    # line bench-dat writes; not the benchmark's base C = 64) and, per
    # series, the best one measured.
    autoc(f) = system(sprintf("awk '$1 == \"#\" && $2 == \"auto_C\" { print $3; exit }' %s", f)) + 0
    cdef = nl > 0 ? autoc(word(list, 1)) : 0
    do for [i = 1:nl] {
        stats word(list, i) using 2 nooutput
        cbest = system(sprintf("awk '!/^#/ && $2 > b { b = $2; c = $1 } END { print c }' %s", word(list, i)))
        cauto = autoc(word(list, i))
        tdef = system(sprintf("awk '!/^#/ && $1 == %d { print $2 }' %s", cauto, word(list, i)))
        tbest = STATS_max
        best_note = best_note . sprintf("%s%s: best C = %s, %s", i > 1 ? '; ' : '', stitle(word(list, i)), cbest, \
            cauto == 0 ? 'the default C unrecorded' : \
            tdef eq '' ? sprintf('the default C = %d (auto) not measured', cauto) : \
            (cbest + 0 == cauto ? 'the default (auto)' : \
             sprintf('%.2fx the throughput of the default C = %d (auto)', tbest / real(tdef), cauto)))
    }
    set title sprintf("Chunk-size sweep (chunk form, Falcon-1, fp32, T = 4096, n = m = 128, 8 heads, 1 thread; medians)\n%s\n(the default sweep measures C on the best backend here only)", best_note) noenhanced
    set xlabel 'chunk size C (steps)'
    set ylabel 'throughput (tokens/s, all heads)'
    set logscale y
    set format y '%.0s%c'
    do for [e = 3:7] { do for [k in '2 3 5'] { set ytics add (k * 10.0**e) } }
    if (cdef > 0) {
        set arrow 1 from cdef, graph 0 to cdef, graph 1 nohead dt 3 lc rgb 'gray40'
        set label 1 sprintf('default C = %d (auto)', cdef) at cdef, graph 0.04 offset 0.5, 0 textcolor rgb 'gray40'
    }
    col = 2
}
# The yardstick's line, only where there is one (a macro: an empty data file
# name would make gnuplot warn).
blasplot = blas eq '' ? '' : ", blas using 2:(100 * column(6)) with linespoints lw 2.5 pt 2 ps 1.6 lc rgb 'black' " . \
           "title 'OpenBLAS sgemm, chunk shapes C = 64 (BLAS-achievable)'"
plot for [i = 1:nl] word(list, i) using 1:(NPTS[i] > 1 ? (col == 4 ? 100 * column(col) : column(col)) : NaN) \
         with linespoints lw 2 pt fpt(word(list, i)) ps fps(word(list, i)) lc (bcol(word(list, i))) \
         dt fdt(word(list, i)) title (NPTS[i] > 1 ? stitle(word(list, i)) : ''), \
     for [i = 1:nl] word(list, i) using 1:(NPTS[i] == 1 ? (col == 4 ? 100 * column(col) : column(col)) : NaN) \
         with points pt fpt(word(list, i)) ps fps(word(list, i)) lw 2 lc (bcol(word(list, i))) \
         title (NPTS[i] == 1 ? stitle(word(list, i)) . ' (one point)' : '') @blasplot
