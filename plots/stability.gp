# Error vs T of Falcon-1 and Falcon-1A, recurrent and chunk forms, without
# decay and with the random mixture of decays, with the fitted power laws
# c T^p drawn out to T = 10^9 (broken lines) and the gate's threshold of each
# form (dash-dotted; DIR/thresholds.dat). Top: outputs (cumulative over 1..T);
# bottom: the final state S_T. Units: the precision's unit roundoff u. The
# key says what each line style means.
# Variables: dir (stability output), out, fmt, prec (fp32|fp64), be (backend).
call 'plots/common.gp' sprintf('stability-%s', prec) 1600 1250
f(v, d, fm) = sprintf('%s/curves/%s_%s_%s_%s_%s.dat', dir, prec, v, d, be, fm)
# p of a curve: the slope of its fit line (block 1 of its file) in log-log.
array P[16]
do for [i = 0:15] {
    stats f(word('falcon1 falcon1a', i/8 + 1), word('none mix', (i/2)%2 + 1), word('recurrent chunk', i%2 + 1)) \
        index 1 using (log($1)):(log(column(2 + (i/4)%2))) nooutput
    P[i + 1] = STATS_slope
}
# The gate's threshold (gate/gate-thresholds.c) for variant v, form fm: the
# memory's (col 3) or the outputs' at read condition number 1 (col 4); NaN
# when the study wrote none.
thr(v, fm, c) = real(system(sprintf("awk '$1 == \"%s\" && $2 == \"%s\" { print $%d; f = 1 } END { if (!f) print \"NaN\" }' %s/thresholds.dat 2>/dev/null || echo NaN", v, fm, c, dir)))
set multiplot layout 2,2 title sprintf('Long-sequence error, %s, %s backend (n = m = 16)', prec, be)
set logscale xy
set format x '10^{%T}'
set format y '10^{%T}'
set xrange [50:2e9]
set xlabel 'sequence length T (tokens)'
set key below horizontal maxcols 2 Left reverse samplen 3 font ',11' height 1.5
lab(i, fm, d) = sprintf('%s, %s (p = %.2f)', fm, d eq 'none' ? 'no decay' : 'decay mix', P[i])
do for [k = 0:3] {
    v = word('falcon1 falcon1a', k%2 + 1)
    col = 2 + k/2
    set title sprintf('%s: %s', v, col == 2 ? 'outputs O_{1..T}' : 'final state S_T') enhanced
    set ylabel sprintf('normwise relative error (units of u, %s)', prec)
    base = (k%2) * 8 + (k/2) * 4
    thr_r = thr(v, 'recurrent', col + 1)
    thr_c = thr(v, 'chunk', col + 1)
    thr_what = col == 2 ? 'at read condition 1' : 'for S'
    plot for [j = 0:3] f(v, word('none mix', j/2 + 1), word('recurrent chunk', j%2 + 1)) index 0 using 1:col \
             with linespoints lw 2 pt (j/2 ? 8 : 7) ps 1.2 lc (j%2 + 1) \
             title lab(base + j + 1, word('recurrent chunk', j%2 + 1), word('none mix', j/2 + 1)), \
         for [j = 0:3] f(v, word('none mix', j/2 + 1), word('recurrent chunk', j%2 + 1)) index 1 using 1:col \
             with lines dt 2+j/2 lw 1.5 lc (j%2 + 1) notitle, \
         thr_r with lines dt 4 lw 2.5 lc 1 title sprintf('gate threshold, recurrent, %s (%.0f u)', thr_what, thr_r), \
         thr_c with lines dt 4 lw 2.5 lc 2 title sprintf('gate threshold, chunk, %s (%.0f u)', thr_what, thr_c), \
         NaN with lines dt 2 lw 1.5 lc rgb 'black' title 'fitted c T^p, no decay (extrapolated to 10^9)', \
         NaN with lines dt 3 lw 1.5 lc rgb 'black' title 'fitted c T^p, decay mix'
}
unset multiplot
