#!/usr/bin/env bash
# Integration: the run database under faults (issue "Nothing acknowledged
# is lost"): a full disk, a database locked by another process, a damaged
# row, an unusable -shm file. The store is the truth: what a close or mkdir
# acknowledges is committed, what it cannot commit fails with why, a run
# whose worker cannot commit waits (parked) and goes on by itself, and no
# fault of the store's files takes the daemon down. Real dd, chattr,
# python3's sqlite3 as the other process.
. "$(dirname "$0")/lib.sh"

: "${FAKE_MODEL:?FAKE_MODEL must name tests/fake_model}"

STATE=$T/state

# The state directory on a small tmpfs of its own (root only), so that
# the disk can be filled.
mount_state() {
	mkdir -p "$STATE"
	mount -t tmpfs -o size=4m tmpfs "$STATE"
}

unmount_state() {
	local f
	for f in "$STATE/state.db-shm" "$STATE/state.db-wal"; do
		[ -e "$f" ] && chattr -i "$f" 2>/dev/null
	done
	if grep -qs " $STATE tmpfs" /proc/self/mounts; then
		umount "$STATE" 2>/dev/null || umount -l "$STATE"
	fi
	return 0
}

cleanup() {
	stop_mount
	unmount_state
	rm -rf "$T"
}

needs_root() {
	[ "$(id -u)" = 0 ] && return 0
	echo "  (not root: skipped)"
	return 1
}

# fill_disk: the state tmpfs has no byte left.
fill_disk() {
	dd if=/dev/zero of="$STATE/fill" bs=64k >/dev/null 2>&1
	dd if=/dev/zero of="$STATE/fill2" bs=512 >/dev/null 2>&1
	return 0
}

free_disk() {
	rm -f "$STATE/fill" "$STATE/fill2"
}

# write_config MODEL_YAML: one skill, one worker.
write_config() {
	rm -rf "$T/skills"
	mkdir -p "$T/skills/plain"
	printf -- '---\nname: plain\ndescription: a test skill\n---\nBody.\n' \
		>"$T/skills/plain/SKILL.md"
	cat >"$T/config.yaml" <<CFG
sources: [{path: skills, trust: first_party}]
model: $1
runs: {workers: 1}
configurations:
  default: {skills: [plain]}
CFG
}

echo_model='{provider: echo}'
# The scripted model, answering only once the file $T/go exists: the test
# decides when the answer comes (after the disk is full, the lock taken).
gated_model="{provider: command, command: [/bin/sh, -c, 'until [ -e $T/go ]; do sleep 0.05; done; exec $FAKE_MODEL $T/script.json'], timeout: 60}"
start_with() { start_mount -c "$T/config.yaml" --state "$STATE/state.db"; }

new_run() {
	local id
	id=$(cat "$MNT/runs/new") || return 1
	mkdir "$MNT/runs/$id" || return 1
	echo "$id"
}

# close_prompt_fails ERRNO_NAME FILE TEXT: writes TEXT to FILE; its close
# must fail with that errno (python reports what close() says).
close_prompt_fails() {
	python3 - "$1" "$2" "$3" <<'PY'
import errno, os, sys
want = getattr(errno, sys.argv[1])
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_TRUNC)
os.write(fd, sys.argv[3].encode())
try:
    os.close(fd)
except OSError as e:
    if e.errno != want:
        raise SystemExit("the close failed with %s, not %s" % (errno.errorcode.get(e.errno), sys.argv[1]))
else:
    raise SystemExit("the close succeeded")
PY
}

# info_field FIELD: RUN_ID's info.json FIELD as JSON text.
info_field() {
	python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1])).get(sys.argv[2])))' \
		"$MNT/runs/$RUN_ID/info.json" "$1"
}

test_prompt_close_on_a_full_disk_fails_with_enospc_and_the_run_stays_created() {
	unmount_state
	needs_root || return 0
	mount_state || { fail "cannot mount a tmpfs"; return; }
	write_config "$echo_model"
	start_with || return
	local id
	id=$(new_run) || { fail "mkdir failed"; return; }
	fill_disk
	close_prompt_fails ENOSPC "$MNT/runs/$id/prompt" "hello" || fail "the close of prompt did not fail with ENOSPC"
	assert_eq created "$(cat "$MNT/runs/$id/status")" "the run stays created"
	free_disk
	echo hello >"$MNT/runs/$id/prompt" || fail "the repeated write failed"
	assert_eq completed "$(timeout 20 cat "$MNT/runs/$id/wait")" "the repeated write starts the run"
	stop_mount
	unmount_state
}

test_mkdir_on_a_full_disk_fails_with_enospc() {
	unmount_state
	needs_root || return 0
	mount_state || { fail "cannot mount a tmpfs"; return; }
	write_config "$echo_model"
	start_with || return
	new_run >/dev/null || { fail "mkdir before the disk filled failed"; return; }
	fill_disk
	local id
	id=$(cat "$MNT/runs/new")
	expect_fail "No space left on device" mkdir "$MNT/runs/$id"
	[ ! -e "$MNT/runs/$id" ] || fail "the run shows though it was not stored"
	free_disk
	mkdir "$MNT/runs/$id" || fail "mkdir after space was freed failed"
	stop_mount
	unmount_state
}

# A run whose next step cannot be committed is parked, not lost: state
# unchanged, a log line and info.json say why, and it completes by itself
# once the disk has room again (no remount).
test_a_disk_that_fills_mid_run_parks_the_run_until_space_is_freed() {
	unmount_state
	needs_root || return 0
	mount_state || { fail "cannot mount a tmpfs"; return; }
	printf '[{"reply": {"role": "assistant", "content": "done"}}]\n' >"$T/script.json"
	rm -f "$T/go"
	write_config "$gated_model"
	start_with || return
	RUN_ID=$(new_run) || { fail "mkdir failed"; return; }
	echo "go" >"$MNT/runs/$RUN_ID/prompt" || { fail "prompt refused"; return; }
	wait_for 10 file_is "$MNT/runs/$RUN_ID/status" running || fail "the run did not start"
	fill_disk # while the model thinks: its answer cannot be committed
	touch "$T/go"
	wait_for 30 grep -q "run $RUN_ID: parked" "$DAEMON_LOG" ||
		{ fail "no log line says the run is parked: $(cat "$DAEMON_LOG")"; free_disk; return; }
	assert_eq running "$(cat "$MNT/runs/$RUN_ID/status")" "a parked run keeps its state"
	case "$(info_field parked)" in
	*"No space left on device"*) ;;
	*) fail "info.json does not say why the run is parked: $(info_field parked)" ;;
	esac
	free_disk
	assert_eq completed "$(timeout 30 cat "$MNT/runs/$RUN_ID/wait")" "the parked run completes once space is freed"
	assert_eq done "$(cat "$MNT/runs/$RUN_ID/result")" "its result"
	grep -q '"type":"parked".*No space left on device' "$MNT/runs/$RUN_ID/events" ||
		fail "no parked event: $(cat "$MNT/runs/$RUN_ID/events")"
	grep -q '"type":"resumed"' "$MNT/runs/$RUN_ID/events" || fail "no resumed event"
	assert_eq null "$(info_field parked)" "info.json after it resumed"
	grep -q "run $RUN_ID: resumed" "$DAEMON_LOG" || fail "no log line says it resumed"
	stop_mount
	unmount_state
}

# Longer than the 5 s busy timeout: the step that waits for the lock is
# tried again, and the run completes.
test_a_run_outlives_a_7s_lock_held_by_another_process() {
	python3 -c 'import sqlite3' 2>/dev/null || { echo "  (no python3 sqlite3: skipped)"; return 0; }
	unmount_state
	rm -rf "$STATE"
	mkdir -p "$STATE"
	printf '[{"reply": {"role": "assistant", "content": "done"}}]\n' >"$T/script.json"
	rm -f "$T/go"
	write_config "$gated_model"
	start_with || return
	RUN_ID=$(new_run) || { fail "mkdir failed"; return; }
	echo "go" >"$MNT/runs/$RUN_ID/prompt" || { fail "prompt refused"; return; }
	wait_for 10 file_is "$MNT/runs/$RUN_ID/status" running || fail "the run did not start"
	# The model answers once the lock is held: its answer's commit waits
	# past the 5 s busy timeout.
	python3 - "$STATE/state.db" "$T/go" <<'PY' &
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
c.execute("BEGIN EXCLUSIVE")
open(sys.argv[2], "w").close()
time.sleep(7)
c.execute("ROLLBACK")
PY
	local locker=$!
	wait_for 10 test -e "$T/go" || fail "the locker did not take the lock"
	wait $locker
	assert_eq completed "$(timeout 30 cat "$MNT/runs/$RUN_ID/wait")" "the run outlives the lock: $(cat "$MNT/runs/$RUN_ID/error" 2>/dev/null)"
}

# A message row that is not JSON: the files that show it read as EIO (not
# ENOMEM), and the log names the run.
test_a_damaged_message_row_reads_as_eio_and_is_logged() {
	python3 -c 'import sqlite3' 2>/dev/null || { echo "  (no python3 sqlite3: skipped)"; return 0; }
	unmount_state
	rm -rf "$STATE"
	mkdir -p "$STATE"
	write_config "$echo_model"
	start_with || return
	RUN_ID=$(new_run) || { fail "mkdir failed"; return; }
	echo "hello" >"$MNT/runs/$RUN_ID/prompt"
	assert_eq completed "$(cat "$MNT/runs/$RUN_ID/wait")" "the run"
	python3 - "$STATE/state.db" "$RUN_ID" <<'PY' || { fail "cannot damage the row"; return; }
import sqlite3, sys
c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
n = c.execute("UPDATE messages SET json = '{\"role\": \"user\", not json' "
              "WHERE run_id = ? AND role = 'user'", (sys.argv[2],)).rowcount
c.close()
sys.exit(0 if n else 1)
PY
	expect_fail "Input/output error" cat "$MNT/runs/$RUN_ID/messages.json"
	expect_fail "Input/output error" cat "$MNT/runs/$RUN_ID/transcript"
	expect_fail "Input/output error" cat "$MNT/runs/$RUN_ID/info.json"
	grep -q "run '$RUN_ID'.*not JSON" "$DAEMON_LOG" || fail "no log line names the run: $(cat "$DAEMON_LOG")"
	assert_eq completed "$(cat "$MNT/runs/$RUN_ID/status")" "its status still reads"
	grep -q "skillfs" "$MNT/README" || fail "the daemon stopped answering"
}

# An immutable -shm file (SQLite maps it shared: a write to a mapped page
# of an immutable file is a SIGBUS): requests that need the database fail
# with EIO, the daemon answers the rest, and goes on once it is usable.
test_an_immutable_shm_fails_requests_with_eio_and_the_daemon_answers() {
	unmount_state
	needs_root || return 0
	rm -rf "$STATE"
	mkdir -p "$STATE"
	write_config "$echo_model"
	start_with || return
	RUN_ID=$(new_run) || { fail "mkdir failed"; return; }
	echo "hello" >"$MNT/runs/$RUN_ID/prompt"
	assert_eq completed "$(cat "$MNT/runs/$RUN_ID/wait")" "the run"
	chattr +i "$STATE/state.db-shm" 2>/dev/null ||
		{ echo "  (this file system has no immutable files: skipped)"; return 0; }
	local id
	id=$(cat "$MNT/runs/new")
	expect_fail "Input/output error" mkdir "$MNT/runs/$id"
	kill -0 "$DAEMON_PID" 2>/dev/null || { fail "the daemon died"; chattr -i "$STATE/state.db-shm"; return; }
	grep -q "skillfs" "$MNT/README" || fail "README does not answer"
	ls "$MNT/skills" >/dev/null || fail "skills/ does not answer"
	assert_eq completed "$(cat "$MNT/runs/$RUN_ID/status")" "status answers"
	grep -q -- "-shm file was made immutable" "$DAEMON_LOG" || fail "no log line says why: $(cat "$DAEMON_LOG")"
	chattr -i "$STATE/state.db-shm"
	mkdir "$MNT/runs/$id" || fail "mkdir once the -shm is usable again"
	echo "again" >"$MNT/runs/$id/prompt"
	assert_eq completed "$(timeout 20 cat "$MNT/runs/$id/wait")" "a run once the -shm is usable again"
	# The -wal file is written, never mapped: the same holds for it.
	chattr +i "$STATE/state.db-wal" || { fail "cannot make the -wal immutable"; return; }
	id=$(cat "$MNT/runs/new")
	expect_fail "Input/output error" mkdir "$MNT/runs/$id"
	chattr -i "$STATE/state.db-wal"
	kill -0 "$DAEMON_PID" 2>/dev/null || { fail "the daemon died"; return; }
	mkdir "$MNT/runs/$id" || fail "mkdir once the -wal is usable again"
}

run_tests
