# SPDX-License-Identifier: MIT
# Plots of tp-bench compare (bench/compare.c): gain over the best peer and gap to the ideal
# bound, per cell (workload / fleet / queue discipline) and policy, from PREFIX-summary.csv.
# Variables: data (the summary CSV), out (the prefix), npol (policies; gain columns 2..npol+1,
# gap columns npol+2..2*npol+1).
set datafile separator ','
set terminal pngcairo size 1400,700 noenhanced font ',9'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key outside right top
set xtics rotate by -35 left
set grid ytics
set ylabel '%'
set offsets graph 0, 0, 0.08, 0.08

set output out.'-gain.png'
set title 'Effective GPU-hours: gain over the best peer (kueue-like, slurm-block-like, slurm-tree-like), %'
plot for [c=2:npol+1] data using c:xtic(1) title columnheader(c)

set output out.'-gap.png'
set title 'Effective GPU-hours: gap to the ideal bound, %'
plot for [c=npol+2:2*npol+1] data using c:xtic(1) title columnheader(c)
