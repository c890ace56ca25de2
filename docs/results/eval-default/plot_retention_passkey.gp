# Re-render: cd into this directory and run: gnuplot plot_retention_passkey.gp
set terminal pngcairo size 1000,640 noenhanced
set output 'retention_passkey.png'
set title 'retention (the share of the full cache''s right answers kept), 95% Wilson intervals: passkey'."\n".'needle-v1-3.7M-f32.gguf, 976 tokens, query-agnostic'
set xlabel 'retention ratio'
set ylabel 'retention (%)'
set logscale x 2
set grid
set key outside right top spacing 1.1 samplen 3
set xrange [0.08:0.625]
set yrange [-2:102]
set xtics ("0.1" 0.1, "0.25" 0.25, "0.5" 0.5)
S = 100
plot 1*S with lines dt 2 lw 2 lc rgb 'black' title 'full (ratio 1)', \
     'retention_passkey.dat' index 0 using ($1*0.9012504626108302):($2*S):($3*S):($4*S) with yerrorlines lc rgb '#17becf' pt 13 dt 1 lw 2.5 ps 1.4 title 'compactor', \
     'retention_passkey.dat' index 6 using ($1*0.9794202975869268):($2*S):($3*S):($4*S) with yerrorlines lc rgb '#d62728' pt 7 dt 1 lw 2.5 ps 1.4 title 'kvzip', \
     'retention_passkey.dat' index 3 using ($1*0.9395227492140118):($2*S):($3*S):($4*S) with yerrorlines lc rgb '#e377c2' pt 8 dt 4 lw 1.5 ps 1.2 title 'keydiff', \
     'retention_passkey.dat' index 2 using ($1*0.9265880618903709):($2*S):($3*S):($4*S) with yerrorlines lc rgb '#9467bd' pt 7 dt 1 lw 2.5 ps 1.4 title 'h2o', \
     'retention_passkey.dat' index 15 using ($1*1.109569472067845):($2*S):($3*S):($4*S) with yerrorlines lc rgb '#7f7f7f' pt 2 dt 3 lw 1 ps 1.2 title 'window', \
     'retention_passkey.dat' index 13 using ($1*1.0792282365044272):($2*S):($3*S):($4*S) with yerrorlines lc rgb '#1f77b4' pt 5 dt 1 lw 2.5 ps 1.4 title 'snapkv', \
     'retention_passkey.dat' index 1 using ($1*0.9138314502294005):($2*S):($3*S):($4*S) with yerrorlines lc rgb '#2ca02c' pt 9 dt 1 lw 2.5 ps 1.4 title 'expected-attention', \
     'retention_passkey.dat' index 7 using ($1*0.9930924954370359):($2*S):($3*S):($4*S) with yerrorlines lc rgb '#c49c94' pt 3 dt 3 lw 1 ps 1.2 title 'lru', \
     'retention_passkey.dat' index 10 using ($1*1.0352649238413776):($2*S):($3*S):($4*S) with yerrorlines lc rgb '#6baed6' pt 1 dt 3 lw 1 ps 1.2 title 'random', \
     'retention_passkey.dat' index 5 using ($1*0.9659363289248456):($2*S):($3*S):($4*S) with yerrorlines lc rgb '#1a1a6e' pt 11 dt 1 lw 2.5 ps 1.4 title 'kvslimmer', \
     'retention_passkey.dat' index 8 using ($1*1.0069555500567189):($2*S):($3*S):($4*S) with yerrorlines lc rgb '#1a1a6e' pt 10 dt 2 lw 1.5 ps 1.2 title 'merge-mean', \
     'retention_passkey.dat' index 12 using ($1*1.0643701824533598):($2*S):($3*S):($4*S) with yerrorlines lc rgb '#8c564b' pt 5 dt 1 lw 2.5 ps 1.4 title 'scissorhands', \
     'retention_passkey.dat' index 4 using ($1*0.9526379980439373):($2*S):($3*S):($4*S) with yerrorlines lc rgb '#8c564b' pt 6 dt 4 lw 1.5 ps 1.2 title 'knorm', \
     'retention_passkey.dat' index 9 using ($1*1.0210121257071934):($2*S):($3*S):($4*S) with yerrorlines lc rgb '#1f77b4' pt 4 dt 2 lw 1.5 ps 1.2 title 'pyramidkv', \
     'retention_passkey.dat' index 14 using ($1*1.0942937012607394):($2*S):($3*S):($4*S) with yerrorlines lc rgb '#ff7f0e' pt 13 dt 1 lw 2.5 ps 1.4 title 'tova', \
     'retention_passkey.dat' index 11 using ($1*1.0497166836230674):($2*S):($3*S):($4*S) with yerrorlines lc rgb '#e377c2' pt 9 dt 1 lw 2.5 ps 1.4 title 'razor'
