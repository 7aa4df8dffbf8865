# N machines side by side, from `falcon compare A.json B.json C.json ...
# --out FILE` (plots/plot-all.sh: make report COMPARE="a.json b.json").
# One row per case that every file has (labelled by its name), the
# throughput of each machine relative to A's (log axis: 1 = as fast as A),
# one colour per machine, and each machine's geometric mean over those cases
# as a dashed line of its colour. Variables: file, out, fmt.
# Rows are those with an index among the common cases (the last column; "nan"
# elsewhere): a row without one has no position, and its tic label would land
# on another case's row.
nm = int(system(sprintf("sed -n 's/^# machines //p' '%s'", file)))
nc = int(system(sprintf("sed -n 's/^# geomean_cases //p' '%s'", file)))
label(k) = system(sprintf("sed -n 's/^# machine %d //p' '%s'", k, file))
gm(k) = real(system(sprintf("sed -n 's/^# geomean %d //p' '%s'", k, file)))
# The case name without Google Benchmark's /real_time mark.
short(s) = strstrt(s, '/real_time') ? s[1:strstrt(s, '/real_time') - 1] : s
height = 300 + 15 * (nc > 0 ? nc : 1)
call 'plots/common.gp' 'bench-machines' 1400 height
set title sprintf("Throughput of each machine relative to %s\nmedians of tokens/s over the %d cases every file has\ndashed: each machine's geometric mean", label(1), nc) noenhanced font ',12'
set logscale x 2
set format x '%g'
set xlabel 'tokens/s relative to A (1 = as fast as A; log scale)'
# The first case at the top ('reverse' does not turn an explicit range);
# names as written (enhanced text would read update_read's '_' as a subscript).
set yrange [nc:-1]
set ytics font ',8' nomirror noenhanced
set grid xtics
set key outside bottom center horizontal maxrows 3 font ',11' noenhanced
set lmargin 62
set rmargin 6
col_ratio(k) = 1 + nm + k   # column of machine k's ratio to A (k >= 2)
col_pos = 2 + 2 * nm
common = sprintf("< awk '!/^#/ && $%d ~ /^[0-9]+$/' '%s'", col_pos, file)
set arrow from 1, graph 0 to 1, graph 1 nohead lc rgb 'black' lw 1.5 front
do for [k = 2:nm] {
    set arrow from gm(k), graph 0 to gm(k), graph 1 nohead lc k - 1 dt 2 lw 1.5 back
}
plot for [k = 2:nm] common using (column(col_ratio(k))):(column(col_pos)):ytic(short(strcol(2))) \
         with points pt 7 ps 1.1 lc k - 1 title sprintf('%s: x%.3g', label(k), gm(k)), \
     NaN with lines lc rgb 'black' lw 1.5 title sprintf('%s (= 1)', label(1))
