# Re-render: cd into this directory and run: gnuplot plot_accuracy_niah-multikey.gp
set terminal pngcairo size 1000,640 noenhanced
set output 'accuracy_niah-multikey.png'
set title 'accuracy vs retention ratio: niah-multikey'."\n".'needle-v1-3.7M-f32.gguf, 8144 tokens, query-agnostic'
set xlabel 'retention ratio'
set ylabel 'accuracy (%)'
set logscale x 2
set grid
set key outside right top spacing 1.1 samplen 3
set xrange [0.016:1.25]
set yrange [-2:102]
set xtics ("0.02" 0.02, "0.1" 0.1, "1" 1)
S = 100
plot 0.625*S with lines dt 2 lw 2 lc rgb 'black' title 'full (ratio 1)', \
     'accuracy_niah-multikey.dat' index 1 using ($1*1):($2*S):($3*S) with yerrorlines lc rgb '#bcbd22' pt 11 dt 1 lw 2.5 ps 1.4 title 'am'
