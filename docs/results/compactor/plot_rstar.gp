set terminal pngcairo size 900,600
set output 'rstar.png'
set key outside right
set xlabel 'chosen retention ratio r*'
set ylabel 'share of contexts'
set xrange [0:1]
set title 'Distribution of r* over the contexts'
plot 'rstar.dat' index 0 with steps lw 2 title 'compactor tau 0.9', 'rstar.dat' index 1 with steps lw 2 title 'compactor tau 0.95', 'rstar.dat' index 2 with steps lw 2 title 'h2o tau 0.9', 'rstar.dat' index 3 with steps lw 2 title 'h2o tau 0.95', 'rstar.dat' index 4 with steps lw 2 title 'pyramidkv tau 0.9', 'rstar.dat' index 5 with steps lw 2 title 'pyramidkv tau 0.95', 'rstar.dat' index 6 with steps lw 2 title 'snapkv tau 0.9', 'rstar.dat' index 7 with steps lw 2 title 'snapkv tau 0.95'
