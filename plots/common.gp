# Shared by plots/*.gp: the terminal and output of one figure, and helpers.
# Usage inside a script:  call 'plots/common.gp' NAME WIDTH HEIGHT
# Variables set by plot-all.sh (gnuplot -e): out (directory), fmt (png|svg).
if (fmt eq 'svg') {
    set terminal svg size @ARG2,@ARG3 dynamic enhanced font 'Sans,13' background rgb 'white'
} else {
    set terminal pngcairo size @ARG2,@ARG3 enhanced font 'Sans,13'
}
set output sprintf('%s/%s.%s', out, ARG1, fmt)
reset
set grid lc rgb '#dddddd'
set key noenhanced
# A palette that stays readable on white (gnuplot's 5th default is yellow).
do for [i = 1:10] {
    set linetype i lc rgb word('#1f77b4 #d62728 #2ca02c #ff7f0e #9467bd #8c564b #e377c2 #7f7f7f #17becf #bcbd22', i)
}
set linetype cycle 10
