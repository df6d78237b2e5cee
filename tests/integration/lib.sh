# Shared helpers for the integration tests: mount skillfs for real in a
# temporary directory, run real programs against it, and always unmount.
# Each test script sources this file, defines test_* functions, and calls
# run_tests. SKILLFS (the binary) comes from the environment (meson sets it).

set -u

: "${SKILLFS:?SKILLFS must name the skillfs binary}"
SRC_ROOT=${SKILLFS_SOURCE_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}

T=$(mktemp -d "${TMPDIR:-/tmp}/skillfs-test.XXXXXX")
# A mount given no --state keeps its runs under $XDG_STATE_HOME: here, never
# in the home directory (nor shared with another skillfs running there).
export XDG_STATE_HOME=$T/state-home
MNT=$T/mnt
DAEMON_PID=
DAEMON_LOG=$T/daemon.log
FAILS=0
PASSES=0
CURRENT=

cleanup() {
	stop_mount
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
	echo "FAIL [$CURRENT]: $*" >&2
	FAILS=$((FAILS + 1))
	return 1
}

# start_mount ARGS...: runs skillfs in the foreground on $MNT with ARGS and
# waits (up to 10 s) until the mount is live.
start_mount() {
	mkdir -p "$MNT"
	"$SKILLFS" -f "$@" "$MNT" >>"$DAEMON_LOG" 2>&1 &
	DAEMON_PID=$!
	for _ in $(seq 1 200); do
		if grep -qs " $MNT fuse" /proc/self/mounts; then
			return 0
		fi
		if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
			cat "$DAEMON_LOG" >&2
			DAEMON_PID=
			fail "skillfs exited before mounting"
			return 1
		fi
		sleep 0.05
	done
	cat "$DAEMON_LOG" >&2
	fail "mount did not come up within 10 s"
	return 1
}

# stop_mount: unmounts (lazily if needed), waits for the daemon, and fails
# the current test if the daemon reported an error or a sanitizer finding.
stop_mount() {
	if grep -qs " $MNT fuse" /proc/self/mounts; then
		fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null || true
	fi
	if [ -n "$DAEMON_PID" ]; then
		for _ in $(seq 1 100); do
			kill -0 "$DAEMON_PID" 2>/dev/null || break
			sleep 0.05
		done
		if kill -0 "$DAEMON_PID" 2>/dev/null; then
			kill -9 "$DAEMON_PID" 2>/dev/null
			echo "daemon did not exit after unmount" >&2
			FAILS=$((FAILS + 1))
		fi
		wait "$DAEMON_PID" 2>/dev/null
		DAEMON_PID=
	fi
	if grep -qE 'AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:' "$DAEMON_LOG" 2>/dev/null; then
		echo "daemon reported a sanitizer error:" >&2
		cat "$DAEMON_LOG" >&2
		FAILS=$((FAILS + 1))
	fi
	: >"$DAEMON_LOG"
}

assert_eq() { # expected actual message
	[ "$1" = "$2" ] || fail "$3: expected [$1], got [$2]"
}

assert_file_eq() { # expected-file actual-file
	cmp -s "$1" "$2" || fail "$2 differs from $1"
}

# expect_fail ERRTEXT CMD...: CMD must fail and print ERRTEXT (the strerror
# of the expected errno, e.g. "Permission denied").
expect_fail() {
	local want=$1
	shift
	local out
	if out=$("$@" 2>&1); then
		fail "'$*' succeeded; expected '$want'"
		return 1
	fi
	case "$out" in
	*"$want"*) return 0 ;;
	*) fail "'$*' failed with [$out]; expected '$want'" ;;
	esac
}

# wait_for TIMEOUT_S CMD...: retries CMD until it succeeds or time runs out.
wait_for() {
	local limit=$1
	shift
	local end=$(($(date +%s%N) + limit * 1000000000))
	while [ "$(date +%s%N)" -lt "$end" ]; do
		"$@" && return 0
		sleep 0.02
	done
	"$@"
}

# file_is FILE TEXT: the file's content (without trailing newlines) is TEXT.
file_is() {
	[ "$(cat "$1" 2>/dev/null)" = "$2" ]
}

# require_bwrap: a script whose every test needs bubblewrap skips (exit 77)
# without it, and fails under CI, which installs it.
require_bwrap() {
	command -v bwrap >/dev/null 2>&1 && return 0
	[ -n "${CI:-}" ] && { echo "bubblewrap is missing under CI" >&2; exit 1; }
	echo "SKIP: bubblewrap (bwrap) is not installed"
	exit 77
}

# ---- runs with a scripted model (tests/fake_model) ----

# json_args KEY VALUE: the JSON object {KEY: VALUE} (VALUE a string).
json_args() {
	python3 -c 'import json, sys; print(json.dumps({sys.argv[1]: sys.argv[2]}))' "$1" "$2"
}

# script_calls TOOL ARGS_JSON [TOOL ARGS_JSON]...: $T/script.json makes
# the model make these calls, one per turn, then answer "done".
script_calls() {
	python3 - "$@" >"$T/script.json" <<'PY'
import json, sys
a = sys.argv[1:]
turns = [{"role": "assistant", "content": None, "tool_calls": [
    {"id": "c%d" % (i // 2), "type": "function",
     "function": {"name": a[i], "arguments": a[i + 1]}}]} for i in range(0, len(a), 2)]
turns.append({"role": "assistant", "content": "done"})
print(json.dumps(turns))
PY
}

# start_run CONFIG PROMPT [SKILLS] [WORKDIR]: a new run of configuration
# CONFIG (RUN_ID names it), with forced SKILLS and a WORKDIR when given,
# started by writing PROMPT.
start_run() {
	RUN_ID=$(cat "$MNT/runs/new") && mkdir "$MNT/runs/$RUN_ID" || return 1
	echo "$1" >"$MNT/runs/$RUN_ID/config"
	[ -z "${3:-}" ] || echo "$3" >"$MNT/runs/$RUN_ID/skills"
	if [ -n "${4:-}" ]; then
		echo "$4" >"$MNT/runs/$RUN_ID/workdir" || { fail "workdir $4 refused"; return 1; }
	fi
	echo "$2" >"$MNT/runs/$RUN_ID/prompt"
}

# tool_results MESSAGES_JSON [SEP]: the content of each tool message, each
# followed by a line SEP when given.
tool_results() {
	python3 - "$1" "${2:-}" <<'PY'
import json, sys
for m in json.load(open(sys.argv[1])):
    if m.get("role") == "tool":
        print(m["content"])
        if sys.argv[2]:
            print(sys.argv[2])
PY
}

# finish_run [SEP]: waits for RUN_ID to end and fails the test unless it
# completed; OUT gets its tool results (tool_results, with SEP).
finish_run() {
	local st
	st=$(cat "$MNT/runs/$RUN_ID/wait")
	[ "$st" = completed ] || { fail "run $RUN_ID ended $st: $(cat "$MNT/runs/$RUN_ID/error" 2>/dev/null)"; return 1; }
	OUT=$(tool_results "$MNT/runs/$RUN_ID/messages.json" "${1:-}")
}

run_tests() {
	local t
	for t in $(declare -F | awk '{print $3}' | grep '^test_'); do
		CURRENT=$t
		local before=$FAILS
		"$t"
		stop_mount
		rm -rf "$MNT"
		if [ "$FAILS" -eq "$before" ]; then
			PASSES=$((PASSES + 1))
			echo "ok - $t"
		else
			echo "not ok - $t"
		fi
	done
	echo "$PASSES passed, $FAILS failed"
	[ "$FAILS" -eq 0 ]
}

# help_options: every option `skillfs --help` documents, one per line: the
# usage lines' [-x ...], `skillfs --x` and `| --x`, and the option table's
# -x, --xxx (not options of other programs named in its prose, such as
# `fusermount3 -u`).
help_options() {
	local help
	help=$("$SKILLFS" --help) || return 1
	{
		grep -oE '(\[|\| |skillfs )--?[A-Za-z][A-Za-z-]*' <<<"$help" | sed -E 's/^(\[|\| |skillfs )//'
		sed -nE 's/^ +(-[A-Za-z])?(, )?(--[a-z-]+)?( .*|$)/\1 \3/p' <<<"$help" | tr ' ' '\n'
	} | grep -E '^--?[A-Za-z]' | sort -u
}
