# Re-render: cd into this directory and run: gnuplot plot_kl.gp
set terminal pngcairo size 1000,640 noenhanced
set output 'kl.png'
set title 'mean KL(full || compressed) per token'."\n".'needle-v1-3.7M-f32.gguf, 976 tokens, query-agnostic'
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
     'kl_fidelity.dat' index 5 using ($1*0.9526379980439373):($2*S):($3*S) with yerrorlines lc rgb '#8c564b' pt 6 dt 4 lw 1.5 ps 1.2 title 'knorm', \
     'kl_fidelity.dat' index 13 using ($1*1.0643701824533598):($2*S):($3*S) with yerrorlines lc rgb '#8c564b' pt 5 dt 1 lw 2.5 ps 1.4 title 'scissorhands', \
     'kl_fidelity.dat' index 4 using ($1*0.9395227492140118):($2*S):($3*S) with yerrorlines lc rgb '#e377c2' pt 8 dt 4 lw 1.5 ps 1.2 title 'keydiff', \
     'kl_fidelity.dat' index 11 using ($1*1.0352649238413776):($2*S):($3*S) with yerrorlines lc rgb '#6baed6' pt 1 dt 3 lw 1 ps 1.2 title 'random', \
     'kl_fidelity.dat' index 2 using ($1*0.9138314502294005):($2*S):($3*S) with yerrorlines lc rgb '#2ca02c' pt 9 dt 1 lw 2.5 ps 1.4 title 'expected-attention', \
     'kl_fidelity.dat' index 6 using ($1*0.9659363289248456):($2*S):($3*S) with yerrorlines lc rgb '#1a1a6e' pt 11 dt 1 lw 2.5 ps 1.4 title 'kvslimmer', \
     'kl_fidelity.dat' index 9 using ($1*1.0069555500567189):($2*S):($3*S) with yerrorlines lc rgb '#1a1a6e' pt 10 dt 2 lw 1.5 ps 1.2 title 'merge-mean', \
     'kl_fidelity.dat' index 1 using ($1*0.9012504626108302):($2*S):($3*S) with yerrorlines lc rgb '#17becf' pt 13 dt 1 lw 2.5 ps 1.4 title 'compactor', \
     'kl_fidelity.dat' index 15 using ($1*1.0942937012607394):($2*S):($3*S) with yerrorlines lc rgb '#ff7f0e' pt 13 dt 1 lw 2.5 ps 1.4 title 'tova', \
     'kl_fidelity.dat' index 7 using ($1*0.9794202975869268):($2*S):($3*S) with yerrorlines lc rgb '#d62728' pt 7 dt 1 lw 2.5 ps 1.4 title 'kvzip', \
     'kl_fidelity.dat' index 3 using ($1*0.9265880618903709):($2*S):($3*S) with yerrorlines lc rgb '#9467bd' pt 7 dt 1 lw 2.5 ps 1.4 title 'h2o', \
     'kl_fidelity.dat' index 8 using ($1*0.9930924954370359):($2*S):($3*S) with yerrorlines lc rgb '#c49c94' pt 3 dt 3 lw 1 ps 1.2 title 'lru', \
     'kl_fidelity.dat' index 10 using ($1*1.0210121257071934):($2*S):($3*S) with yerrorlines lc rgb '#1f77b4' pt 4 dt 2 lw 1.5 ps 1.2 title 'pyramidkv', \
     'kl_fidelity.dat' index 14 using ($1*1.0792282365044272):($2*S):($3*S) with yerrorlines lc rgb '#1f77b4' pt 5 dt 1 lw 2.5 ps 1.4 title 'snapkv', \
     'kl_fidelity.dat' index 16 using ($1*1.109569472067845):($2*S):($3*S) with yerrorlines lc rgb '#7f7f7f' pt 2 dt 3 lw 1 ps 1.2 title 'window', \
     'kl_fidelity.dat' index 12 using ($1*1.0497166836230674):($2*S):($3*S) with yerrorlines lc rgb '#e377c2' pt 9 dt 1 lw 2.5 ps 1.4 title 'razor'
