# Error of the outputs vs T in every decay regime (none; mild: alpha in
# [0.98, 1]; strong: 0.5; extreme: the smallest normal number every 5th step,
# 0.9 otherwise; mix: a random mixture of these), one panel per variant;
# recurrent form solid, chunk form dashed. Variables: dir, out, fmt, prec, be.
call 'plots/common.gp' sprintf('stability-decay-%s', prec) 1800 700
f(v, d, fm) = sprintf('%s/curves/%s_%s_%s_%s_%s.dat', dir, prec, v, d, be, fm)
decays = 'none mild strong extreme mix'
set multiplot layout 1,3 title sprintf('Error by decay regime, %s, %s backend (outputs, cumulative over 1..T; solid: recurrent, dashed: chunk)', prec, be)
set logscale xy
set format x '10^{%T}'
set xlabel 'sequence length T (tokens)'
set ylabel sprintf('normwise relative error (units of u, %s)', prec)
set key below horizontal samplen 2 font ',11' height 1.5
do for [v in 'falcon1 falcon1a falcon3'] {
    set title v
    plot for [d = 1:5] f(v, word(decays, d), 'recurrent') index 0 using 1:2 with linespoints lw 2 pt 7 lc d \
             title word(decays, d), \
         for [d = 1:5] f(v, word(decays, d), 'chunk') index 0 using 1:2 with linespoints lw 1.5 dt 2 pt 6 lc d \
             notitle
}
unset multiplot
