# Every backend and form on one stream: outputs' error vs T without decay
# and with the decay mixture, for Falcon-1 and Falcon-1A. Colour and point
# shape: backend, drawn widest first so that a backend whose errors equal
# another's (avx2 and avx512 often round alike) still shows around it; line
# style: form. The parallel form stops at a shorter T (its work is O(T^2)
# within a block): the note under the title gives that length.
# avx512-simde (the AVX-512 kernels through SIMDe) has curves only where
# native avx512 does not run. Variables: dir, out, fmt, prec, backends.
call 'plots/common.gp' sprintf('stability-backends-%s', prec) 1600 1250
f(v, d, b, fm) = sprintf('%s/curves/%s_%s_%s_%s_%s.dat', dir, prec, v, d, b, fm)
forms = 'recurrent chunk parallel'
nb = words(backends)
tpar = system(sprintf("awk '!/^#/ && $5 == \"parallel\" { print $6; exit }' %s/fits.dat", dir))
tmax = system(sprintf("awk '!/^#/ && $5 == \"recurrent\" { print $6; exit }' %s/fits.dat", dir))
set multiplot layout 2,2 title sprintf("Error of every backend and form, %s (outputs, cumulative over 1..T)\nrecurrent and chunk forms to T = %s; the parallel form (O(T^2) work per block) only to T = %s", prec, tmax, tpar) noenhanced
set logscale xy
set format x '10^{%T}'
set xlabel 'sequence length T (tokens)'
set ylabel sprintf('normwise relative error (units of u, %s)', prec)
set key below horizontal samplen 3 font ',11' height 1.5
# Backend b (1..nb): line width and point size shrink with b, point shape changes.
bw(b) = 1 + 1.6 * (nb - b)
bps(b) = 0.8 + 0.5 * (nb - b)
bpt(b) = word('6 4 8 12 10', b) + 0
do for [d in 'none mix'] {
    do for [v in 'falcon1 falcon1a'] {
        set title sprintf('%s, %s', v, d eq 'none' ? 'no decay' : 'decay mix')
        plot for [i = 0:3*nb - 1] f(v, d, word(backends, i/3 + 1), word(forms, i%3 + 1)) index 0 using 1:2 \
                 with linespoints lw bw(i/3 + 1) ps bps(i/3 + 1) dt i%3+1 pt bpt(i/3 + 1) lc (i/3 + 1) notitle, \
             for [b = 1:nb] NaN with linespoints lw bw(b) ps bps(b) pt bpt(b) lc b title word(backends, b), \
             for [k = 1:3] NaN with lines lw 1.5 dt k lc rgb 'black' title word(forms, k)
    }
}
unset multiplot
