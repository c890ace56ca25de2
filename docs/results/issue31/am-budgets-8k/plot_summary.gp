# Re-render: cd into this directory and run: gnuplot plot_summary.gp
set terminal pngcairo size 1000,640 noenhanced
set output 'summary.png'
set title 'accuracy vs KV cache held (mean over 3 needle tasks: niah, niah-multikey, passkey)'."\n".'needle-v1-3.7M-f32.gguf, 8144 tokens, query-agnostic'
set xlabel 'KV cache held (MiB, log scale; tics: full x ratio)'
set ylabel 'accuracy (%), mean over the needle tasks'
set logscale x 2
set grid
set key outside right top spacing 1.1 samplen 3
set xrange [0.52314453125:40.819053649902344]
set xlabel offset 0,-1
set bmargin 5
set yrange [-2:102]
set xtics ("0.655\n(0.02)" 0.655166015625, "3.28\n(0.1)" 3.2758300781250003, "32.8\nfull" 32.75830078125)
S = 100
set arrow from 32.655242919921875, graph 0 to 32.655242919921875, graph 1 nohead dt 2 lw 1 lc rgb 'black'
plot 'summary.dat' index 0 using 1:($2*S) with points pt 3 ps 3 lw 2 lc rgb 'black' title 'full cache', \
     'summary.dat' index 1 using ($1*1):($2*S):($3*S) with yerrorlines lc rgb '#bcbd22' pt 11 dt 1 lw 2.5 ps 1.4 title 'am'
