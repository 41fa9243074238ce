# SPDX-License-Identifier: MIT
# Sourced by the bench scripts: running a command under /usr/bin/time.
# The caller sets $logs (a directory) before calling these.

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
