# Re-render: gnuplot depth-sweep.gp (in this directory)
set terminal svg size 1200,480 dynamic font 'sans,11'
set output 'depth-sweep.svg'
set multiplot layout 1,3 title 'Decode tok/s against depth (2 threads; shape models, noise weights)'
set termoption noenhanced
set logscale xy 2
set xlabel 'depth (tokens)'
set ylabel 'decode tok/s'
set key below maxrows 2 font ',9'
set grid
set title 'llama3.2-1b-q8_0'
plot 'depth-sweep.dat' index 0 using 1:2 with linespoints lc rgb '#999999' dt 2 title 'llama.cpp fa f16', 'depth-sweep.dat' index 0 using 1:3 with linespoints lc rgb '#555555' dt 3 title 'llama.cpp fa q8_0', 'depth-sweep.dat' index 0 using 1:4 with linespoints lc rgb '#1f77b4' lw 2 title 'kvtrim full f16', 'depth-sweep.dat' index 0 using 1:5 with linespoints lc rgb '#ff7f0e' title 'kvtrim snapkv 0.25', 'depth-sweep.dat' index 0 using 1:6 with linespoints lc rgb '#2ca02c' title 'kvtrim snapkv 0.1'
set title 'qwen2.5-0.5b-q8_0'
plot 'depth-sweep.dat' index 1 using 1:2 with linespoints lc rgb '#999999' dt 2 title 'llama.cpp fa f16', 'depth-sweep.dat' index 1 using 1:3 with linespoints lc rgb '#555555' dt 3 title 'llama.cpp fa q8_0', 'depth-sweep.dat' index 1 using 1:4 with linespoints lc rgb '#1f77b4' lw 2 title 'kvtrim full f16', 'depth-sweep.dat' index 1 using 1:5 with linespoints lc rgb '#ff7f0e' title 'kvtrim snapkv 0.25', 'depth-sweep.dat' index 1 using 1:6 with linespoints lc rgb '#2ca02c' title 'kvtrim snapkv 0.1'
set title 'smollm2-135m-q8_0'
plot 'depth-sweep.dat' index 2 using 1:2 with linespoints lc rgb '#999999' dt 2 title 'llama.cpp fa f16', 'depth-sweep.dat' index 2 using 1:3 with linespoints lc rgb '#555555' dt 3 title 'llama.cpp fa q8_0', 'depth-sweep.dat' index 2 using 1:4 with linespoints lc rgb '#1f77b4' lw 2 title 'kvtrim full f16', 'depth-sweep.dat' index 2 using 1:5 with linespoints lc rgb '#ff7f0e' title 'kvtrim snapkv 0.25', 'depth-sweep.dat' index 2 using 1:6 with linespoints lc rgb '#2ca02c' title 'kvtrim snapkv 0.1'
unset multiplot
