# Error of the outputs vs T in every decay regime, one panel per variant;
# recurrent form solid with filled points, chunk form dashed with open ones;
# the gate's threshold of each form at read condition number 1 dash-dotted
# (DIR/thresholds.dat). The regimes (alpha_t): none 1; mild uniform in
# [0.98, 1]; strong 0.5; extreme the smallest normal number every 5th step,
# 0.9 otherwise; mix per step the smallest normal (5%), 1 (25%), 0.5 (20%),
# else uniform in [0.9, 1]. Variables: dir, out, fmt, prec, be.
call 'plots/common.gp' sprintf('stability-decay-%s', prec) 1800 820
f(v, d, fm) = sprintf('%s/curves/%s_%s_%s_%s_%s.dat', dir, prec, v, d, be, fm)
thr(v, fm) = real(system(sprintf("awk '$1 == \"%s\" && $2 == \"%s\" { print $4; f = 1 } END { if (!f) print \"NaN\" }' %s/thresholds.dat 2>/dev/null || echo NaN", v, fm, dir)))
decays = 'none mild strong extreme mix'
set multiplot layout 1,3 title sprintf("Error by decay regime, %s, %s backend (outputs, cumulative over 1..T)\nalpha_t: none 1; mild uniform in [0.98, 1]; strong 0.5; extreme smallest normal every 5th step, else 0.9; mix: a random mixture of these", prec, be) noenhanced
set logscale xy
set format x '10^{%T}'
set xlabel 'sequence length T (tokens)'
set ylabel sprintf('normwise relative error (units of u, %s)', prec)
set key below horizontal maxcols 3 samplen 3 font ',11' height 1.5
do for [v in 'falcon1 falcon1a falcon3'] {
    set title v
    plot for [d = 1:5] f(v, word(decays, d), 'recurrent') index 0 using 1:2 with linespoints lw 2 pt 7 lc d \
             title word(decays, d), \
         for [d = 1:5] f(v, word(decays, d), 'chunk') index 0 using 1:2 with linespoints lw 1.5 dt 2 pt 6 lc d \
             notitle, \
         NaN with linespoints lw 2 pt 7 lc rgb 'black' title 'recurrent (solid)', \
         NaN with linespoints lw 1.5 dt 2 pt 6 lc rgb 'black' title 'chunk (dashed)', \
         thr(v, 'recurrent') with lines dt 4 lw 2 lc rgb 'gray30' title sprintf('gate threshold, recurrent (%.0f u)', thr(v, 'recurrent')), \
         thr(v, 'chunk') with lines dt 5 lw 2 lc rgb 'gray60' title sprintf('gate threshold, chunk (%.0f u)', thr(v, 'chunk'))
}
unset multiplot
