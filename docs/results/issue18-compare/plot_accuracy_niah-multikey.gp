# Re-render: cd into this directory and run: gnuplot plot_accuracy_niah-multikey.gp
set terminal pngcairo size 900,600 noenhanced
set output 'accuracy_niah-multikey.png'
set title 'accuracy vs retention ratio: niah-multikey'."\n".'needle-v1-3.7M-f32.gguf, 976 tokens, query-agnostic'
set xlabel 'retention ratio'
set ylabel 'accuracy (%)'
set logscale x 2
set grid
set key outside right top
set xrange [0.08:1.25]
set yrange [-2:102]
set xtics ('0.1' 0.1, '0.25' 0.25, '0.5' 0.5, '1' 1)
S = 100
plot 'accuracy_niah-multikey.dat' index 1 using 1:($2*S):($3*S) with yerrorlines lw 2 pt 7 ps 1.2 title 'am', \
     'accuracy_niah-multikey.dat' index 2 using 1:($2*S):($3*S) with yerrorlines lw 2 pt 7 ps 1.2 title 'compactor', \
     'accuracy_niah-multikey.dat' index 3 using 1:($2*S):($3*S) with yerrorlines lw 2 pt 7 ps 1.2 title 'expected-attention', \
     'accuracy_niah-multikey.dat' index 4 using 1:($2*S):($3*S) with yerrorlines lw 2 pt 7 ps 1.2 title 'h2o', \
     'accuracy_niah-multikey.dat' index 5 using 1:($2*S):($3*S) with yerrorlines lw 2 pt 7 ps 1.2 title 'keydiff', \
     'accuracy_niah-multikey.dat' index 6 using 1:($2*S):($3*S) with yerrorlines lw 2 pt 7 ps 1.2 title 'knorm', \
     'accuracy_niah-multikey.dat' index 7 using 1:($2*S):($3*S) with yerrorlines lw 2 pt 7 ps 1.2 title 'kvslimmer', \
     'accuracy_niah-multikey.dat' index 8 using 1:($2*S):($3*S) with yerrorlines lw 2 pt 7 ps 1.2 title 'kvzip', \
     'accuracy_niah-multikey.dat' index 9 using 1:($2*S):($3*S) with yerrorlines lw 2 pt 7 ps 1.2 title 'razor', \
     'accuracy_niah-multikey.dat' index 10 using 1:($2*S):($3*S) with yerrorlines lw 2 pt 7 ps 1.2 title 'snapkv', \
     'accuracy_niah-multikey.dat' index 11 using 1:($2*S):($3*S) with yerrorlines lw 2 pt 7 ps 1.2 title 'snapkv+adaptive', \
     'accuracy_niah-multikey.dat' index 12 using 1:($2*S):($3*S) with yerrorlines lw 2 pt 7 ps 1.2 title 'tova', \
     'accuracy_niah-multikey.dat' index 13 using 1:($2*S):($3*S) with yerrorlines lw 2 pt 7 ps 1.2 title 'window', \
     0.6875*S with lines dt 2 lw 2 lc rgb 'black' title 'full (ratio 1)'
