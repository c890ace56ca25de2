# echo score, needle-v1-3.7M-f32.gguf (boxed: retrieval query heads): rows = layer, columns = query head
# Re-render: cd into this directory and run: gnuplot plot_profile_echo.gp
set terminal pngcairo size 720,380
set output 'profile_echo.png'
set title 'echo score, needle-v1-3.7M-f32.gguf (boxed: retrieval query heads)'
set xlabel 'query head'
set ylabel 'layer'
set xrange [-0.5:7.5]
set yrange [-0.5:3.5]
set xtics 1
set ytics 1
set cbrange [0:*]
set palette defined (0 'white', 1 '#fdae61', 2 '#d7191c')
unset key
set object 1 rect from 4.5,0.5 to 5.5,1.5 front fillstyle empty border lc rgb 'black' lw 3
set object 2 rect from -0.5,2.5 to 0.5,3.5 front fillstyle empty border lc rgb 'black' lw 3
set object 3 rect from 0.5,2.5 to 1.5,3.5 front fillstyle empty border lc rgb 'black' lw 3
set object 4 rect from 1.5,2.5 to 2.5,3.5 front fillstyle empty border lc rgb 'black' lw 3
set object 5 rect from 2.5,2.5 to 3.5,3.5 front fillstyle empty border lc rgb 'black' lw 3
set object 6 rect from 6.5,2.5 to 7.5,3.5 front fillstyle empty border lc rgb 'black' lw 3
plot 'profile_echo.dat' matrix with image, '' matrix using 1:2:(sprintf('%.3f', $3)) with labels font ',9'
