# Two benchmark runs side by side, from `falcon compare A.json B.json --out
# FILE` (columns: index case tok/s_A tok/s_B B/A GFLOPS_A GFLOPS_B peak_A
# peak_B). Left: tokens/s of every case, B against A (on the diagonal: the
# same speed). Right: the ratio B/A per case, with its geometric mean.
# Colour: the form (the case name's first field). Variables: file, out, fmt.
call 'plots/common.gp' 'bench-compare' 1600 750
header = system(sprintf("sed -n 1p '%s' | sed 's/^# falcon compare: //; s/ (medians.*//'", file))
form_of(s) = strstrt(s, 'recurrent/') == 1 ? 1 : strstrt(s, 'chunk/') == 1 ? 2 : strstrt(s, 'parallel/') == 1 ? 3 : 4
stats file using (log($5)) nooutput
gmean = exp(STATS_mean)
set multiplot layout 1,2 title sprintf('Hardware comparison: %s', header) noenhanced
set logscale xy
set format xy '10^{%T}'
set xlabel 'A: throughput (tokens/s)'
set ylabel 'B: throughput (tokens/s)'
set key top left Left reverse font ',11'
set title 'every case: B vs A'
plot for [k = 1:4] file using 3:(form_of(strcol(2)) == k ? $4 : NaN) with points pt 7 ps 1 lc k \
         title word('recurrent chunk parallel other', k), \
     x with lines lc rgb 'black' dt 1 title 'B = A', \
     2*x with lines lc rgb 'gray50' dt 2 title 'B = 2A, A/2', \
     x/2 with lines lc rgb 'gray50' dt 2 notitle
unset logscale x
set logscale y
set format x '%g'
set format y '%g'
set xlabel 'case (order of file A)'
set ylabel 'speed-up B/A (tokens/s ratio)'
set title sprintf('per case (geometric mean %.3g)', gmean)
# Bars from 1 (no change) to the ratio.
plot for [k = 1:4] file using 1:(1):(0):(form_of(strcol(2)) == k ? $5 - 1 : NaN) with vectors nohead lw 3 lc k notitle, \
     gmean with lines lw 2 lc rgb 'black' dt 2 title 'geometric mean', \
     1 with lines lc rgb 'gray50' notitle
unset multiplot
