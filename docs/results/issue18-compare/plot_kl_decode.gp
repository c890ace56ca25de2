# Re-render: cd into this directory and run: gnuplot plot_kl_decode.gp
set terminal pngcairo size 900,600 noenhanced
set output 'kl_decode.png'
set title 'mean KL(full || compressed) per token (continuation decoded under the budget)'."\n".'needle-v1-3.7M-f32.gguf, 976 tokens, query-agnostic'
set xlabel 'retention ratio'
set ylabel 'KL (nats)'
set logscale x 2
set grid
set key outside right top
set xrange [0.08:1.25]
set offsets 0, 0, graph 0.05, graph 0.05
set xtics ('0.1' 0.1, '0.25' 0.25, '0.5' 0.5, '1' 1)
S = 1
plot 'kl_fidelity-decode.dat' index 1 using 1:($2*S):($3*S) with yerrorlines lw 2 pt 7 ps 1.2 title 'expected-attention', \
     'kl_fidelity-decode.dat' index 2 using 1:($2*S):($3*S) with yerrorlines lw 2 pt 7 ps 1.2 title 'h2o', \
     'kl_fidelity-decode.dat' index 3 using 1:($2*S):($3*S) with yerrorlines lw 2 pt 7 ps 1.2 title 'kvslimmer', \
     'kl_fidelity-decode.dat' index 4 using 1:($2*S):($3*S) with yerrorlines lw 2 pt 7 ps 1.2 title 'tova', \
     'kl_fidelity-decode.dat' index 5 using 1:($2*S):($3*S) with yerrorlines lw 2 pt 7 ps 1.2 title 'window', \
     0*S with lines dt 2 lw 2 lc rgb 'black' title 'full (ratio 1)'
