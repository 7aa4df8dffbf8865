# Does the fitted power law hold past the range it was fitted on? For a
# study that measured beyond its fit range (profiles deep and huge:
# DIR/beyond.dat), one panel per stream: the outputs' error vs T of its
# recurrent and chunk forms, filled points inside the fit's range, large
# open points past it (index 2 of each curve file), and the fit c T^p
# (index 1) drawn on to 10^9. The vertical line is the end of the fit's
# range; each key entry says whether p held (the last measured point
# within a factor 2 of the extrapolation) and the slope of the points past
# the range. Variables: dir, out, fmt, name (the figure's file name).
bd = dir . '/beyond.dat'
streams = system(sprintf("awk '!/^#/ && !s[$1 \"_\" $2 \"_\" $3]++ { printf \"%%s_%%s_%%s \", $1, $2, $3 }' %s", bd))
ns = words(streams)
tfit = real(system(sprintf("awk '!/^#/ { print $6; exit }' %s", bd)))
rows = (ns + 2) / 3
height = rows * 560 + 140
call 'plots/common.gp' name 1800 height
# the backend and the forms of a stream's curves, from beyond.dat
be(s) = system(sprintf("awk '!/^#/ && $1 \"_\" $2 \"_\" $3 == \"%s\" { print $4; exit }' %s", s, bd))
row(s, fm, c) = system(sprintf("awk '!/^#/ && $1 \"_\" $2 \"_\" $3 == \"%s\" && $5 == \"%s\" { print $%d; exit }' %s", s, fm, c, bd))
file(s, fm) = sprintf('%s/curves/%s_%s_%s.dat', dir, s, be(s), fm)
lab(s, fm) = sprintf('%s: p = %.3f fitted, %.3f past the range; p held: %s', fm, real(row(s, fm, 11)), real(row(s, fm, 12)), row(s, fm, 13))
set multiplot layout rows, 3 title sprintf("Past the fit's range: fitted on T <= %.0g (filled points), measured beyond (open points), fit extrapolated (lines)", tfit) noenhanced
set logscale xy
set format x '10^{%T}'
set xrange [50:2e9]
set xlabel 'T (tokens)'
set ylabel 'outputs: normwise relative error (units of u)'
set key below Left reverse samplen 2 font ',10' maxrows 4
set arrow 1 from tfit, graph 0 to tfit, graph 1 nohead dt 3 lc rgb 'gray40'
do for [i = 1:ns] {
    s = word(streams, i)
    set title s noenhanced
    plot for [j = 1:2] file(s, word('recurrent chunk', j)) index 0 using ($1 <= tfit ? $1 : NaN):2 \
             with points pt 7 ps 1 lc j notitle, \
         for [j = 1:2] file(s, word('recurrent chunk', j)) index 2 using 1:2 with points pt 6 ps 2 lw 2 lc j notitle, \
         for [j = 1:2] file(s, word('recurrent chunk', j)) index 1 using 1:2 with lines dt 2 lw 1.5 lc j \
             title lab(s, word('recurrent chunk', j)) noenhanced
}
unset multiplot
