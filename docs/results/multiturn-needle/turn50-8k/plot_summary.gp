# Re-render: cd into this directory and run: gnuplot plot_summary.gp
set terminal pngcairo size 1000,640 noenhanced
set output 'summary.png'
set title 'accuracy vs KV cache held (mean over 1 needle tasks: niah-multiturn)'."\n".'needle-v1-3.7M-f32.gguf, 8144 tokens, query-agnostic'
set xlabel 'KV cache held (MiB, log scale; tics: full x ratio)'
set ylabel 'accuracy (%), mean over the needle tasks'
set logscale x 2
set grid
set key outside right top spacing 1.1 samplen 3
set xrange [2.611761474609375:40.79083442687988]
set xlabel offset 0,-1
set bmargin 5
set yrange [-2:102]
set xtics ("3.26\n(0.1)" 3.263266754150391, "8.16\n(0.25)" 8.158166885375977, "32.6\nfull" 32.632667541503906)
S = 100
set arrow from 32.632667541503906, graph 0 to 32.632667541503906, graph 1 nohead dt 2 lw 1 lc rgb 'black'
plot 'summary.dat' index 0 using 1:($2*S) with points pt 3 ps 3 lw 2 lc rgb 'black' title 'full cache', \
     'summary.dat' index 1 using ($1*0.9828205985452511):($2*S):($3*S) with yerrorlines lc rgb '#e377c2' pt 8 dt 4 lw 1.5 ps 1.2 title 'keydiff', \
     'summary.dat' index 2 using ($1*1.0174796921026863):($2*S):($3*S) with yerrorlines lc rgb '#1f77b4' pt 5 dt 1 lw 2.5 ps 1.4 title 'snapkv'
