# Learning curves: the normalized error of o_t = S_t k_t as a prediction of
# v_{t+1} (sum of squared errors / sum of squared targets over each bin of
# steps), vs T, for one family of runs (variable `family`):
#   tuned       every variant at the hyper-parameters chosen at T0, decay on
#               (solid) / off (dashed); prefix and same alignment side by side;
#               one key entry per variant (colour) and per line style (the
#               tuned values are in tuned.dat and the report's table)
#   alignment   Falcon-1 and Falcon-1A, prefix vs same, at the hyper-parameters
#               tuned for prefix alignment (the key gives them: Falcon-1 is
#               tuned without decay, Falcon-1A with)
#   plasticity  beta swept; forgetting: alpha swept; rehearsal: W swept
# The vertical line marks T0, where the hyper-parameters were chosen; the
# horizontal one the noise floor (the error of the exact map).
# Variables: dir (learning output), out, fmt, family, t0, floor.
call 'plots/common.gp' sprintf('learning-%s', family) (family eq 'alignment' ? 1200 : 1700) 750
# Sorted by the swept value (after '='), numerically.
files(pat) = system(sprintf("ls %s/curves/%s 2>/dev/null | sort -t= -k1,1 -k2g", dir, pat))
panels = family eq 'tuned' ? 'tuned_*-prefix-* tuned_*-same-*' : \
         family eq 'alignment' ? 'alignment_*' : \
         family eq 'rehearsal' ? 'rehearsal_falcon3-* rehearsal_falcon3a-*' : \
         sprintf('%s_falcon1-* %s_falcon1a-*', family, family)
ptitle(p) = family eq 'tuned' ? (strstrt(p, 'prefix') ? 'prefix alignment: learns (k_{t-1}, v_t)' : 'same-step alignment: learns (k_t, v_t)') : \
            family eq 'alignment' ? 'prefix vs same-step alignment, both at the parameters tuned for prefix' : \
            sprintf('%s: %s swept, others fixed', p[strstrt(p, '_') + 1 : strlen(p) - 2], \
                    family eq 'plasticity' ? 'beta' : family eq 'forgetting' ? 'alpha' : 'window W')
set multiplot layout 1, words(panels) title sprintf('Prediction error of o_t for v_{t+1} (hyper-parameters chosen at T0 = %d)', t0) enhanced
set logscale xy
set format x '10^{%T}'
set format y '%g'
set xlabel 'tokens seen T (bins of doubling length)'
set ylabel '{/Symbol S}|o_t - v_{t+1}|^2 / {/Symbol S}|v_{t+1}|^2 per bin (1: as good as o_t = 0)' enhanced
set key below vertical maxrows 7 Left reverse samplen 3 font ',11' height 1.5
set arrow 1 from t0, graph 0 to t0, graph 1 nohead dt 3 lc rgb 'gray40'
set label 1 'T0' at t0, graph 0.97 offset 0.5, 0 textcolor rgb 'gray40'
# The variant of a tuned curve's file (tuned_<variant>-<align>-<decay>.dat).
variant_of(f) = system(sprintf("basename '%s' .dat | sed 's/^tuned_//; s/-.*//'", f))
do for [p in panels] {
    set title ptitle(p) enhanced
    list = files(p)
    if (family eq 'tuned') {
        # Two files per variant (decay, nodecay; sorted): colour by variant,
        # keyed once; the line style keyed apart.
        plot for [i = 1:words(list)] word(list, i) using 3:4 with linespoints lw 2 pt 7 ps 0.8 \
                 dt 1 + (strstrt(word(list, i), 'nodecay') > 0) lc (i + 1)/2 notitle, \
             for [j = 1:words(list)/2] NaN with linespoints lw 2 pt 7 lc j title variant_of(word(list, 2*j - 1)), \
             NaN with lines lw 2 dt 1 lc rgb 'black' title 'decay (alpha tuned)', \
             NaN with lines lw 2 dt 2 lc rgb 'black' title 'no decay', \
             floor with lines lw 1 dt 3 lc rgb 'black' title 'noise floor'
    } else {
        # alignment: colour by variant, same-step dashed; the others: one colour per curve.
        plot for [i = 1:words(list)] word(list, i) using 3:4 with linespoints lw 2 pt 7 ps 0.8 \
                 dt 1 + (strstrt(word(list, i), 'nodecay') > 0 || strstrt(word(list, i), '-same') > 0) \
                 lc (family eq 'alignment' ? (i + 1)/2 : i) title columnheader(4), \
             floor with lines lw 1 dt 3 lc rgb 'black' title 'noise floor'
    }
}
unset multiplot
