# SPDX-License-Identifier: MIT
# Plots of `tp-bench sim --csv FILE`: one figure per metric over simulated time, one line per
# policy. Variables (gnuplot -e): csv (the CSV), out (prefix of the output files), policies
# (space-separated policy names, as in the CSV's first column). tp-bench sim --plot PREFIX runs
#   gnuplot -e "csv='sim.csv'; out='sim'; policies='random first-fit ...'" bench/sim_plot.gp
# PNG through pngcairo (or png) when gnuplot has it, else SVG.
if (!exists("csv")) csv = "sim.csv"
if (!exists("out")) out = "sim"
if (!exists("policies")) policies = "random first-fit kueue-like slurm-block-like topoplace topoplace-defrag ideal"

ext = "svg"
if (strstrt(GPVAL_TERMINALS, "pngcairo") > 0) {
	set terminal pngcairo size 1000,560 font ",10"
	ext = "png"
} else {
	if (strstrt(GPVAL_TERMINALS, " png ") > 0) {
		set terminal png size 1000,560
		ext = "png"
	} else {
		set terminal svg size 1000,560
	}
}

set datafile separator ","
set key outside right top
set grid
set xlabel "simulated time (h)"

# column numbers in the CSV
c_occ = 4; c_eff = 5; c_queued = 6; c_fragnv = 8; c_fragnode = 9

set output sprintf("%s-occupancy.%s", out, ext)
set title "GPU occupancy"
set ylabel "busy GPUs / fleet"
set yrange [0:1.05]
plot for [p in policies] csv using 2:(strcol(1) eq p ? column(c_occ) : NaN) every ::1 \
	with lines lw 1.5 title p

set output sprintf("%s-effective.%s", out, ext)
set title "Effective GPUs (busy GPUs x placement efficiency)"
set ylabel "GPUs"
set yrange [0:*]
plot for [p in policies] csv using 2:(strcol(1) eq p ? column(c_eff) : NaN) every ::1 \
	with lines lw 1.5 title p

set output sprintf("%s-queue.%s", out, ext)
set title "Queued jobs"
set ylabel "jobs"
set yrange [0:*]
plot for [p in policies] csv using 2:(strcol(1) eq p ? column(c_queued) : NaN) every ::1 \
	with lines lw 1.5 title p

set output sprintf("%s-fragmentation.%s", out, ext)
set title "Fragmentation: share of free GPUs outside fully free NVLink domains"
set ylabel "share"
set yrange [0:1.05]
plot for [p in policies] csv using 2:(strcol(1) eq p ? column(c_fragnv) : NaN) every ::1 \
	with lines lw 1.5 title p

unset output
