# Re-render: python3 plot.py (in this directory; writes the .dat and runs gnuplot)
set terminal svg size 1200,520 dynamic font 'sans,11'
set output 'depth-xeon-prefetch.svg'
set multiplot layout 1,2 title 'Full-cache decode, 2 threads, shape models (noise weights): bytes a second against the read bandwidth beside each row'
set termoption noenhanced
set grid
set key below maxrows 4 font ',8'
set title 'decode GB/s against the probes beside the row'
set xlabel 'read bandwidth beside the row (GB/s)'
set ylabel 'decode: (weights + KV bytes) a second (GB/s)'
set xrange [0:*]
set yrange [0:*]
plot 'depth-xeon-prefetch.dat' index 0 using 4:5 with points pt 7 lc rgb '#2ca02c' title 'smollm2-135m f16 r1', 'depth-xeon-prefetch.dat' index 1 using 4:5 with points pt 5 lc rgb '#2ca02c' title 'smollm2-135m q8_0 r1', 'depth-xeon-prefetch.dat' index 2 using 4:5 with points pt 7 lc rgb '#ff7f0e' title 'qwen2.5-0.5b f16 r1', 'depth-xeon-prefetch.dat' index 3 using 4:5 with points pt 5 lc rgb '#ff7f0e' title 'qwen2.5-0.5b q8_0 r1', 'depth-xeon-prefetch.dat' index 4 using 4:5 with points pt 7 lc rgb '#1f77b4' title 'llama3.2-1b f16 r1', 'depth-xeon-prefetch.dat' index 5 using 4:5 with points pt 5 lc rgb '#1f77b4' title 'llama3.2-1b q8_0 r1', 0.6*x with lines dt 3 lc rgb '#999999' title '60% of the probes'
set title 'share of the probes against depth (f16 circles, q8_0 squares; r2 dashed)'
set xlabel 'depth (tokens)'
set ylabel '% of the read bandwidth beside the row'
set logscale x 2
set xrange [700:48000]
set xtics ('1k' 1024, '4k' 4096, '8k' 8192, '16k' 16384, '32k' 32700)
set yrange [0:120]
unset key
plot 'depth-xeon-prefetch.dat' index 0 using 1:3 with linespoints pt 7 dt 1 lc rgb '#2ca02c' notitle, 'depth-xeon-prefetch.dat' index 1 using 1:3 with linespoints pt 5 dt 1 lc rgb '#2ca02c' notitle, 'depth-xeon-prefetch.dat' index 2 using 1:3 with linespoints pt 7 dt 1 lc rgb '#ff7f0e' notitle, 'depth-xeon-prefetch.dat' index 3 using 1:3 with linespoints pt 5 dt 1 lc rgb '#ff7f0e' notitle, 'depth-xeon-prefetch.dat' index 4 using 1:3 with linespoints pt 7 dt 1 lc rgb '#1f77b4' notitle, 'depth-xeon-prefetch.dat' index 5 using 1:3 with linespoints pt 5 dt 1 lc rgb '#1f77b4' notitle, 60 with lines dt 3 lc rgb '#999999'
unset multiplot
