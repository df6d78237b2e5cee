#!/usr/bin/env bash
# Integration: the state database is watched (issue 14, item 6): its file
# deleted or replaced while mounted is noticed (a log line, runs/ERROR, new
# runs refused with EIO, the runs made before still read), and
# `skillfs check --state DB` says whether a database can be used.
. "$(dirname "$0")/lib.sh"

setup() {
	rm -rf "$T/skills" "$T/state"
	mkdir -p "$T/skills/plain" "$T/state"
	printf -- '---\nname: plain\ndescription: a skill\n---\nBody.\n' >"$T/skills/plain/SKILL.md"
	cat >"$T/config.yaml" <<CFG
sources: [{path: skills, trust: first_party}]
model: {provider: echo}
configurations:
  default: {skills: [plain]}
CFG
}

DB() { echo "$T/state/state.db"; }

# sql DB STATEMENT: runs it (python's sqlite3: the sqlite3 program may be
# missing) and prints each row's first column.
sql() {
	python3 - "$1" "$2" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None)
for row in c.execute(sys.argv[2]):
    print(row[0])
c.close()
PY
}
start() { start_mount -c "$T/config.yaml" --state "$(DB)"; }

# A run that completes (the echo model answers at once): RUN_ID names it.
completed_run() {
	start_run default "hello there" || { fail "cannot start a run"; return 1; }
	assert_eq completed "$(cat "$MNT/runs/$RUN_ID/wait")" "the run completed"
}

# The database's file removed while mounted: the daemon keeps writing to a
# file no later mount sees. It says so, and refuses new runs.
test_deleted_database_refuses_new_runs() {
	setup
	start || return
	completed_run || return
	local old=$RUN_ID made
	made=$(cat "$MNT/runs/new")
	mkdir "$MNT/runs/$made" || fail "mkdir"
	[ ! -e "$MNT/runs/ERROR" ] || fail "runs/ERROR with the database in place"
	rm -f "$(DB)"
	wait_for 10 test -e "$MNT/runs/ERROR" || { fail "runs/ERROR did not appear"; return; }
	grep -q "state database $(DB) was deleted while mounted" "$MNT/runs/ERROR" ||
		fail "runs/ERROR does not say what happened: $(cat "$MNT/runs/ERROR")"
	grep -q "Unmount and mount again" "$MNT/runs/ERROR" ||
		fail "runs/ERROR does not say what to do: $(cat "$MNT/runs/ERROR")"
	ls "$MNT/runs" | grep -qx ERROR || fail "ERROR not listed in runs/: $(ls "$MNT/runs")"
	local id
	id=$(cat "$MNT/runs/new")
	expect_fail "Input/output error" mkdir "$MNT/runs/$id"
	[ ! -d "$MNT/runs/$id" ] || fail "the refused run exists"
	wait_for 10 grep -q "skillfs: the state database $(DB) was deleted while mounted" "$DAEMON_LOG" ||
		fail "no log line: $(cat "$DAEMON_LOG")"
	assert_eq 1 "$(grep -c "was deleted while mounted" "$DAEMON_LOG")" "said once in the log"
	# A run made before is not started either: the close of its prompt
	# fails (python reports what close() says; bash's echo does not).
	local out
	out=$(python3 - "$MNT/runs/$made/prompt" 2>&1 <<'PY'
import sys
f = open(sys.argv[1], "w")
f.write("too late\n")
try:
    f.close()
    print("closed")
except OSError as e:
    print(e.strerror)
PY
)
	assert_eq "Input/output error" "$out" "the close of a prompt after the deletion"
	assert_eq created "$(cat "$MNT/runs/$made/status")" "the run made before stays created"
	# What was there before still reads, from the open database.
	assert_eq completed "$(cat "$MNT/runs/$old/status")" "the old run's status"
	grep -q "hello there" "$MNT/runs/$old/messages.json" || fail "the old run's messages are gone"
}

# Another file moved over the database's path (a restore from a copy, say):
# the mount keeps the file it opened and says the path now names another.
test_replaced_database_refuses_new_runs() {
	setup
	start || return
	completed_run || return
	cp "$(DB)" "$T/state/copy.db"
	mv "$T/state/copy.db" "$(DB)"
	local id
	id=$(cat "$MNT/runs/new")
	expect_fail "Input/output error" mkdir "$MNT/runs/$id"
	grep -q "was replaced by another file" "$MNT/runs/ERROR" ||
		fail "runs/ERROR does not say the file was replaced: $(cat "$MNT/runs/ERROR" 2>&1)"
	grep -q "skillfs: the state database .* was replaced" "$DAEMON_LOG" ||
		fail "no log line: $(cat "$DAEMON_LOG")"
}

# check --state on the database a mount left: usable, with a run made but
# not started and one interrupted (set to running, as a kill leaves it)
# listed as the next mount takes them up. The check changes nothing.
test_check_state_lists_pending_runs() {
	setup
	start || return
	completed_run || return
	local done_id=$RUN_ID created
	created=$(cat "$MNT/runs/new")
	mkdir "$MNT/runs/$created" || fail "mkdir"
	completed_run || return
	local interrupted=$RUN_ID
	stop_mount
	sql "$(DB)" "UPDATE runs SET state = 'running' WHERE id = '$interrupted'" ||
		{ fail "sqlite3"; return; }
	local sum rc=0
	sum=$(sha256sum <"$(DB)")
	"$SKILLFS" check --state "$(DB)" >"$T/out" 2>&1 || rc=$?
	assert_eq 0 "$rc" "check of a good database exits 0 ($(cat "$T/out"))"
	grep -q "^state: integrity: ok$" "$T/out" || fail "no integrity verdict: $(cat "$T/out")"
	grep -q "^state: schema version [0-9]* (current)$" "$T/out" || fail "no schema version: $(cat "$T/out")"
	grep -q "^state: run $created: created" "$T/out" || fail "the created run is not listed: $(cat "$T/out")"
	grep -q "^state: run $interrupted: was running: the next mount resumes it" "$T/out" ||
		fail "the interrupted run is not listed: $(cat "$T/out")"
	! grep -q "^state: run $done_id:" "$T/out" || fail "a completed run is listed as pending"
	grep -q "^state: runs: 3 (1 created, 1 running, 1 completed)$" "$T/out" ||
		fail "no count of runs: $(cat "$T/out")"
	grep -q "^state: errors: 0$" "$T/out" || fail "no error count: $(cat "$T/out")"
	assert_eq "$sum" "$(sha256sum <"$(DB)")" "check changed the database"
}

# A damaged database (pages overwritten) or one of a newer schema: the check
# says so and exits non-zero; a file that is not one is refused as well.
test_check_state_refuses_damaged_database() {
	setup
	start || return
	local i
	for i in 1 2 3; do completed_run || return; done
	stop_mount
	cp "$(DB)" "$T/good.db"
	local pages
	pages=$(sql "$(DB)" "PRAGMA page_count")
	[ "$pages" -ge 4 ] || { fail "too few pages to damage: $pages"; return; }
	# Every page but the first (the header) overwritten.
	python3 - "$(DB)" <<'PY'
import sys
p = sys.argv[1]
data = bytearray(open(p, "rb").read())
ps = int.from_bytes(data[16:18], "big") or 65536
for off in range(ps, len(data), ps):
    data[off:off + 64] = b"\xa5" * 64
open(p, "wb").write(data)
PY
	local rc=0
	"$SKILLFS" check --state "$(DB)" >"$T/out" 2>&1 || rc=$?
	assert_eq 1 "$rc" "check of a damaged database exits 1 ($(cat "$T/out"))"
	grep -q "^state: error: " "$T/out" || fail "no error line: $(cat "$T/out")"
	! grep -q "^state: integrity: ok$" "$T/out" || fail "damage reported as ok: $(cat "$T/out")"
	cp "$T/good.db" "$T/newer.db"
	sql "$T/newer.db" "PRAGMA user_version = 999" || { fail "sqlite3"; return; }
	rc=0
	"$SKILLFS" check --state "$T/newer.db" >"$T/out" 2>&1 || rc=$?
	assert_eq 1 "$rc" "check of a newer database exits 1"
	grep -q "schema version 999, newer than this skillfs" "$T/out" || fail "no schema verdict: $(cat "$T/out")"
	cp "$T/good.db" "$T/older.db"
	sql "$T/older.db" "PRAGMA user_version = 5" || { fail "sqlite3"; return; }
	rc=0
	"$SKILLFS" check --state "$T/older.db" >"$T/out" 2>&1 || rc=$?
	assert_eq 0 "$rc" "check of an older database exits 0 ($(cat "$T/out"))"
	grep -q "schema version 5, older .*: the next mount migrates it" "$T/out" ||
		fail "no migration verdict: $(cat "$T/out")"
	head -c 8192 /dev/urandom >"$T/junk.db"
	rc=0
	"$SKILLFS" check --state "$T/junk.db" >"$T/out" 2>&1 || rc=$?
	assert_eq 1 "$rc" "check of a file that is no database exits 1"
	grep -q "not a database" "$T/out" || fail "no verdict on junk: $(cat "$T/out")"
}

run_tests
