# Two benchmark runs side by side, from `falcon compare A.json B.json --out
# FILE` (columns: index case tok/s_A tok/s_B B/A GFLOPS_A GFLOPS_B peak_A
# peak_B cpu_ratio). Only the cases both runs measured are drawn: finite,
# positive tokens/s in both ("nan" marks a case absent from a file or failed
# there); the others have no ratio, and labelling them would bury the bars.
# Top: tokens/s of every such case, B against A (on the diagonal: the same
# speed). Below: the ratio B/A of every such case, labelled by its name (in
# the order of file A), as a bar from 1 (the same speed), with the geometric
# mean over them (falcon compare's "geometric mean of B/A over N cases").
# The picture's height follows their count. Colour: the form (the case
# name's first field), keyed. Variables: file, out, fmt.
header = system(sprintf("sed -n 1p '%s' | sed 's/^# falcon compare: //; s/ (medians.*//'", file))
form_of(s) = strstrt(s, 'recurrent/') == 1 ? 1 : strstrt(s, 'chunk/') == 1 ? 2 : strstrt(s, 'parallel/') == 1 ? 3 : 4
# The case name without Google Benchmark's /real_time mark.
short(s) = strstrt(s, '/real_time') ? s[1:strstrt(s, '/real_time') - 1] : s
forms = 'recurrent chunk parallel other'
# The common cases' rows, renumbered 0, 1, ... in file order. A number is
# matched by its text, not by arithmetic on it: mawk and gawk read "nan"
# and "inf" differently.
num = '^([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$'
both = sprintf("!/^#/ && $3 ~ /%s/ && $4 ~ /%s/ && $3 + 0 > 0 && $4 + 0 > 0", num, num)
common = sprintf("< awk '%s { $1 = n++; print }' '%s'", both, file)
ncase = int(system(sprintf("awk '%s { n++ } END { print n + 0 }' '%s'", both, file)))
nall = int(system(sprintf("awk '!/^#/ && NF { n++ } END { print n + 0 }' '%s'", file)))
# Key entries only for the forms present among the common cases.
nform(k) = int(system(sprintf("awk '%s { f = $2 ~ /^recurrent\\// ? 1 : $2 ~ /^chunk\\// ? 2 : $2 ~ /^parallel\\// ? 3 : 4; if (f == %d) n++ } END { print n + 0 }' '%s'", both, k, file)))
array NF[4]
do for [k = 1:4] { NF[k] = nform(k) }
top = 720
height = top + 160 + 15 * ncase
call 'plots/common.gp' 'bench-compare' 1500 (ncase > 0 ? height : 300)
if (ncase == 0) {
    # No ratio to draw (and nothing for stats to average): say so.
    set title sprintf('Hardware comparison: %s', header) noenhanced
    unset border
    unset tics
    set label 1 sprintf('no case has tokens/s in both files (of %d cases): nothing to compare', nall) at graph 0.5, 0.5 center
    set xrange [0:1]
    set yrange [0:1]
    plot 2 notitle # off the axes: a plot needs a defined point
    unset output
    exit
}
stats common using (log($5)) nooutput
gmean = exp(STATS_mean)
set multiplot title sprintf('Hardware comparison: %s', header) noenhanced

# ---- top: B against A ----
set origin 0.2, 1.0 - (top - 20.0) / height
set size 0.6, (top - 60.0) / height
set logscale xy
set format xy '10^{%T}'
set xlabel 'A: throughput (tokens/s)'
set ylabel 'B: throughput (tokens/s)'
set key top left Left reverse font ',11'
set title 'every case both files measured: B vs A'
plot for [k = 1:4] common using 3:(form_of(strcol(2)) == k ? $4 : NaN) with points pt 7 ps 1 lc k \
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
# A's first case at the top ('reverse' does not turn an explicit range);
# names as written (enhanced text would read update_read's '_' as a subscript).
set yrange [ncase:-1]
set ytics 1 font ',8' nomirror noenhanced
set grid xtics noytics
set lmargin 62
set key outside top center horizontal font ',11'
set title sprintf("B/A per case both files measured, in the order of file A\ngeometric mean over the %d cases: %.3g\n%d other cases not drawn: absent, failed or without tokens/s in a file", \
                 ncase, gmean, nall - ncase)
plot for [k = 1:4] common using (1):1:(form_of(strcol(2)) == k ? $5 - 1 : NaN):(0):ytic(short(strcol(2))) \
         with vectors nohead lw 4 lc k notitle, \
     for [k = 1:4] NaN with lines lw 6 lc k title (NF[k] > 0 ? word(forms, k) : ''), \
     '+' using (gmean):($0 * 0 - 1):(0):(ncase + 1) every ::0::0 with vectors nohead lw 2 lc rgb 'black' dt 2 \
         title 'geometric mean', \
     '+' using (1):($0 * 0 - 1):(0):(ncase + 1) every ::0::0 with vectors nohead lw 1 lc rgb 'gray40' notitle
unset multiplot
