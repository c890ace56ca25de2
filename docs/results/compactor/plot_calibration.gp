set terminal pngcairo size 900,600
set output 'calibration.png'
set key outside right
set xlabel 'predicted quality f(r; alpha NLL(c) + beta)'
set ylabel 'measured y = NLL(full) / NLL(compressed)'
set title 'Calibration: predicted against measured quality'
plot x with lines dt 2 lc rgb 'black' title 'y = x', 'calib_points.dat' index 0 with points pt 7 title 'compactor (fit)', 'calib_points.dat' index 1 with points pt 6 title 'compactor (held out)', 'calib_points.dat' index 2 with points pt 7 title 'h2o (fit)', 'calib_points.dat' index 3 with points pt 6 title 'h2o (held out)', 'calib_points.dat' index 4 with points pt 7 title 'pyramidkv (fit)', 'calib_points.dat' index 5 with points pt 6 title 'pyramidkv (held out)', 'calib_points.dat' index 6 with points pt 7 title 'snapkv (fit)', 'calib_points.dat' index 7 with points pt 6 title 'snapkv (held out)'
