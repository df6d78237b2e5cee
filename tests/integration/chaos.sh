#!/usr/bin/env bash
# Integration: a short chaos pass (scripts/chaos): the daemon killed with
# SIGKILL at random moments under load and mounted again, 5 times; every
# acknowledged run completes, no message is stored twice, the database
# stays intact, no run is stuck, and no bash call cut by a kill runs again
# after the remount (each run's append appears at most once).
. "$(dirname "$0")/lib.sh"

: "${FAKE_MODEL:?FAKE_MODEL must name tests/fake_model}"
require_bwrap

test_chaos_five_kills_lose_nothing() {
	local out
	out=$(CHAOS_SIDE_EFFECTS=1 SKILLFS=$SKILLFS FAKE_MODEL=$FAKE_MODEL \
		"$SRC_ROOT/scripts/chaos" 5 2>&1)
	local rc=$?
	echo "$out" | grep '^chaos: [0-9]* cycles'
	[ "$rc" -eq 0 ] || fail "scripts/chaos 5 failed: $out"
	case "$out" in *"chaos: ok"*) ;; *) fail "no 'chaos: ok' line: $out" ;; esac
}

run_tests
