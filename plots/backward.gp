# The backward pass (the backward/ entries of bench.json, bench/backward.c),
# from plot-all.sh's backward.dat: one row a case, "label backward_tok/s
# forward_tok/s backward_over_forward". Top: tokens/s of the backward call
# and of the forward call of the same case (log scale). Below: the backward
# call's time over the forward's, timed in alternation, with the chunk
# form's target (2.5) dashed. Variables: file, out, fmt.
ncase = int(system(sprintf("awk '!/^#/ && NF { n++ } END { print n + 0 }' '%s'", file)))
call 'plots/common.gp' 'bench-backward' 1100 800
set multiplot layout 2,1 title 'Backward pass: falcon\_backward against falcon\_run, fp32, T = 4096, 1 head, 1 thread'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -20 noenhanced
set logscale y
set ylabel 'tokens/s'
set key above horizontal
plot file using 3:xtic(1) title 'forward (falcon_run)', '' using 2 title 'backward (falcon_backward)'
unset logscale y
set ylabel 'backward time / forward time'
set yrange [0:*]
set style histogram clustered gap 1
plot file using 4:xtic(1) title 'measured (median of paired calls)' lc 3, \
     2.5 with lines dt 2 lc rgb 'black' title 'target for the chunk form (2.5)'
unset multiplot
