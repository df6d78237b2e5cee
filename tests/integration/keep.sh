#!/usr/bin/env bash
# runs.keep (README "Runs kept tidy"): finished runs past runs.keep.count or
# older than runs.keep.days go, with their workspaces, at start-up and as
# runs finish; a run with a file open (a reader, tail -f) is left until it
# is closed; runs that have not finished are never taken.
. "$(dirname "$0")/lib.sh"

config() { # KEEP: the runs.keep mapping
	cat >"$T/config.yaml" <<CFG
model: {provider: echo}
runs: {workers: 1, keep: $1}
configurations:
  default: {skills: []}
CFG
}

run_done() { # a run that completes; RUN_ID names it
	start_run default "run $1" || return 1
	assert_eq completed "$(cat "$MNT/runs/$RUN_ID/wait")" "run $1"
}

runs_now() { ls "$MNT/runs" | grep -v '^new$' | tr '\n' ' '; }

test_count_keeps_the_newest_and_spares_an_open_one() {
	config "{count: 2}"
	start_mount -c "$T/config.yaml" --state "$T/state-$CURRENT/state.db" || return
	local ids=() i
	run_done 0 || return
	ids+=("$RUN_ID")
	# A reader holds the oldest run open across the rest.
	exec 7<"$MNT/runs/${ids[0]}/transcript"
	for i in 1 2 3; do
		run_done "$i" || return
		ids+=("$RUN_ID")
	done
	local unfinished
	unfinished=$(cat "$MNT/runs/new")
	mkdir "$MNT/runs/$unfinished"
	wait_for 5 test ! -e "$MNT/runs/${ids[1]}" || fail "run 1 not removed: $(runs_now)"
	[ -d "$T/state-$CURRENT/workspaces/${ids[1]}" ] && fail "run 1's workspace left behind"
	[ -e "$MNT/runs/${ids[0]}" ] || fail "the run open for reading was removed"
	[ -e "$MNT/runs/${ids[2]}" ] && [ -e "$MNT/runs/${ids[3]}" ] ||
		fail "the newest two are not both kept: $(runs_now)"
	[ -e "$MNT/runs/$unfinished" ] || fail "a run that never started was removed"
	# Still readable while held; once closed it goes at the next look.
	grep -q "run 0" <&7 || fail "the held run's transcript cannot be read"
	exec 7<&-
	wait_for 5 test ! -e "$MNT/runs/${ids[0]}" || fail "run 0 not removed once closed: $(runs_now)"
	[ -d "$T/state-$CURRENT/workspaces/${ids[0]}" ] && fail "run 0's workspace left behind"
	grep -q "removed (runs.keep" "$DAEMON_LOG" || fail "no log line for a removal"
	# At start-up with a smaller count.
	stop_mount
	config "{count: 1}"
	start_mount -c "$T/config.yaml" --state "$T/state-$CURRENT/state.db" || return
	wait_for 5 test ! -e "$MNT/runs/${ids[2]}" || fail "not removed at start-up: $(runs_now)"
	[ -e "$MNT/runs/${ids[3]}" ] || fail "the newest run was removed"
	[ -e "$MNT/runs/$unfinished" ] || fail "the unfinished run was removed at start-up"
}

test_days_removes_runs_past_their_age() {
	config "{days: 0.00003}" # 2.6 seconds
	start_mount -c "$T/config.yaml" --state "$T/state-$CURRENT/state.db" || return
	run_done old || return
	local old=$RUN_ID
	sleep 1.5
	run_done young || return
	local young=$RUN_ID
	wait_for 6 test ! -e "$MNT/runs/$old" || fail "the old run was not removed: $(runs_now)"
	[ -e "$MNT/runs/$young" ] || fail "the younger run went with it"
	wait_for 6 test ! -e "$MNT/runs/$young" || fail "the younger run did not go in its turn"
}

test_no_keep_keeps_everything() {
	config "{}"
	start_mount -c "$T/config.yaml" --state "$T/state-$CURRENT/state.db" || return
	local i
	for i in 1 2 3; do run_done "$i" || return; done
	sleep 1.5
	assert_eq 3 "$(ls "$MNT/runs" | grep -vc '^new$')" "runs kept without runs.keep"
}

test_bad_keep_values_are_refused() {
	local v
	for v in "{days: 0}" "{days: -1}" "{days: soon}" "{count: 0}" "{weeks: 2}"; do
		config "$v"
		if "$SKILLFS" check -c "$T/config.yaml" >"$T/check.out" 2>&1; then
			grep -q "unknown key\|runs.keep" "$T/check.out" || fail "runs.keep: $v accepted silently"
		fi
	done
	config "{days: soon}"
	"$SKILLFS" check -c "$T/config.yaml" >"$T/check.out" 2>&1 && fail "days: soon accepted"
	grep -q "runs.keep.days" "$T/check.out" || fail "the error does not name runs.keep.days: $(cat "$T/check.out")"
}

run_tests
