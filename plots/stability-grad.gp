# Error of the fp32 backward pass vs T for one variant, one panel per
# gradient tensor, one colour per decay regime of the gate; recurrent form
# solid with filled points, chunk form dashed with open ones. Left of the
# dotted line the reference is MPFR, right of it the fp64 backward pass,
# which stands in there only after its check against MPFR (standin.dat).
# Each length is a call of its own (the reverse sweep starts at T).
# Variables: dir (the --grad study's output), out, fmt, v (variant), tmpfr.
call 'plots/common.gp' sprintf('stability-grad-%s', v) 1800 1100
f(d) = sprintf('%s/curves/%s_%s.dat', dir, v, d)
decays = 'none mild random strong extreme reset-slow mix'
tensors = 'dq dk dv dbeta dalpha dS0'
set multiplot layout 2,3 title sprintf("Gradient error vs T, %s, fp32 (n = m = 8); each T its own call\nalpha_t: none 1; mild [0.98, 1]; random [0.5, 1]; strong 0.5; extreme smallest normal every 5th step; reset-slow one near-reset at T/3, then 0.999; mix a random mixture", v) noenhanced
set logscale xy
set format x '10^{%T}'
set xlabel 'sequence length T (tokens)'
set ylabel 'normwise relative error (units of u, fp32)'
set key top left samplen 2 font ',10' maxrows 5 opaque
set arrow 1 from tmpfr, graph 0 to tmpfr, graph 1 nohead dt 3 lw 1.5 lc rgb 'gray40'
set label 1 'MPFR | fp64' at tmpfr, graph 0.04 center font ',9' tc rgb 'gray40' front
do for [t = 1:6] {
    set title word(tensors, t)
    first = word(tensors, t) eq 'dalpha' ? 2 : 1
    if (t == 1) { set key top left } else { unset key }
    plot for [d = first:7] f(word(decays, d)) using 1:(column(2 + t)) with linespoints lw 2 pt 7 ps 0.7 lc d \
             title word(decays, d), \
         for [d = first:7] f(word(decays, d)) using 1:(column(8 + t)) with linespoints lw 1.5 dt 2 pt 6 ps 0.7 lc d \
             notitle, \
         NaN with linespoints lw 2 pt 7 lc rgb 'black' title 'recurrent', \
         NaN with linespoints lw 1.5 dt 2 pt 6 lc rgb 'black' title 'chunk'
}
unset multiplot
