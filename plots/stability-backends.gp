# Every backend and form on one stream: outputs' error vs T without decay
# and with the decay mixture, for Falcon-1 and Falcon-1A. Colour: backend;
# line style: form (the parallel form stops where its O(T^2) work stops being
# sane). avx512-simde (the AVX-512 kernels through SIMDe) has curves only
# where native avx512 does not run. Variables: dir, out, fmt, prec, backends.
call 'plots/common.gp' sprintf('stability-backends-%s', prec) 1600 1200
f(v, d, b, fm) = sprintf('%s/curves/%s_%s_%s_%s_%s.dat', dir, prec, v, d, b, fm)
forms = 'recurrent chunk parallel'
nb = words(backends)
set multiplot layout 2,2 title sprintf('Error of every backend and form, %s (outputs, cumulative over 1..T)', prec)
set logscale xy
set format x '10^{%T}'
set xlabel 'sequence length T (tokens)'
set ylabel sprintf('normwise relative error (units of u, %s)', prec)
set key below horizontal samplen 3 font ',11' height 1.5
do for [d in 'none mix'] {
    do for [v in 'falcon1 falcon1a'] {
        set title sprintf('%s, %s', v, d eq 'none' ? 'no decay' : 'decay mix')
        plot for [i = 0:3*nb - 1] f(v, d, word(backends, i/3 + 1), word(forms, i%3 + 1)) index 0 using 1:2 \
                 with linespoints lw 1.5 dt i%3+1 pt (i%3 + 5) lc (i/3 + 1) notitle, \
             for [b = 1:nb] NaN with lines lw 2 lc b title word(backends, b), \
             for [k = 1:3] NaN with linespoints lw 1.5 dt k pt k + 4 lc rgb 'black' title word(forms, k)
    }
}
unset multiplot
