# Re-render: cd into this directory and run: gnuplot plot_kl_decode.gp
set terminal pngcairo size 1000,640 noenhanced
set output 'kl_decode.png'
set title 'mean KL(full || compressed) per token (continuation decoded under the budget)'."\n".'needle-v1-3.7M-f32.gguf, 976 tokens, query-agnostic'
set xlabel 'retention ratio'
set ylabel 'KL (nats)'
set logscale x 2
set grid
set key outside right top spacing 1.1 samplen 3
set xrange [0.08:1.25]
set offsets 0, 0, graph 0.05, graph 0.05
set xtics ("0.1" 0.1, "0.25" 0.25, "0.5" 0.5, "1" 1)
S = 1
plot 0*S with lines dt 2 lw 2 lc rgb 'black' title 'full (ratio 1)', \
     'kl_fidelity-decode.dat' index 1 using ($1*0.9012504626108302):($2*S):($3*S) with yerrorlines lc rgb '#2ca02c' pt 9 dt 1 lw 2.5 ps 1.4 title 'expected-attention', \
     'kl_fidelity-decode.dat' index 7 using ($1*1.0533610359548358):($2*S):($3*S) with yerrorlines lc rgb '#8c564b' pt 5 dt 1 lw 2.5 ps 1.4 title 'scissorhands', \
     'kl_fidelity-decode.dat' index 8 using ($1*1.0811000178342638):($2*S):($3*S) with yerrorlines lc rgb '#ff7f0e' pt 13 dt 1 lw 2.5 ps 1.4 title 'tova', \
     'kl_fidelity-decode.dat' index 4 using ($1*0.9743418912017071):($2*S):($3*S) with yerrorlines lc rgb '#c49c94' pt 3 dt 3 lw 1 ps 1.2 title 'lru', \
     'kl_fidelity-decode.dat' index 6 using ($1*1.026333783890424):($2*S):($3*S) with yerrorlines lc rgb '#6baed6' pt 1 dt 3 lw 1 ps 1.2 title 'random', \
     'kl_fidelity-decode.dat' index 2 using ($1*0.9249837975243687):($2*S):($3*S) with yerrorlines lc rgb '#9467bd' pt 7 dt 1 lw 2.5 ps 1.4 title 'h2o', \
     'kl_fidelity-decode.dat' index 3 using ($1*0.9493421209505192):($2*S):($3*S) with yerrorlines lc rgb '#1a1a6e' pt 11 dt 1 lw 2.5 ps 1.4 title 'kvslimmer', \
     'kl_fidelity-decode.dat' index 5 using ($1*1):($2*S):($3*S) with yerrorlines lc rgb '#1a1a6e' pt 10 dt 2 lw 1.5 ps 1.2 title 'merge-mean', \
     'kl_fidelity-decode.dat' index 9 using ($1*1.109569472067845):($2*S):($3*S) with yerrorlines lc rgb '#7f7f7f' pt 2 dt 3 lw 1 ps 1.2 title 'window'
