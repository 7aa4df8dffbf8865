# Two benchmark runs side by side, from `falcon compare A.json B.json --out
# FILE` (columns: index case tok/s_A tok/s_B B/A GFLOPS_A GFLOPS_B peak_A
# peak_B cpu_ratio). Top: tokens/s of every case, B against A (on the
# diagonal: the same speed). Below: the ratio B/A of every case, labelled by
# its name (in the order of file A), as a bar from 1 (the same speed), with
# the geometric mean. Colour: the form (the case name's first field), keyed.
# Variables: file, out, fmt.
header = system(sprintf("sed -n 1p '%s' | sed 's/^# falcon compare: //; s/ (medians.*//'", file))
form_of(s) = strstrt(s, 'recurrent/') == 1 ? 1 : strstrt(s, 'chunk/') == 1 ? 2 : strstrt(s, 'parallel/') == 1 ? 3 : 4
# The case name without Google Benchmark's /real_time mark.
short(s) = strstrt(s, '/real_time') ? s[1:strstrt(s, '/real_time') - 1] : s
forms = 'recurrent chunk parallel other'
# Key entries only for the forms present.
nform(k) = int(system(sprintf("awk '!/^#/ { f = $2 ~ /^recurrent\\// ? 1 : $2 ~ /^chunk\\// ? 2 : $2 ~ /^parallel\\// ? 3 : 4; if (f == %d) n++ } END { print n + 0 }' '%s'", k, file)))
array NF[4]
do for [k = 1:4] { NF[k] = nform(k) }
stats file using 1 nooutput
ncase = STATS_records
stats file using (log($5)) nooutput
gmean = exp(STATS_mean)
nratio = STATS_records
top = 720
height = top + 160 + 15 * ncase
call 'plots/common.gp' 'bench-compare' 1500 height
set multiplot title sprintf('Hardware comparison: %s', header) noenhanced

# ---- top: B against A ----
set origin 0.2, 1.0 - (top - 20.0) / height
set size 0.6, (top - 60.0) / height
set logscale xy
set format xy '10^{%T}'
set xlabel 'A: throughput (tokens/s)'
set ylabel 'B: throughput (tokens/s)'
set key top left Left reverse font ',11'
set title 'every case: B vs A'
plot for [k = 1:4] file using 3:(form_of(strcol(2)) == k ? $4 : NaN) with points pt 7 ps 1 lc k \
         title (NF[k] > 0 ? word(forms, k) : ''), \
     x with lines lc rgb 'black' dt 1 title 'B = A', \
     2*x with lines lc rgb 'gray50' dt 2 title 'B = 2A, A/2', \
     x/2 with lines lc rgb 'gray50' dt 2 notitle

# ---- below: B/A per case ----
set origin 0.0, 0.0
set size 1.0, 1.0 - (top + 0.0) / height
unset logscale
set logscale x
set format x '%g'
set format y '%g'
set xlabel 'speed-up B/A (tokens/s ratio; 1 = the same speed; log scale)'
unset ylabel
set yrange [-1:ncase] reverse
set ytics 1 font ',8' nomirror
set grid xtics noytics
set lmargin 62
set key outside top center horizontal font ',11'
set title sprintf('per case, in the order of file A (geometric mean of B/A over %d cases: %.3g)', nratio, gmean)
plot for [k = 1:4] file using (1):1:(form_of(strcol(2)) == k ? $5 - 1 : NaN):(0):ytic(short(strcol(2))) \
         with vectors nohead lw 4 lc k notitle, \
     for [k = 1:4] NaN with lines lw 6 lc k title (NF[k] > 0 ? word(forms, k) : ''), \
     '+' using (gmean):($0 * 0 - 1):(0):(ncase + 1) every ::0::0 with vectors nohead lw 2 lc rgb 'black' dt 2 \
         title 'geometric mean', \
     '+' using (1):($0 * 0 - 1):(0):(ncase + 1) every ::0::0 with vectors nohead lw 1 lc rgb 'gray40' notitle
unset multiplot
