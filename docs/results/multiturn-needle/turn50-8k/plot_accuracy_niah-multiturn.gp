# Re-render: cd into this directory and run: gnuplot plot_accuracy_niah-multiturn.gp
set terminal pngcairo size 1000,640 noenhanced
set output 'accuracy_niah-multiturn.png'
set title 'accuracy vs retention ratio: niah-multiturn'."\n".'needle-v1-3.7M-f32.gguf, 8144 tokens, query-agnostic'
set xlabel 'retention ratio'
set ylabel 'accuracy (%)'
set logscale x 2
set grid
set key outside right top spacing 1.1 samplen 3
set xrange [0.08:1.25]
set yrange [-2:102]
set xtics ("0.1" 0.1, "0.25" 0.25, "1" 1)
S = 100
plot 0.65625*S with lines dt 2 lw 2 lc rgb 'black' title 'full (ratio 1)', \
     'accuracy_niah-multiturn.dat' index 1 using ($1*0.9828205985452511):($2*S):($3*S) with yerrorlines lc rgb '#e377c2' pt 8 dt 4 lw 1.5 ps 1.2 title 'keydiff', \
     'accuracy_niah-multiturn.dat' index 2 using ($1*1.0174796921026863):($2*S):($3*S) with yerrorlines lc rgb '#1f77b4' pt 5 dt 1 lw 2.5 ps 1.4 title 'snapkv'
