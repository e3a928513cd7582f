# SPDX-License-Identifier: MIT
# Plots of `tp-bench sim --csv FILE`: one figure per metric over simulated time, one line per
# policy. Variables (gnuplot -e): csv (the CSV), out (prefix of the output files), policies
# (space-separated policy names, as in the CSV's first column), and optionally waits and gains
# (the PREFIX-waits.csv and PREFIX-gains.csv that tp-bench sim --plot PREFIX writes: the
# queueing-delay distribution and the effective GPU-hours per policy). tp-bench sim runs
#   gnuplot -e "csv='sim.csv'; out='sim'; policies='random ...'; waits='sim-waits.csv';
#               gains='sim-gains.csv'" bench/sim_plot.gp
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

# torus fleets (tp-bench sim --fleet torus:X,Y,Z): the largest wholly free box over time
if (system(sprintf("head -1 '%s' | grep -c largest_free_box", csv)) + 0 > 0) {
	set output sprintf("%s-torus-box.%s", out, ext)
	set title "Torus: chips of the largest wholly free box"
	set ylabel "chips"
	set yrange [0:*]
	plot for [p in policies] csv using 2:(strcol(1) eq p ? column(10) : NaN) every ::1 \
		with lines lw 1.5 title p
}

if (exists("waits")) {
	set output sprintf("%s-delays.%s", out, ext)
	set title "Queueing delay distribution (share of started jobs that waited at most x)"
	set xlabel "queueing delay (h)"
	set ylabel "share of jobs"
	set yrange [0:1.05]
	set xrange [0:*]
	plot for [p in policies] waits using 3:(strcol(1) eq p ? column(2) : NaN) every ::1 \
		with lines lw 1.5 title p
	unset xrange
}

if (exists("gains")) {
	set output sprintf("%s-gains.%s", out, ext)
	base = system(sprintf("head -1 '%s' | cut -d, -f3 | cut -c4-", gains))
	set title sprintf("Effective GPU-hours per policy, relative to %s", base) noenhanced
	set xlabel ""
	set ylabel sprintf("effective GPU-hours / %s's", base) noenhanced
	set yrange [0:*]
	unset key
	set style fill solid 0.6
	set boxwidth 0.6
	set xtics rotate by -30
	plot gains using 0:3:xtic(1) every ::1 with boxes, \
		'' using 0:3:(sprintf("%.2f", column(3))) every ::1 with labels offset 0,0.7
}

unset output
