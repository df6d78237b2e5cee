#!/usr/bin/env bash
# Integration: crashes, a second daemon and shutdown (issue "Nothing
# acknowledged is lost, nothing runs twice", items 3, 6 and 7). A scripted
# model (tests/fake_model) makes bash calls through a real mount; the
# daemon is killed with SIGKILL or stopped with SIGTERM or a lazy unmount
# while a call is in flight, and each test checks on the host what ran and
# what the run says after the next mount.
. "$(dirname "$0")/lib.sh"

: "${FAKE_MODEL:?FAKE_MODEL must name tests/fake_model}"

require_bwrap

STATE=$T/state/state.db

# write_config: one skill with no allowed-tools (every tool), a model that
# notes in $T/early each time it starts while the mount is not up, and
# bash calls that may take a minute.
write_config() {
	rm -rf "$T/skills" "$T/state" "$T/early"
	mkdir -p "$T/skills/free"
	printf -- '---\nname: free\ndescription: free skill\n---\nBody.\n' >"$T/skills/free/SKILL.md"
	cat >"$T/model.sh" <<SH
#!/bin/sh
grep -qs " $MNT fuse" /proc/self/mounts || echo early >>"$T/early"
FAKE_MODEL_STARTED=$T/model.pids exec "$FAKE_MODEL" "$T/script.json"
SH
	chmod +x "$T/model.sh"
	cat >"$T/config.yaml" <<CFG
sources: [{path: skills, trust: first_party}]
model: {provider: command, command: [$T/model.sh], timeout: 30}
tools: {limits: {bash: {timeout: 120}}}
runs: {workers: 2}
configurations:
  open: {skills: [free]}
CFG
}

start_with() {
	start_mount -c "$T/config.yaml" --state "$STATE"
}

# slow_call: the model's first call appends a line to ran.txt in the
# workspace, then sleeps for a minute; then it answers "done".
slow_call() {
	script_calls bash "$(json_args command 'echo ran >>ran.txt; sleep 60')"
}

# crash: kills the daemon with SIGKILL (and the model programs it left:
# a killed daemon ends none), and takes its dead mount away.
crash() {
	kill -9 "$DAEMON_PID"
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_PID=
	fusermount3 -uz "$MNT" 2>/dev/null
	local pid
	for pid in $(cat "$T/model.pids" 2>/dev/null); do
		kill -9 "$pid" 2>/dev/null
	done
	rm -f "$T/model.pids"
}

# in_flight: the run's bash call has started (its line is there).
in_flight() {
	WS=$T/state/workspaces/$RUN_ID
	wait_for 20 file_is "$WS/ran.txt" ran || { fail "the bash call did not start"; return 1; }
}

# lines FILE: its number of lines (0 when it is missing).
lines() {
	if [ -f "$1" ]; then wc -l <"$1"; else echo 0; fi
}

# resumed_interrupted: after a remount, the run completes; the bash call
# did not run again and its result, the transcript and the events say it
# was interrupted; no model started before the mount was up.
resumed_interrupted() {
	start_with || return
	finish_run "---" || return
	assert_eq 1 "$(lines "$WS/ran.txt")" "lines the bash call wrote"
	case "$OUT" in
	*"interrupted"*"may have partly run"*) ;;
	*) fail "the tool result does not say the call was interrupted: $OUT" ;;
	esac
	grep -q "bash: error: this bash call was interrupted" "$MNT/runs/$RUN_ID/transcript" ||
		fail "the transcript does not say so: $(cat "$MNT/runs/$RUN_ID/transcript")"
	grep -q '"type":"tool_interrupted"' "$MNT/runs/$RUN_ID/events" ||
		fail "no tool_interrupted event"
	[ ! -e "$T/early" ] || fail "a model started before the mount was up"
}

# A crash in the middle of a call with side effects: after the remount
# the call is not run again (at most once), and the run completes.
test_kill9_during_bash_call_runs_it_at_most_once() {
	write_config
	slow_call
	start_with || return
	start_run open go || return
	in_flight || return
	crash
	# the killed daemon's sandbox dies with it: no line comes later
	resumed_interrupted
}

# A model call cut by a crash is asked again, and the transcript says so.
test_kill9_during_model_call_asks_again() {
	write_config
	python3 - "$T" <<'PY' >"$T/script.json"
import json, sys
print(json.dumps([{"touch": sys.argv[1] + "/asked", "sleep_ms": 60000,
                   "role": "assistant", "content": "never"}]))
PY
	start_with || return
	start_run open go || return
	wait_for 20 test -e "$T/asked" || { fail "the model was not asked"; return 1; }
	crash
	# the second attempt is turn 1 again: it answers at once
	echo '[{"role": "assistant", "content": "answered"}]' >"$T/script.json"
	start_with || return
	finish_run || return
	grep -q "model call interrupted (skillfs stopped or crashed): asked again" \
		"$MNT/runs/$RUN_ID/transcript" ||
		fail "the transcript does not say the model call was repeated: $(cat "$MNT/runs/$RUN_ID/transcript")"
	grep -q '"type":"model_call_repeated"' "$MNT/runs/$RUN_ID/events" ||
		fail "no model_call_repeated event"
	assert_eq "answered" "$(cat "$MNT/runs/$RUN_ID/result")" "result"
	[ ! -e "$T/early" ] || fail "a model started before the mount was up"
}

# second_refused WHY: another skillfs on the same state database is
# refused before it mounts anything, and says why.
second_refused() {
	local out
	mkdir -p "$T/mnt2"
	if out=$("$SKILLFS" -c "$T/config.yaml" --state "$STATE" "$T/mnt2" 2>&1); then
		fail "a second daemon was accepted ($1)"
	fi
	case "$out" in
	*"is in use by another skillfs"*) ;;
	*) fail "the second daemon ($1) says [$out]" ;;
	esac
	if grep -qs " $T/mnt2 fuse" /proc/self/mounts; then
		fail "the second daemon mounted ($1)"
		fusermount3 -u "$T/mnt2" 2>/dev/null || fusermount3 -uz "$T/mnt2"
	fi
}

# One daemon per state database, whatever became of the database file.
test_second_daemon_is_refused_even_after_the_database_was_replaced() {
	write_config
	start_with || return
	second_refused "same database" || return
	cp "$STATE" "$T/copy.db"
	mv "$T/copy.db" "$STATE" # a new file in its place
	second_refused "database replaced"
	rm -f "$STATE" "$STATE-wal" "$STATE-shm"
	second_refused "database deleted"
	stop_mount
	# once the first is gone, the next one starts
	start_with || return
	ls "$MNT/runs" >/dev/null || fail "runs/ after the first daemon stopped"
}

# ---- shutdown (DESIGN.md D10) ----

# blocked PID: process PID sleeps waiting for the answer to a FUSE request
# (the kernel's request_wait_answer; where wchan is hidden, in read(2),
# syscall 0 on x86_64).
blocked() {
	[ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = S ] || return 1
	grep -qsE 'request_wait_answer|fuse' "/proc/$1/wchan" ||
		{ [ "$(uname -m)" = x86_64 ] && grep -qs '^0 ' "/proc/$1/syscall"; }
}

# readers N: N readers of the run's wait file that read once (perl's
# sysread, which returns what read(2) did) and one cat, which reads again
# after EINTR, all blocked (pids in READERS, the cat's last; stderr in
# $T/reader.<i>).
readers() {
	READERS=()
	local i pid
	for i in $(seq 1 "$1"); do
		perl -e 'open(my $f, "<", $ARGV[0]) or die "open: $!\n";
			defined(sysread($f, my $b, 64)) or die "read: $!\n"; print $b' \
			"$MNT/runs/$RUN_ID/wait" >"$T/reader.$i.out" 2>"$T/reader.$i" &
		READERS+=($!)
	done
	cat "$MNT/runs/$RUN_ID/wait" >"$T/reader.cat.out" 2>"$T/reader.cat" &
	READERS+=($!)
	for pid in "${READERS[@]}"; do
		wait_for 10 blocked "$pid" || { fail "reader $pid is not blocked"; return 1; }
	done
}

# stopped_within_2s HOW...: runs HOW (the stop) and waits for the daemon:
# it must have exited within 2 s, and every blocked reader been answered
# with EINTR. Sets TOOK (ms).
stopped_within_2s() {
	local t0 t1 pid i=0
	t0=$(date +%s%N)
	"$@"
	for _ in $(seq 1 400); do
		kill -0 "$DAEMON_PID" 2>/dev/null || break
		sleep 0.01
	done
	t1=$(date +%s%N)
	TOOK=$(((t1 - t0) / 1000000))
	if kill -0 "$DAEMON_PID" 2>/dev/null; then
		fail "the daemon still runs 4 s after '$*'"
		return 1
	fi
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_PID=
	for pid in "${READERS[@]}"; do
		i=$((i + 1))
		if [ "$i" -eq "${#READERS[@]}" ]; then
			# cat reads again after EINTR: it then fails as the
			# mount goes away (it must not hang, nor print a status)
			wait_for 10 sh -c "! kill -0 $pid 2>/dev/null" ||
				fail "cat still blocked after '$*'"
			wait "$pid" 2>/dev/null && fail "cat succeeded after '$*'"
			[ ! -s "$T/reader.cat.out" ] || fail "cat printed $(cat "$T/reader.cat.out")"
			continue
		fi
		wait "$pid" 2>/dev/null
		grep -q "read: Interrupted system call" "$T/reader.$i" ||
			fail "reader $i after '$*': [$(cat "$T/reader.$i")]"
	done
	[ "$TOOK" -le 2000 ]
}

# stop_case HOW...: a long bash call in flight and four readers blocked
# in runs/<id>/wait, then HOW: the daemon exits within 2 s (best of 3
# tries: a stall is seconds, noise milliseconds), the readers get EINTR,
# and after a remount the run resumes and completes (the cut call is
# reported interrupted, not run again).
stop_case() {
	local try best=
	for try in 1 2 3; do
		write_config
		slow_call
		start_with || return
		start_run open go || return
		in_flight || return
		readers 3 || return
		if stopped_within_2s "$@"; then
			echo "# '$*': the daemon exited in $TOOK ms"
			best=$TOOK
			break
		fi
		[ "$FAILS" -eq 0 ] || return
		stop_mount
	done
	[ -n "$best" ] || { fail "'$*' took $TOOK ms (best of 3), over 2 s"; return 1; }
	grep -qs " $MNT fuse" /proc/self/mounts && fusermount3 -u "$MNT"
	resumed_interrupted
}

sigterm() { kill -TERM "$DAEMON_PID"; }
lazy_unmount() { fusermount3 -uz "$MNT"; }

test_sigterm_with_blocked_waits_and_a_call_in_flight() {
	stop_case sigterm
}

test_lazy_unmount_with_blocked_waits_and_a_call_in_flight() {
	stop_case lazy_unmount
}

# A model call in flight is abandoned too: SIGTERM during a model call
# that would take a minute exits within 2 s (best of 3), and after a
# remount the call is asked again and the run completes.
test_sigterm_during_a_model_call() {
	local try best=
	for try in 1 2 3; do
		write_config
		python3 - "$T" <<'PY' >"$T/script.json"
import json, sys
print(json.dumps([{"touch": sys.argv[1] + "/asked", "sleep_ms": 60000,
                   "role": "assistant", "content": "never"}]))
PY
		rm -f "$T/asked"
		start_with || return
		start_run open go || return
		wait_for 20 test -e "$T/asked" || { fail "the model was not asked"; return 1; }
		readers 1 || return
		if stopped_within_2s sigterm; then
			echo "# sigterm during a model call: the daemon exited in $TOOK ms"
			best=$TOOK
			break
		fi
		[ "$FAILS" -eq 0 ] || return
		stop_mount
	done
	[ -n "$best" ] || { fail "SIGTERM took $TOOK ms (best of 3), over 2 s"; return 1; }
	echo '[{"role": "assistant", "content": "answered"}]' >"$T/script.json"
	start_with || return
	finish_run || return
	grep -q '"type":"model_call_repeated"' "$MNT/runs/$RUN_ID/events" ||
		fail "no model_call_repeated event"
	assert_eq "answered" "$(cat "$MNT/runs/$RUN_ID/result")" "result"
}

# A lazy unmount while another process still uses the mount (its working
# directory is in it, so the mount lives on): the daemon exits within 2 s
# all the same (best of 3).
test_lazy_unmount_with_the_mount_still_in_use() {
	local try best= holder
	for try in 1 2 3; do
		write_config
		start_with || return
		(cd "$MNT/runs" && exec sleep 60) &
		holder=$!
		wait_for 10 sh -c "readlink /proc/$holder/cwd | grep -q '/runs'" ||
			{ fail "the holder did not enter the mount"; kill "$holder"; return 1; }
		READERS=()
		stopped_within_2s lazy_unmount
		local ok=$?
		kill "$holder" 2>/dev/null
		wait "$holder" 2>/dev/null
		if [ "$ok" -eq 0 ]; then
			echo "# lazy unmount, mount in use: the daemon exited in $TOOK ms"
			best=$TOOK
			break
		fi
		[ "$FAILS" -eq 0 ] || return
		stop_mount
	done
	[ -n "$best" ] || fail "a lazy unmount of a mount in use took $TOOK ms (best of 3), over 2 s"
}

# A plain unmount while readers are blocked is refused (the readers hold
# the mount busy) and changes nothing: the readers stay blocked.
test_unmount_while_readers_are_blocked_is_refused() {
	write_config
	slow_call
	start_with || return
	start_run open go || return
	in_flight || return
	readers 1 || return
	expect_fail "busy" fusermount3 -u "$MNT"
	local pid
	for pid in "${READERS[@]}"; do
		blocked "$pid" || fail "reader $pid is no longer blocked"
	done
	kill -0 "$DAEMON_PID" || fail "the daemon stopped"
	for pid in "${READERS[@]}"; do
		kill "$pid"
		wait "$pid" 2>/dev/null
	done
}

run_tests
