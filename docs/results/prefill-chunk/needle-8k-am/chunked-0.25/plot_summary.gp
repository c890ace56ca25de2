# Re-render: cd into this directory and run: gnuplot plot_summary.gp
set terminal pngcairo size 1000,640 noenhanced
set output 'summary.png'
set title 'accuracy vs KV cache held (mean over 2 needle tasks: passkey, niah)'."\n".'needle-v1-3.7M-f32.gguf, 8144 tokens, query-agnostic'
set xlabel 'KV cache held (MiB, log scale; tics: full x ratio)'
set ylabel 'accuracy (%), mean over the needle tasks'
set logscale x 2
set grid
set key outside right top spacing 1.1 samplen 3
set xrange [6.3237957000732425:40.853776931762695]
set xlabel offset 0,-1
set bmargin 5
set yrange [-2:102]
set xtics ("8.19\n(0.25)" 8.1895751953125, "32.8\nfull" 32.75830078125)
S = 100
set arrow from 32.683021545410156, graph 0 to 32.683021545410156, graph 1 nohead dt 2 lw 1 lc rgb 'black'
plot 'summary.dat' index 0 using 1:($2*S) with points pt 3 ps 3 lw 2 lc rgb 'black' title 'full cache', \
     'summary.dat' index 1 using ($1*1):($2*S):($3*S) with yerrorlines lc rgb '#bcbd22' pt 11 dt 1 lw 2.5 ps 1.4 title 'am'
