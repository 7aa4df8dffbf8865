#!/bin/sh
# Writes DIR/report.md from what the main job produced there: the gate's table
# (verify.txt), the benchmark (bench.json, converted to bench/cases.dat by
# plots/plot-all.sh), the stability study (stability/), the learning curves
# (learning/), the figures (*.png) and each step's status and time (status:
# lines "step exit-status seconds", written by `make report`). Any piece may
# be missing; the report says so. Pictures are linked by relative paths.
# Usage: report.sh DIR GATE_STATUS
#        report.sh --goals DIR   (make goals) only the goals and time tables of
#                                DIR/bench.json, the phases, the chunk sizes,
#                                the decay regimes and the peers (DIR/peers.json
#                                when newer than bench.json), into DIR/goals.md
#                                and printed
goals_only=0
if [ "${1:-}" = --goals ]; then goals_only=1; shift; fi
dir=$1
status=${2:-}
md=$dir/report.md

generated() {
    echo "Generated $(date -u '+%Y-%m-%d %H:%M UTC') on $(uname -m), $(nproc) cores, revision $(git rev-parse --short HEAD 2>/dev/null || echo unknown)."
}

# img FILE TITLE LOOK_FOR: the picture, and under it one line that says what
# to look for in it (docs/report.md, "The pictures"); a note where it is missing.
img() {
    if [ -f "$dir/$1" ]; then printf '![%s](%s)\n\n*Look for:* %s\n\n' "$2" "$1" "$3"; else printf '_(%s: not drawn)_\n\n' "$1"; fi
}

gate_section() {
    echo "## Correctness gate"
    echo
    if [ ! -f "$dir/verify.txt" ]; then echo "Not run (no verify.txt)."; echo; return; fi
    if [ "$status" = 0 ]; then echo "Result: **pass**"; else echo "Result: **FAIL** (exit status $status)"; fi
    echo
    echo "Normwise relative errors against the MPFR reference, in units of roundoff u of each precision;"
    echo "max/thr is the largest ratio of an error to its threshold over the variants (below 1 passes)."
    echo
    # backend x precision rows, one column per form: the verdict and the worst max/thr.
    awk '$3 ~ /^(recurrent|chunk|parallel)$/ && NF == 9 {
             k = $1 " | " $2; if (!(k in seen)) { seen[k] = 1; order[n++] = k }
             c = k SUBSEP $3; ran[c] = 1; if ($8 > worst[c]) worst[c] = $8; if ($9 != "pass") bad[c] = 1; cases[c] += $5 }
         $2 == "skipped:" || $3 == "skipped:" { s = $0; sub(/ +skipped: /, ": ", s); skip[n2++] = s }
         END {
             print "| backend | precision | recurrent | chunk | parallel |"
             print "|---|---|---|---|---|"
             for (i = 0; i < n; i++) {
                 line = "| " order[i] " |"
                 split("recurrent chunk parallel", f, " ")
                 for (j = 1; j <= 3; j++) {
                     c = order[i] SUBSEP f[j]
                     if (!(c in ran)) { line = line " - (tf32, bf16: the chunk form only) |"; continue }
                     line = line sprintf(" %s (%d cases, max/thr %.2f) |", bad[c] ? "**FAIL**" : "pass", cases[c], worst[c])
                 }
                 print line
             }
             for (i = 0; i < n2; i++) { sub(/ +/, " ", skip[i]); print ""; print "Skipped " skip[i] }
         }' "$dir/verify.txt"
    echo
    echo "<details><summary>The gate's full table</summary>"
    echo
    echo '```'
    sed -n '/^backend/,$p' "$dir/verify.txt"
    echo '```'
    echo "</details>"
    echo
}

# Every case run on P > 1 threads against its 1-thread twin, with what the
# startup probe saw: the FMA loop on all threads over P times one core's. A
# machine that does not give the run P whole cores (a busy virtual host)
# caps the first at the second.
scaling_table() {
    rows=$(awk '!/^#/ { key = $1 " " $2 " " $3 " " $4 " " $5 " " $6 " " $8 " " $10
                        if ($11 == 1) one[key] = $12; else if ($11 > 1) { n++; k[n] = key; p[n] = $11; r[n] = $12 } }
                END { for (i = 1; i <= n; i++) if (one[k[i]] > 0) { split(k[i], f, " ")
                        printf "| %s | %s | %s | %s | T=%s, n=%s%s | %s | %d | %.2f |\n", f[1], f[2], f[3], f[4], f[5], f[6],
                               (f[7] > 0 ? ", C=" f[7] : ""), f[8], p[i], r[i] / one[k[i]] } }' "$1")
    [ -n "$rows" ] || return 0
    json=$dir/bench.json
    core=$(sed -n 's/.*"falcon_peak_fp32_gflops_per_core": "\([0-9.e+]*\)".*/\1/p' "$json" 2>/dev/null | head -1)
    all=$(sed -n 's/.*"falcon_peak_gflops_all_threads": "fp32 \([0-9.e+]*\),.* on \([0-9]*\) threads.*/\1 \2/p' "$json" 2>/dev/null | head -1)
    echo "Thread scaling: tokens/s on P threads over the same case on 1 thread (medians of the same run)."
    if [ -n "$core" ] && [ -n "$all" ]; then
        set -- $all
        echo "The probe at the start of the run: fp32 FMA peak $core GFLOPS on one core, $1 on $2 threads"
        awk -v c="$core" -v a="$1" -v p="$2" 'BEGIN { printf "(%.2f times one core, of an ideal %d): the machine'"'"'s own ceiling at that moment. On a shared\n", a / c, p }'
        echo "virtual machine it changes from minute to minute; the interleaved runs of docs/report.md's thread-scaling"
        echo "note separate the kernels from the host."
    fi
    echo
    echo "| form | variant | backend | precision | shape | heads | threads | speed-up over 1 thread |"
    echo "|---|---|---|---|---|---|---|---|"
    echo "$rows"
    echo
}

# The counters of the bench.json entries named PREFIX/...: one line per case,
# "case value..." with the case's name less PREFIX/ and /real_time, one
# value per COUNTER ("-" where the entry has none), in the order the cases
# first appear. Where the run had repetitions the median's values win (the
# aggregate follows the repetitions in the file), else the one run's.
# Usage: bench_counters PREFIX COUNTER...
bench_counters() {
    json=$dir/bench.json
    [ -f "$json" ] || return 0
    pre=$1
    shift
    awk -v pre="$pre" -v keys="$*" '
        BEGIN { nk = split(keys, key, " ") }
        index($0, "\"name\": \"" pre "/") { n = $0; sub(/.*"name": "/, "", n); sub(/".*/, "", n); n = substr(n, length(pre) + 2)
                                            use = n ~ /\/real_time(_median)?$/; sub(/\/real_time(_median)?$/, "", n)
                                            if (use && !(n in seen)) { seen[n] = 1; order[m++] = n }; next }
        use { for (i = 1; i <= nk; i++) if (index($0, "\"" key[i] "\":")) { v = $2; sub(/,$/, "", v); val[n, i] = v } }
        /^ *}/ { use = 0 }
        END { for (j = 0; j < m; j++) { line = order[j]
                for (i = 1; i <= nk; i++) line = line " " ((order[j], i) in val ? val[order[j], i] : "-")
                print line } }' "$json"
}

# The micro-kernels' own entries (ukernel/..., bench/ukernels.c).
ukernel_table() {
    rows=$(bench_counters ukernel GFLOPS peak_fraction |
        awk '{ split($1, f, "/"); shape = $1; sub(/^[^\/]*\/[^\/]*\/[^\/]*\//, "", shape); gsub(/\//, ", ", shape)
               printf "| %s | %s | %s | %s | %.3g | %s |\n", f[1], f[2], f[3], shape, $2,
                      ($3 == "-" ? "-" : sprintf("%.1f%%", 100 * $3)) }')
    [ -n "$rows" ] || return 0
    echo "The micro-kernels on their own, their operands in cache (the \`ukernel/\` entries): the rate each"
    echo "reaches when nothing around it waits on memory. A form well below its kernels' rates loses the"
    echo "difference in its driver or on the caller's rows."
    echo
    echo "| kernel | backend | precision | shape | GFLOPS | fraction of FMA peak |"
    echo "|---|---|---|---|---|---|"
    echo "$rows"
    echo
}

# The decay entries (decay/<regime>/<case>, bench/cases.c): one line a
# case, "case none mild strong extreme mix ratio paired", its tokens/s under
# the study's five regimes, the near-reset regimes' cost as mild over the
# slower of extreme and mix from those medians ("-" where the run lacks
# one), and the same cost timed in pairs: the larger of extreme's and mix's
# paired_over_mild, their calls alternated with mild's so that a shared
# host's slow spell falls on both ("-" where an entry lacks the counter).
# The decay table and the goals table read it; the goal takes the paired
# figure where there is one.
decay_rates() {
    bench_counters decay tokens_per_second paired_over_mild |
        awk '{ r = $1; sub(/\/.*/, "", r); c = $1; sub(/^[^\/]*\//, "", c); if ($2 != "-") tok[c, r] = $2
               if ($3 != "-") pair[c, r] = $3
               if (!(c in seen)) { seen[c] = 1; order[m++] = c } }
             END { for (i = 0; i < m; i++) { c = order[i]; line = c
                     split("none mild strong extreme mix", reg, " ")
                     for (j = 1; j <= 5; j++) line = line " " ((c, reg[j]) in tok ? tok[c, reg[j]] : "-")
                     worst = tok[c, "extreme"] < tok[c, "mix"] ? tok[c, "extreme"] : tok[c, "mix"]
                     paired = "-"
                     if ((c, "extreme") in pair && (c, "mix") in pair)
                         paired = pair[c, "extreme"] > pair[c, "mix"] ? pair[c, "extreme"] : pair[c, "mix"]
                     print line " " ((tok[c, "mild"] > 0 && worst > 0) ? tok[c, "mild"] / worst : "-") " " paired } }'
}

decay_table() {
    rows=$(decay_rates |
        awk 'function k(x) { return x == "-" ? "-" : sprintf("%.0fk", x / 1000) }
             { c = $1; split(c, f, "/"); shape = c
               sub(/^[^\/]*\/[^\/]*\/[^\/]*\/[^\/]*\//, "", shape); gsub(/\//, ", ", shape)
               printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f[1], f[2], f[3], f[4], shape,
                      k($2), k($3), k($4), k($5), k($6), $7 == "-" ? "-" : sprintf("%.2f", $7),
                      $8 == "-" ? "-" : sprintf("%.2f", $8) }' |
        sort -t'|' -k2,2 -k3,3 -k4,4 -k6,6)
    [ -n "$rows" ] || return 0
    echo "Decay regimes (the \`decay/\` entries): the same case under the stability study's five regimes,"
    echo "tokens/s. The last two columns are a near-reset decay's cost (above 1: slower than mild): mild's"
    echo "rate over the slower of extreme and mix from the medians above, and the same timed in pairs (each"
    echo "of extreme's and mix's calls alternated with a call under mild, so that a shared host's slow spells,"
    echo "which last seconds, fall on both; the goal reads this one). The chunk form ends a block at a"
    echo "near-reset, so its blocks are shorter there, which can make it faster."
    echo
    echo "| form | variant | backend | precision | shape | none | mild | strong | extreme | mix | mild / slower of extreme, mix | the same, paired |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
    echo "$rows"
    echo
}

# The headline shapes' time: the input check's share of a call
# (validation_fraction), the share one read of every input takes at the
# probed bandwidth (validation_floor), and for the chunk form the shares of
# its micro-kernel calls and of the blocked driver's own loops
# (kernel_fraction, driver_fraction; bench/cases.c).
validation_table() {
    rows=$( { bench_counters chunk validation_fraction validation_floor kernel_fraction driver_fraction | sed 's/^/chunk /'
              bench_counters recurrent validation_fraction validation_floor | sed 's/^/recurrent /'; } |
        awk 'function pct(x) { return (x == "" || x == "-" || x == "nan" || x == "-nan") ? "-" : sprintf("%.1f%%", 100 * x) }
             { nf = split($2, f, "/"); c = f[7] ~ /^C:/ ? f[7] : ""
               if (f[1] != "falcon1" || f[4] != "T:4096" || f[nf - 1] != "heads:8" || f[nf] != "threads:1") next
               if ($1 == "chunk" && c != "C:64") next
               if ($3 == "-") next
               sub(/^n:/, "", f[5])
               printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, f[2], f[3], f[5], pct($5), pct($6), pct($3), pct($4) }' |
        sort -t'|' -k2,2 -k3,3 -k4,4 -k5,5n)
    [ -n "$rows" ] || return 0
    echo "Where a call's time goes (Falcon-1, T = 4096, 8 heads, 1 thread; chunk C = 64). For the chunk"
    echo "form, from its phase clock: the micro-kernels' calls (the products, the solve, W R, the end state)"
    echo "and the driver's own loops around them (copies, prefetches, the packing of Z^T, the system's rows, the output rows)."
    echo "The input check reads every input once before anything is written, so its share has a floor: the"
    echo "share one read of the inputs takes at the probed memory bandwidth (beyond the caches; \"-\" without"
    echo "the probe). A share near its floor is the memory's: the floor grows with the call's speed."
    echo
    echo "| form | backend | precision | n = m | micro-kernels | driver's own loops | input check | memory's floor |"
    echo "|---|---|---|---|---|---|---|---|"
    echo "$rows"
    echo
}

# The headline chunk case's phases (the phase_<phase> counters of
# --sweep=goals, bench/cases.c), one row a CPU backend: the micro-kernels'
# calls, then the driver's own loops, then the input check, and what is left
# of the call (its setup and the state's load and store, the clock's reads).
phase_table() {
    ph="phase_products phase_end_state phase_out_product phase_solve phase_pack phase_system phase_out_rows phase_prefetch phase_terms phase_copy"
    rows=$(bench_counters chunk validation_fraction $ph |
        awk 'function pct(x) { return (x == "" || x == "-" || x == "nan" || x == "-nan") ? "-" : sprintf("%.1f%%", 100 * x) }
             { nf = split($1, f, "/")
               if (f[1] != "falcon1" || f[3] != "fp32" || f[4] != "T:4096" || f[5] != "n:128" || f[7] != "C:64") next
               if (f[nf - 1] != "heads:8" || f[nf] != "threads:1" || $3 == "-") next
               line = "| " f[2]; rest = 1
               for (i = 3; i <= NF; i++) { line = line " | " pct($i); rest -= $i }
               print line " | " pct($2) " | " pct(rest - $2) " |" }' | sort)
    [ -n "$rows" ] || return 0
    echo "The chunk call phase by phase (Falcon-1, fp32, n = m = 128, C = 64; shares of a call from its phase"
    echo "clock, \`falcon-bench --phases\` prints them a block at a time): the micro-kernels' calls (the"
    echo "products [X; Q] Z^T and [X; Q] S^T, the end state's rank update, W R, the triangular solve), the"
    echo "driver's own loops (the packing of Z^T, the system's rows, the output rows, the next block's"
    echo "prefetches, the terms, the copy), the input check, and the rest of the call."
    echo
    echo "| backend | products | end state | W R | solve | pack | system | out rows | prefetch | terms | copy | input check | rest |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    echo "$rows"
    echo
}

# The headline chunk case's chunk-size sweeps (bench/C/*.dat, written by
# falcon-study bench-dat), one line each: "backend file". The goals table
# reads their default C, the chunk-size table their rates.
chunk_sweep_files() {
    for f in "$dir"/bench/C/chunk_falcon1_*_fp32_T4096_n128_h8_p1.dat; do
        [ -f "$f" ] || continue
        be=${f##*/chunk_falcon1_}
        echo "${be%_fp32_T4096_n128_h8_p1.dat} $f"
    done
}

# The chunk-size sweep of the headline chunk case: tokens/s at each C
# measured, its ratio to the best, and the library's default (auto) marked.
chunk_sweep_table() {
    rows=$(chunk_sweep_files | while read -r be f; do
               awk -v be="$be" 'BEGIN { n = 0 }
                    $1 == "#" && $2 == "auto_C" { auto = $3; next }
                    !/^#/ && $2 > 0 { c[n] = $1; tok[n] = $2; pf[n] = $4; if ($2 > best) best = $2; n++ }
                    END { if (n < 2) exit
                          for (i = 0; i < n; i++)
                              printf "| %s | %s%s | %.0fk | %.2f | %s |\n", be, c[i], c[i] == auto ? " (auto)" : "", tok[i] / 1000,
                                     tok[i] / best, (pf[i] == "" || pf[i] == "nan" || pf[i] == "-nan") ? "-" : sprintf("%.1f%%", 100 * pf[i]) }' "$f"
           done)
    [ -n "$rows" ] || return 0
    echo "The chunk size (Falcon-1, fp32, n = m = 128, T = 4096, 8 heads, 1 thread): tokens/s at each C,"
    echo "over the best C of the sweep, and the nominal fraction of the peak (a dense flop count, so it"
    echo "grows with C while the work done does not). \"auto\" is the library's default for this shape."
    echo
    echo "| backend | C | tokens/s | over the best C | fraction of FMA peak |"
    echo "|---|---|---|---|---|"
    echo "$rows"
    echo
}

# The performance goals (docs/performance.md, "Performance goals") against this run: the
# headline chunk case on the CPU backend that runs it fastest, its driver
# and input-check shares, the same case over the BLAS yardstick, the
# recurrent case on its fastest backend, the default chunk size over the
# sweep's best, and the worst decay case. A goal whose data the run lacks
# (no probe, no yardstick, a filtered run) reads "not measured".
# The peers (bench/peers.py renders its own JSON), when make goals or make
# report measured them after the benchmark: a peers.json older than
# bench.json is an earlier run's and is left out.
peers_table() {
    [ -f "$dir/peers.json" ] && [ "$dir/peers.json" -nt "$dir/bench.json" ] || return 0
    root=$(cd "$(dirname "$0")/../.." && pwd)
    "${PEERS_PYTHON:-python3}" "$root/bench/peers.py" --table "$dir/peers.json" || echo "_(peers.json unreadable)_"
    echo
}

goals_table() {
    json=$dir/bench.json
    [ -f "$json" ] || return 0
    blas=$dir/bench/blas.dat
    [ -f "$blas" ] || blas=/dev/null
    rows=$( { bench_counters chunk peak_fraction driver_fraction validation_fraction tokens_per_second | sed 's/^/chunk /'
              bench_counters recurrent peak_fraction | sed 's/^/recurrent /'
              decay_rates | awk '{ print "decay", $1, ($8 != "-" ? $8 : $7), ($8 != "-") }'
              chunk_sweep_files | while read -r be f; do
                  awk -v be="$be" '$1 == "#" && $2 == "auto_C" { print "autoc " be " " $3; exit }' "$f"
              done; } |
        awk -v blasf="$blas" '
            function num(x) { return x != "" && x != "-" && x != "nan" && x != "-nan" }
            function pct(x) { return sprintf("%.1f%%", 100 * x) }
            # one goal: its value and verdict where the run measured it (have)
            function row(goal, what, have, val, target, met) {
                printf "| %s | %s | %s | %s | %s |\n", goal, what, have ? val : "not measured", target, !have ? "-" : (met ? "met" : "**not met**") }
            BEGIN { while ((getline l < blasf) > 0) { split(l, b, " ")
                        if (l !~ /^#/ && b[1] == "fp32" && b[2] == 128 && b[3] == 128 && b[4] == 64 && num(b[6])) yard = b[6] } }
            $1 == "autoc" { autoc[$2] = $3; next }
            $1 == "decay" { if (num($3) && $3 + 0 > worst) { worst = $3 + 0; wc = $2; wp = $4 }; next }
            { nf = split($2, f, "/"); be = f[2]
              if (f[1] != "falcon1" || f[3] != "fp32" || f[4] != "T:4096" || be == "cuda" || be ~ /simde/) next
              if (f[nf - 1] != "heads:8" || f[nf] != "threads:1") next }
            $1 == "chunk" && f[5] == "n:128" && f[7] ~ /^C:/ { c = substr(f[7], 3); if (num($6)) { sweep[be, c] = $6; nc[be]++ }
                if (c == 64 && num($3) && (cbe == "" || $3 > cpk)) { cbe = be; cpk = $3; cdr = $4; cva = $5 } }
            $1 == "recurrent" && f[5] == "n:64" && num($3) && (rbe == "" || $3 > rpk) { rbe = be; rpk = $3 }
            END {
                row("chunk form, fraction of the FMA peak", "Falcon-1, fp32, n = m = 128, C = 64" (cbe != "" ? " (" cbe ")" : ""),
                    cbe != "", pct(cpk), ">= 60%", cpk >= 0.60)
                row("chunk form over the tuned BLAS", "the same over OpenBLAS on one block'"'"'s GEMMs" (yard > 0 ? " (" pct(yard) ")" : ""),
                    cbe != "" && yard > 0, sprintf("%.2f", yard > 0 ? cpk / yard : 0), "> 1", cpk > yard)
                row("recurrent form, fraction of the FMA peak", "Falcon-1, fp32, n = m = 64" (rbe != "" ? " (" rbe ")" : ""),
                    rbe != "", pct(rpk), ">= 45%", rpk >= 0.45)
                row("the chunk driver'"'"'s own loops", "share of the chunk call above", num(cdr), pct(cdr), "<= 10%", cdr <= 0.10)
                row("the input check", "share of the chunk call above", num(cva), pct(cva), "<= 4%", cva <= 0.04)
                # the sweep of the chunk case'"'"'s backend, else the fullest one
                # (the default sweep runs the chunk sizes on the best backend only)
                sb = cbe; if (!(cbe in autoc) || nc[cbe] < 2) for (k in autoc) if (nc[k] >= 2 && (sb == cbe || nc[k] > nc[sb])) sb = k
                best = 0; bc = ""; a = sb in autoc ? autoc[sb] : ""
                for (k in sweep) { split(k, kk, SUBSEP); if (kk[1] == sb && sweep[k] > best) { best = sweep[k]; bc = kk[2] } }
                swept = best > 0 && a != "" && ((sb, a) in sweep)
                row("the default chunk size", swept ? sprintf("%s: tokens/s at C = %s (auto) over the best C, %s (%.0fk); C = 64: %s", sb, a, bc, best / 1000,
                        ((sb, 64) in sweep) ? sprintf("%.2f", sweep[sb, 64] / best) : "-") : "tokens/s at C = auto over the best C of the sweep",
                    swept, sprintf("%.2f", swept ? sweep[sb, a] / best : 0), ">= 0.90", swept && sweep[sb, a] >= 0.90 * best)
                gsub(/\//, ", ", wc)
                row("no decay cliff", "mild over the slower of extreme and mix" (wp ? " (paired)" : "") ", " (worst > 0 ? "the worst case: " wc : "every decay case"),
                    worst > 0, sprintf("%.2f", worst), "<= 1.30", worst <= 1.30)
            }')
    [ -n "$rows" ] || return 0
    echo "The performance goals (docs/performance.md, \"Performance goals\") against this run: ratios from one run of this"
    echo "machine, 1 thread, T = 4096, 8 heads. A fraction of the FMA peak needs the startup probe."
    echo
    echo "| goal | measured on | value | target | |"
    echo "|---|---|---|---|---|"
    echo "$rows"
    echo
}

bench_section() {
    echo "## Throughput"
    echo
    cases=$dir/bench/cases.dat
    if [ ! -f "$cases" ]; then echo "No benchmark data (no $cases)."; echo; return; fi
    echo "Medians of Google Benchmark repetitions (\`bench.json\`; \`falcon compare\` reads it). Headline: the"
    echo "base point, Falcon-1, T = 4096, n = m = 128, 8 heads, 1 thread."
    echo
    blas=$dir/bench/blas.dat
    [ -f "$blas" ] || blas=/dev/null
    echo "BLAS-achievable: the fraction of the same peak that OpenBLAS reaches on one thread on the GEMMs"
    echo "of one chunk block of the same precision, n, m and C (the \`blas/\` entries), counted as the"
    echo "chunk form's flop model counts them: the yardstick a chunk case's fraction is read against."
    echo
    echo "| backend | precision | form | tokens/s | GFLOPS | fraction of FMA peak | BLAS-achievable |"
    echo "|---|---|---|---|---|---|---|"
    awk 'function pct(x) { return (x == "" || x == "nan" || x == "-nan") ? "-" : sprintf("%.1f%%", 100 * x) }
         FILENAME == ARGV[1] { if (!/^#/ && $4 > 0) ach[$1 " " $2 " " $3 " " $4] = $6; next }
         !/^#/ && $2 == "falcon1" && $5 == 4096 && $6 == 128 && $10 == 8 && $11 == 1 && ($8 == 64 || $8 == 0) {
             y = $1 == "chunk" ? ach[$4 " " $6 " " $7 " " $8] : ""
             printf "| %s | %s | %s | %.4g | %.3g | %s | %s |\n", $3, $4, $1, $12, $13, pct($14), pct(y) }' "$blas" "$cases" |
        sort -t'|' -k2,2 -k3,3 -k4,4
    echo
    if [ -s "$blas" ] && grep -qv '^#' "$blas"; then
        echo "The yardstick, every shape measured (OpenBLAS, 1 thread; the square products for reference):"
        echo
        echo "| precision | n | m | C | GFLOPS | fraction of FMA peak |"
        echo "|---|---|---|---|---|---|"
        # precision, then C (the square products last), then n
        grep -v '^#' "$blas" | sort -k1,1 -k4,4n -k2,2n | awk '$4 > 0 { print; next } { sq[n++] = $0 } END { for (i = 0; i < n; i++) print sq[i] }' |
            awk '{ printf "| %s | %s | %s | %s | %.3g | %s |\n", $1, $2, $3, ($4 > 0 ? $4 : "- (square)"), $5,
                   ($6 == "nan" || $6 == "-nan") ? "-" : sprintf("%.1f%%", 100 * $6) }'
        echo
    else
        why=$(sed -n 's/.*"falcon_blas": "\([^"]*\)".*/\1/p' "$dir/bench.json" 2>/dev/null | head -1)
        echo "No BLAS yardstick in this run${why:+ (falcon-bench: $why)}."
        echo
    fi
    goals_table
    validation_table
    phase_table
    chunk_sweep_table
    ukernel_table
    decay_table
    peers_table
    scaling_table "$cases"
    best=$(awk '!/^#/ && $12 > b { b = $12; n = $1 " " $2 " " $3 " " $4 " T=" $5 " n=" $6 " heads=" $10 " threads=" $11 } END { if (b) printf "%.4g tokens/s (%s)", b, n }' "$cases")
    [ -n "$best" ] && echo "Fastest case in the run: $best." && echo
    img bench-throughput-T.png "Throughput vs T" \
        "flat lines: the recurrent and chunk forms do the same work per token at any T, so a line that falls as T grows is a cost that grows with the sequence; then the gaps between backends and forms at T = 4096."
    img bench-peak-n.png "Fraction of peak vs n" \
        "fractions that rise with n (more arithmetic per value loaded), the chunk form (dashed: matrix products) above the recurrent one (solid), and the chunk points against the black BLAS-achievable line where there is one: above it, the chunk form runs its products faster than OpenBLAS runs them alone."
    img bench-chunk.png "Chunk-size sweep" \
        "the dotted default C (auto) at or near the top of its curve; the title gives the best C and the default's throughput against it (the goal: at least 0.90 of the best's)."
    if [ -f "$dir/bench-compare.png" ]; then
        echo "Hardware comparison: $(sed -n 's/^# falcon compare: //p' "$dir/compare.dat" 2>/dev/null | head -1)."
        sed -n 's/^geometric mean/Geometric mean/p' "$dir/compare.txt" 2>/dev/null | sed 's/$/./'
        echo
        sed -n 's/^\([AB]\): \(.*\)/- \1: `\2`/p' "$dir/compare.txt" 2>/dev/null
        echo
        sed -n 's/^warning: /**Warning:** /p' "$dir/compare.txt" 2>/dev/null
        echo
        img bench-compare.png "Hardware comparison" \
            "points on the diagonal and bars at 1 are cases as fast on both; a form (colour) or a backend's rows all off to one side say what differs between the machines better than the geometric mean (dashed) alone. Only the cases both files measured are drawn."
    fi
    if [ -f "$dir/bench-machines.png" ]; then
        echo "Hardware comparison of $(sed -n 's/^# machines //p' "$dir/compare-machines.dat" 2>/dev/null) machines:"
        echo
        sed -n 's/^  \([A-Z]\): \(.*\)/- \1: `\2`/p' "$dir/compare-machines.txt" 2>/dev/null
        echo
        sed -n 's/^geometric mean of/Geometric mean of/p' "$dir/compare-machines.txt" 2>/dev/null | sed 's/$/./'
        echo
        sed -n 's/^warning: /**Warning:** /p' "$dir/compare-machines.txt" 2>/dev/null
        echo
        img bench-machines.png "Hardware comparison, N machines" \
            "each machine's points close to its dashed geometric mean (one speed-up for every case) or spread by case (the machines differ in what they are fast at); the black line is A (1 = as fast as A)."
    fi
}

# The backward pass (docs/math.md section 12): the backward/ entries of
# bench.json (bench/backward.c) and the backward peer (bench/peers.py
# --backward, peers-backward.json, when newer than bench.json).
backward_section() {
    echo "## Backward pass"
    echo
    rows=$(bench_counters backward tokens_per_second forward_tokens_per_second backward_over_forward GFLOPS \
           peak_fraction |
        awk 'function k(x) { return x == "-" ? "-" : sprintf("%.1fk", x / 1000) }
             { split($1, f, "/"); shape = $1; sub(/^[^\/]*\/[^\/]*\/[^\/]*\/[^\/]*\//, "", shape); gsub(/\//, ", ", shape)
               printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f[1], f[3], f[4], shape, k($2), k($3),
                      $4 == "-" ? "-" : sprintf("%.2f", $4), $5 == "-" ? "-" : sprintf("%.3g", $5),
                      $6 == "-" ? "-" : sprintf("%.1f%%", 100 * $6) }')
    if [ -z "$rows" ]; then echo "Not measured (no backward/ entries in bench.json)."; echo; return; fi
    echo "falcon_backward on Falcon-1 (every gradient, given dO), one head: its tokens/s, the forward's tokens/s"
    echo "and the backward's time over the forward's, the two calls timed in alternation in the same run"
    echo "(the median of the rounds' ratios); GFLOPS and the fraction of the FMA peak count the backward's"
    echo "micro-kernel calls, its recomputation included (falcon_backward_flops, kernels/framework/flops.h)."
    echo "Target for the chunk form at n = m = 128: at most 2.5 times the forward's time."
    echo
    echo "| form | backend | precision | shape | backward tokens/s | forward tokens/s | backward / forward | GFLOPS | fraction of FMA peak |"
    echo "|---|---|---|---|---|---|---|---|---|"
    echo "$rows"
    echo
    if [ -f "$dir/peers-backward.json" ] && [ "$dir/peers-backward.json" -nt "$dir/bench.json" ]; then
        root=$(cd "$(dirname "$0")/../.." && pwd)
        "${PEERS_PYTHON:-python3}" "$root/bench/peers.py" --table "$dir/peers-backward.json" ||
            echo "_(peers-backward.json unreadable)_"
        echo
    fi
    img bench-backward.png "Backward pass" \
        "the backward bars against the forward ones of the same case, and ratios at or under the dashed 2.5 for the chunk form; the recurrent form's reverse step makes several passes over the memory a step, so its ratio is larger."
}

stability_section() {
    echo "## Long-sequence stability"
    echo
    fits=$dir/stability/fits.dat
    if [ ! -f "$fits" ]; then echo "Not run (no $fits)."; echo; return; fi
    sed -n 's/^falcon stability, /Study: /p' "$dir/stability.txt" 2>/dev/null
    sed -n 's/^backend \(.*\) skipped: \(.*\)/Backend \1 skipped: \2/p' "$dir/stability.txt" 2>/dev/null
    echo
    echo "Errors in units of u of the precision (outputs: cumulative normwise over 1..T; S: the final state),"
    echo "fitted as c T^p over the checkpoints; \"@1e9\" extrapolates the fit to 10^9 tokens. Falcon-1 and"
    echo "Falcon-1A, without decay and with the random decay mixture, on the most capable backend here"
    echo "(every backend, form, variant and regime: \`stability/stability.json\`, \`stability/fits.dat\`)."
    echo
    be=$(awk '!/^#/ && $1 == "fp32" && $4 !~ /simde/ { b = $4 } END { print b }' "$fits")
    echo "| precision | variant | decay | form | T max | out (u) | p out | out @1e9 | S (u) | p S | S @1e9 |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    awk -v be="$be" '!/^#/ && $4 == be && ($2 == "falcon1" || $2 == "falcon1a") && ($3 == "none" || $3 == "mix") && $5 != "parallel" {
             printf "| %s | %s | %s | %s | %.0f | %.3g | %.2f | %.3g | %.3g | %.2f | %.3g |\n", $1, $2, $3, $5, $6, $7, $8, $9, $10, $11, $12 }' "$fits"
    echo
    sed -n 's/^note: /Note: /p' "$dir/stability.txt" 2>/dev/null
    echo
    echo "References: MPFR (256 bits) up to the study's MPFR length, beyond it a long-double recurrence that the"
    echo "study checks against MPFR on the lengths both cover. Largest long-double-vs-MPFR difference seen:"
    echo
    awk '!/^#/ { k = $1; if ($7 > o[k]) o[k] = $7; if ($8 > s[k]) s[k] = $8; if ($5 > ol[k]) ol[k] = $5; if ($6 > sl[k]) sl[k] = $6; t[k] = $4 }
         END { for (k in o) printf "- %s streams: outputs %.2g u, state %.2g u (%.3g and %.3g units of long double roundoff), T <= %d\n", k, o[k], s[k], ol[k], sl[k], t[k] }' \
        "$dir/stability/refcheck.dat" | sort
    echo
    for p in fp32 fp64; do
        img "stability-$p.png" "Error vs T, $p, with fitted power laws extrapolated to 10^9" \
            "slopes p of 0 (flat: Falcon-1, and any decay) or 1/2 (random-walk rounding: Falcon-1A without decay, whose memory only accumulates; its chunk curve starts flatter, so read its slope from the last decade); a steeper slope means errors compound. The dash-dotted lines are the gate's thresholds: a flat curve stays well under them, a growing one crosses them at some T, and its broken fit line shows where before 10^9."
        img "stability-decay-$p.png" "Error by decay regime, $p" \
            "flat curves in every regime with decay (forgetting bounds the error) and no regime far above the others: extreme and mix decay to the smallest normal number, and a jump there would mean the near-resets lose accuracy; only none (no decay) may grow, for Falcon-1A. The chunk form (dashed) within a small factor of the recurrent one (solid)."
        img "stability-backends-$p.png" "Every backend and form, $p" \
            "the backends of one form (one line style) on top of each other or close: they round in different orders, not to different accuracy, so one apart from the others points at its kernel. In the quick profile the backends other than the most capable one stop a decade short of it (stability.json: tmax_other_backends). The parallel form (dotted) stops at a short T, and its error grows within its block."
    done
    formats_section "$fits"
    beyond_section
}

# The tensor-core operand formats next to fp32 and fp64: the chunk form of
# Falcon-1 and Falcon-3 in every decay regime.
formats_section() {
    fits=$1
    grep -q '^tf32 ' "$fits" || return 0
    echo "### tf32 and bf16 operands (chunk form)"
    echo
    echo "The chunk form with its matrix products' operands rounded to tf32 (unit roundoff u = 2^-11) or bf16"
    echo "(2^-8) and fp32 accumulation, as tensor cores compute, next to fp32 and fp64 on the same backend."
    echo "Errors of the outputs (cumulative over 1..T) at the longest T, in units of each precision's u, the"
    echo "fitted p, and the plain relative error (u times the error):"
    echo
    be=$(awk '$1 == "tf32" { print $4; exit }' "$fits")
    echo "| variant | decay | fp32: out (u) | p | tf32: out (u) | p | rel. error | bf16: out (u) | p | rel. error |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    awk -v be="$be" '!/^#/ && $4 == be && $5 == "chunk" && ($2 == "falcon1" || $2 == "falcon3") {
             k = $2 " " $3; o[k, $1] = $7; p[k, $1] = $8; if (!(k in seen)) { seen[k] = 1; keys[n++] = k } }
         END { for (i = 0; i < n; i++) { k = keys[i]; split(k, a, " ")
             if (o[k, "tf32"] == "") continue
             printf "| %s | %s | %.3g | %.2f | %.3g | %.2f | %.2g | %.3g | %.2f | %.2g |\n", a[1], a[2], o[k, "fp32"], p[k, "fp32"],
                 o[k, "tf32"], p[k, "tf32"], o[k, "tf32"] * 2^-11, o[k, "bf16"], p[k, "bf16"], o[k, "bf16"] * 2^-8 } }' "$fits"
    echo
    img stability-formats.png "fp64, fp32, tf32 and bf16 operands, chunk form, every decay regime" \
        "in each column the curves a small multiple of that format's u (dotted) and under its gate threshold (dash-dotted), flat in T in every regime: each step down the ladder costs about the ratio of the two formats' u, and no more."
}

# Measured past the fit's range: the study's own (profiles deep, huge) or
# a deep study in deep/.
beyond_section() {
    for sd in stability deep; do
        bd=$dir/$sd/beyond.dat
        [ -f "$bd" ] && grep -qv '^#' "$bd" || continue
        echo "### Past the fit's range ($sd/)"
        echo
        tfit=$(awk '!/^#/ { print $6; exit }' "$bd")
        echo "Fitted c T^p on T <= $tfit, measured beyond it; \"p held\": the measured error at the last T is"
        echo "within a factor 2 of the fit's extrapolation there (outputs; the state's is in $sd/beyond.dat)."
        echo
        echo "| precision | variant | decay | backend | form | T | measured (u) | extrapolated (u) | p fitted | p past the range | p held |"
        echo "|---|---|---|---|---|---|---|---|---|---|---|"
        awk '!/^#/ { printf "| %s | %s | %s | %s | %s | %.0f | %.3g | %.3g | %.3f | %.3f | %s |\n", $1, $2, $3, $4, $5, $7, $8, $9, $11, $12, $13 }' "$bd"
        echo
        img "$sd-beyond.png" "Past the fit's range ($sd/)" \
            "the open points (measured past the fit's range, right of the dotted line) on their broken fit line: within a factor 2 at the last one the key says p held; points that bend above the line mean the extrapolation to 10^9 is low."
    done
}

# The backward pass's stability (falcon stability --grad): fitted p per
# tensor, the stand-in's check, one figure per variant.
stability_grad_section() {
    echo "## Stability of the gradients"
    echo
    sg=$dir/stability-grad
    if [ ! -f "$sg/fits.dat" ]; then echo "Not run (no $sg/fits.dat)."; echo; return; fi
    sed -n 's/^falcon stability --grad, /Study: /p' "$dir/stability-grad.txt" 2>/dev/null
    echo
    echo "The fp32 backward pass (docs/math.md section 12), recurrent form: each gradient tensor's normwise"
    echo "relative error at the longest T, in units of u, and the p of c T^p fitted over every length (each"
    echo "length its own call). The chunk form's and the fits' c: \`stability-grad/fits.dat\`."
    echo
    echo "| variant | decay | dq | dk | dv | dbeta | dalpha | dS0 |"
    echo "|---|---|---|---|---|---|---|---|"
    awk '!/^#/ && $3 == "recurrent" { k = $1 " " $2; if (!(k in seen)) { seen[k] = 1; keys[n++] = k }
             cell[k, $4] = sprintf("%.3g (p %.2f)", $6, $7) }
         END { split("dq dk dv dbeta dalpha dS0", t, " ")
             for (i = 0; i < n; i++) { k = keys[i]; split(k, a, " "); printf "| %s | %s |", a[1], a[2]
                 for (j = 1; j <= 6; j++) printf " %s |", ((k, t[j]) in cell) ? cell[k, t[j]] : "-"
                 printf "\n" } }' "$sg/fits.dat"
    echo
    awk '$1 == "verdict" { c[$4]++; if ($5 > b) b = $5 }
         END { printf "Reference: MPFR on the shorter lengths; beyond, the fp64 backward pass, checked against MPFR on those lengths first: "
               printf "%d streams accepted it, %d refused, %d unchecked; its error extrapolated to the longest T is at most %.2g fp32 u (`stability-grad/standin.dat`).\n", c["accepted"], c["refused"], c["unchecked"], b }' \
        "$sg/standin.dat" 2>/dev/null
    echo
    img stability-grad-falcon1.png "Gradient error vs T, falcon1" \
        "flat curves (p near 0) in every tensor and regime, no decay included: the regression update is non-expansive, so an adjoint's rounding errors do not compound over the reverse sweep. The chunk form (dashed) within a small factor of the recurrent one (solid); no step at the dotted line, where the reference changes from MPFR to the checked fp64 stand-in."
    img stability-grad-falcon3.png "Gradient error vs T, falcon3 (W = 4)" \
        "the same flat curves as Falcon-1: the window of four examples changes the constant, not the slope; a slope here would mean the rehearsed examples' gradients compound."
    img stability-grad-falcon1a.png "Gradient error vs T, falcon1a" \
        "without decay (none) every tensor grows like T^1/2: the inner-product memory and its adjoint are plain sums of T steps, whose rounding errors random-walk (the chunk form, summing within blocks, starts flatter and steepens toward 1/2 once the carried state's error dominates: read its slope from the last decade); reset-slow rises until its 0.999 decay's horizon of about 1000 steps, then levels off; every other regime is flat. Any slope above 1/2 would mean errors compound."
}

learning_section() {
    echo "## Learning quality"
    echo
    tuned=$dir/learning/tuned.dat
    if [ ! -f "$tuned" ]; then echo "Not run (no $tuned)."; echo; return; fi
    sed -n 's/^falcon stability --learning, /Setup: /p' "$dir/learning.txt" 2>/dev/null
    echo
    echo "A stream whose next value follows the current key through a slowly drifting linear map plus noise;"
    echo "the error is sum |o_t - v_{t+1}|^2 / sum |v_{t+1}|^2 (1: no better than predicting 0). Hyper-parameters"
    echo "chosen at T0 by grid search (\`learning/learning.json\` has the grid), curves run to the longest length:"
    echo
    echo "| variant | alignment | decay | beta | alpha | W | error over 1..T0 (tuning) | error, last bin |"
    echo "|---|---|---|---|---|---|---|---|"
    awk '!/^#/ { printf "| %s | %s | %s | %s | %s | %s | %.3g | %.3g |\n", $1, $2, $3, $4, $5, $6, $7, $8 }' "$tuned"
    echo
    img learning-tuned.png "Tuned variants, prefix vs same alignment" \
        "on the left (prefix alignment), the curves that reach the noise floor (dotted) and stay there past T0, and those that climb after it (the inner-product 'a' variants without decay: their memory only accumulates); on the right (same-step alignment), every curve at about 1 or above: that pairing cannot learn this relation."
    img learning-alignment.png "Temporal alignment" \
        "the solid (prefix) curves below the dashed (same-step) ones at the same parameters: the gap is what the alignment alone buys; same-step stays at about 1, no better than predicting 0."
    img learning-plasticity.png "Plasticity (beta)" \
        "the step size beta whose curve gets closest to the noise floor (dotted) and stays there past T0; a beta too small learns slowly (high on the left), one too large sits above 1 or climbs with T."
    img learning-forgetting.png "Forgetting (alpha)" \
        "the largest alpha that stays flat: a smaller one forgets too fast and settles higher; alpha = 1 (no decay) holds for Falcon-1, whose update corrects its residual, and climbs for Falcon-1A, whose memory only accumulates."
    img learning-rehearsal.png "Rehearsal (window W)" \
        "how far apart the windows' curves are: close together, rehearsal changes little on this stream (why: below)."
    echo "Rehearsal changes little for Falcon-3A: the normaliser sums the whole window, so each example is"
    echo "written on W steps with about 1/W of the weight each, the same total as W = 1 spread over W steps."
    echo "Falcon-3's curves move a little more (each rewrite corrects the residual the previous write left),"
    echo "but on this stream no window does much better than W = 1."
    echo
}

if [ $goals_only = 1 ]; then
    md=$dir/goals.md
    {
        echo "# Performance goals"
        echo
        generated
        echo
        goals_table
        validation_table
        phase_table
        chunk_sweep_table
        decay_table
        peers_table
    } > "$md.tmp-$$" || { rm -f "$md.tmp-$$"; echo "report.sh: cannot write $md" >&2; exit 2; }
    if ! grep -q '^| goal |' "$md.tmp-$$"; then
        rm -f "$md.tmp-$$"
        echo "report.sh: no goals measured in $dir/bench.json" >&2
        exit 1
    fi
    mv -f "$md.tmp-$$" "$md"
    cat "$md"
    echo "wrote $md"
    exit 0
fi

{
    echo "# Falcon suite report"
    echo
    generated
    echo
    if [ -f "$dir/status" ]; then
        echo "| step | result | seconds |"
        echo "|---|---|---|"
        awk '$1 == "total" { print "| total | | " $3 " |"; next }
             { r = $2 == "-" ? "not run" : $2 == 0 ? "ok" : "**failed** (status " $2 ")"; print "| " $1 " | " r " | " $3 " |" }' "$dir/status"
        echo
    fi
    gate_section
    bench_section
    backward_section
    stability_section
    stability_grad_section
    learning_section
} > "$md.tmp-$$" || { rm -f "$md.tmp-$$"; echo "report.sh: cannot write $md" >&2; exit 2; }
mv -f "$md.tmp-$$" "$md" # whole or not at all: an earlier report.md stays if this one fails
echo "wrote $md"
