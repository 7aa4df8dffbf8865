# The chunk form's error vs T in the four precisions of the ladder: fp64,
# fp32, and the tensor-core operand formats tf32 and bf16 (the matrix
# products' operands rounded to 10 or 7 fraction bits, fp32 accumulation).
# One row per variant (Falcon-1, Falcon-3), one column per precision, one
# line per decay regime; the error is the plain normwise relative error
# (each precision's error in units of its u times that u), so the columns
# share one scale; the dash-dotted line is the gate's threshold of the
# precision at read condition number 1 (DIR/thresholds.dat).
# Variables: dir, out, fmt, be (the backend of the curves).
call 'plots/common.gp' 'stability-formats' 2000 1100
precs = 'fp64 fp32 tf32 bf16'
units = '1.1102230246251565e-16 5.9604644775390625e-08 0.00048828125 0.00390625'
decays = 'none mild strong extreme mix'
f(p, v, d) = sprintf('%s/curves/%s_%s_%s_%s_chunk.dat', dir, p, v, d, be)
# thresholds.dat: col 4 fp32/fp64 outputs, col 6 tf32, col 8 bf16 (units of u)
thr(v, p) = real(system(sprintf("awk '$1 == \"%s\" && $2 == \"chunk\" { print $%d; f = 1 } END { if (!f) print \"NaN\" }' %s/thresholds.dat 2>/dev/null || echo NaN", v, p eq 'tf32' ? 6 : p eq 'bf16' ? 8 : 4, dir)))
set multiplot layout 2,4 title sprintf("Chunk form, outputs (cumulative over 1..T), %s backend: fp64, fp32, tf32 and bf16 operands\nplain relative error (units of u times u); alpha_t: none 1; mild [0.98, 1]; strong 0.5; extreme smallest normal every 5th step; mix: a random mixture", be) noenhanced
set logscale xy
set format x '10^{%T}'
set format y '10^{%T}'
set xrange [50:2e6]
set yrange [1e-17:1]
set xlabel 'T (tokens)'
set key top right samplen 2 font ',10'
do for [row = 1:2] {
    v = word('falcon1 falcon3', row)
    do for [col = 1:4] {
        p = word(precs, col)
        u = real(word(units, col))
        set title sprintf('%s, %s (u = %.3g)', v, p, u) noenhanced
        set ylabel (col == 1 ? 'normwise relative error' : '')
        t = thr(v, p) * u
        plot for [d = 1:5] f(p, v, word(decays, d)) index 0 using 1:($2 * u) with linespoints lw 2 pt 7 ps 0.8 lc d \
                 title (row == 1 && col == 1 ? word(decays, d) : ''), \
             u with lines dt 3 lw 1.5 lc rgb 'gray50' title (row == 1 && col == 1 ? 'u' : ''), \
             t with lines dt 4 lw 2 lc rgb 'gray30' title (row == 1 && col == 1 ? 'gate threshold' : '')
    }
}
unset multiplot
