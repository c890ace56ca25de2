# Re-render: gnuplot prefill-cost-am-default.gp (in this directory)
set terminal svg size 1100,620 dynamic font 'sans,11'
set output 'prefill-cost-am-default.svg'
set logscale xy
set xlabel 'prompt tokens'
set ylabel 'compression time / prefill time'
set key outside right
set grid
set title 'Prefill-time compression cost (shape model, noise weights: speed only)'
plot 'prefill-cost-am-default.dat' index 0 with linespoints dt 2 title columnheader(1), 'prefill-cost-am-default.dat' index 1 with linespoints dt 2 title columnheader(1), 'prefill-cost-am-default.dat' index 2 with linespoints dt 1 title columnheader(1)
