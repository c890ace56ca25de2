# Re-render: cd into this directory and run: gnuplot plot_summary.gp
set terminal pngcairo size 1000,640 noenhanced
set output 'summary.png'
set title 'accuracy vs KV cache held (mean over 1 needle tasks: niah-multiturn)'."\n".'needle-v1-3.7M-f32.gguf, 8144 tokens, query-agnostic'
set xlabel 'KV cache held (MiB, log scale; tics: full x ratio)'
set ylabel 'accuracy (%), mean over the needle tasks'
set logscale x 2
set grid
set key outside right top spacing 1.1 samplen 3
set xrange [2.5265625:39.45645332336426]
set xlabel offset 0,-1
set bmargin 5
set yrange [-2:102]
set xtics ("3.16\n(0.1)" 3.156516265869141, "7.89\n(0.25)" 7.891290664672852, "31.6\nfull" 31.565162658691406)
S = 100
set arrow from 31.565162658691406, graph 0 to 31.565162658691406, graph 1 nohead dt 2 lw 1 lc rgb 'black'
plot 'summary.dat' index 0 using 1:($2*S) with points pt 3 ps 3 lw 2 lc rgb 'black' title 'full cache', \
     'summary.dat' index 4 using ($1*1):($2*S):($3*S) with yerrorlines lc rgb '#e377c2' pt 8 dt 4 lw 1.5 ps 1.2 title 'keydiff', \
     'summary.dat' index 5 using ($1*1.0352649238413776):($2*S):($3*S) with yerrorlines lc rgb '#1f77b4' pt 5 dt 1 lw 2.5 ps 1.4 title 'snapkv', \
     'summary.dat' index 2 using ($1*0.9330329915368074):($2*S):($3*S) with yerrorlines lc rgb '#2ca02c' pt 9 dt 1 lw 2.5 ps 1.4 title 'expected-attention', \
     'summary.dat' index 1 using ($1*0.9012504626108302):($2*S):($3*S) with yerrorlines lc rgb '#17becf' pt 13 dt 1 lw 2.5 ps 1.4 title 'compactor', \
     'summary.dat' index 3 using ($1*0.9659363289248456):($2*S):($3*S) with yerrorlines lc rgb '#9467bd' pt 7 dt 1 lw 2.5 ps 1.4 title 'h2o', \
     'summary.dat' index 6 using ($1*1.0717734625362931):($2*S):($3*S) with yerrorlines lc rgb '#ff7f0e' pt 13 dt 1 lw 2.5 ps 1.4 title 'tova', \
     'summary.dat' index 7 using ($1*1.109569472067845):($2*S):($3*S) with yerrorlines lc rgb '#7f7f7f' pt 2 dt 3 lw 1 ps 1.2 title 'window'
