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
