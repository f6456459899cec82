# bench/handoff.gp — the chart of docs/BENCHMARKS.md: cumulative distributions of cross-worker
# handoff latency (release issued -> next worker's acquire returns) in the contended scenario,
# one curve per library/layout. Run by scripts/bench --report (make bench-report):
#   gnuplot -e "out='handoff.png'; files='a.txt b.txt'; titles='dlock|redis-py'" bench/handoff.gp
# Each file holds one latency in microseconds per line.
set terminal pngcairo size 1000,600 enhanced font 'DejaVu Sans,11'
set output out
set title "Contended handoff latency: release issued → next worker's acquire returns (8 workers, 1 ms holds)"
set xlabel 'handoff latency (µs, log scale)'
set ylabel 'fraction of handoffs ≤ x'
set logscale x 10
set format x '10^{%L}'
set xrange [10:*]
set yrange [0:1.02]
set ytics 0.1
set grid xtics mxtics ytics
set key right bottom box opaque
set arrow from 1000, graph 0 to 1000, graph 1 nohead dashtype 2 lc rgb '#888888'
set label '1 ms (p99 target)' at 1000, graph 0.05 offset 0.5,0 textcolor rgb '#666666'
n = words(files)
title_of(i) = system(sprintf("echo '%s' | cut -d'|' -f%d", titles, i))
plot for [i=1:n] word(files, i) using 1:(1.0) smooth cnormal linewidth 2 title title_of(i)
