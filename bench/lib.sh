# SPDX-License-Identifier: MIT
# Sourced by the bench scripts: their work directory, and running a
# command under /usr/bin/time (into $logs, which the caller sets).

# Sets tmp to the work directory: KEEP (created, must be empty, kept) or a
# fresh mktemp -d directory under TMPDIR, removed at exit.  Uses the
# caller's die.
work_dir() { # NAME KEEP
	if [ -n "$2" ]; then
		mkdir -p "$2" || die "cannot create $2"
		[ -z "$(ls -A "$2")" ] || die "--keep $2: the directory is not empty"
		tmp=$(cd "$2" && pwd)
	else
		tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
		trap 'rm -rf "$tmp"' EXIT
	fi
}

# Runs CMD under /usr/bin/time, its stdout to NAME.out and its stderr to
# ERR (default NAME.err); NAME.time gets "WALL_S PEAK_KB" and NAME.status
# the exit status (128+N for signal N).  Returns the status.
timed() { # NAME [--stderr ERR] CMD...
	local name=$1 st=0 err
	shift
	err=$logs/$name.err
	if [ "$1" = --stderr ]; then err=$2; shift 2; fi
	/usr/bin/time -f '%e %M' -o "$logs/$name.time" "$@" \
		>"$logs/$name.out" 2>"$err" || st=$?
	if grep -q '^Command terminated by signal' "$logs/$name.time"; then
		st=$((128 + $(sed -n 's/^Command terminated by signal \([0-9]*\).*/\1/p' "$logs/$name.time")))
	fi
	echo "$st" >"$logs/$name.status"
	return "$st"
}
# The "WALL_S PEAK_KB" line of NAME.time (time puts a note before it when
# the command failed).
times_of() { tail -n 1 "$logs/$1.time"; }

bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# One line naming what the figures were measured on, printed by every bench
# (the README quotes figures with it): processors, CPU model, load average
# (a figure taken at a load above the processor count is a busy machine's),
# kernel, and the file system the work directory is on.
machine_line() { # [PREFIX]
	local cpu fs
	cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
	fs=$(df -PT "${TMPDIR:-/tmp}" 2>/dev/null | awk 'NR == 2 {print $2}')
	printf '%smachine: %s CPUs (nproc), %s, load average %s, Linux %s, TMPDIR %s (%s)\n' \
		"${1:-}" "$(nproc)" "${cpu:-unknown CPU}" "$(cut -d' ' -f1-3 /proc/loadavg)" \
		"$(uname -r)" "${TMPDIR:-/tmp}" "${fs:-unknown}"
}

# The node recording of bench-inject.sh and bench-floor.sh, in DIR (node's
# cwd: perf.data and jit-PID.dump land there): perf record -k mono
# -e cpu-clock -N (RECORD_ARGS, default -g) of gen-big-node.js GEN_ARGS
# under node --perf-prof --perf-prof-unwinding-info
# --interpreted-frames-native-stack.  Uses the caller's $perf and $node;
# perf's build-id cache is DEBUG; output to LOG.out and LOG.err.
node_record() { # DIR GEN_ARGS DEBUG LOG [RECORD_ARGS...]
	local dir=$1 gen=$2 debug=$3 log=$4
	shift 4
	[ $# -gt 0 ] || set -- -g
	# shellcheck disable=SC2086
	(cd "$dir" && "$perf" --buildid-dir "$debug" record -k mono "$@" -e cpu-clock -N \
		-o perf.data -- "$node" --perf-prof --perf-prof-unwinding-info \
		--interpreted-frames-native-stack "$bench_dir/gen-big-node.js" $gen \
		>"$log.out" 2>"$log.err")
}

# xray-big (xray-big.cc): trace bytes an iteration (both threads), the
# iterations for about BYTES of trace, and building it with CLANGXX.
xray_bytes_per_iter=1886
xray_iterations() { echo $(( ($1 + xray_bytes_per_iter / 2) / xray_bytes_per_iter )); } # BYTES
xray_build() { # CLANGXX BIN (errors on stderr)
	"$1" -O1 -fxray-instrument -fxray-instruction-threshold=1 \
		"$bench_dir/xray-big.cc" -o "$2" -lpthread
}
# Runs BIN ITERATIONS in OUT's directory under `timed NAME` (so $logs/NAME.*
# hold its counts and time) in FDR mode and renames the one trace it wrote
# to OUT.  Returns non-zero when the run fails or wrote no single trace.
xray_trace() { # NAME BIN ITERATIONS OUT
	local d f
	d=$(cd "$(dirname "$4")" && pwd)
	(cd "$d" && export XRAY_OPTIONS="xray_mode=xray-fdr xray_logfile_base=$d/xray-big-" &&
		timed "$1" "$2" "$3") || return 1
	mapfile -t f < <(find "$d" -maxdepth 1 -name 'xray-big-*')
	[ "${#f[@]}" -eq 1 ] || { echo "expected one xray-big-* trace in $d, found ${#f[@]}" >&2; return 1; }
	mv "${f[0]}" "$4"
}
