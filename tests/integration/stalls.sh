#!/usr/bin/env bash
# Integration: no request waits behind another (issue 14, item 4). A run
# with a ~100 MB messages.json, a full read of it, and a database locked by
# another process each hold up their own request only: stat, cat, ls answer
# beside them in milliseconds. Latencies are the best of 3 tries (CI is a
# loaded 2-core machine, under ASan too): a stall is seconds, noise is
# milliseconds. Real stat, cat, ls, mkdir; python3 for the database.
. "$(dirname "$0")/lib.sh"

: "${FAKE_MODEL:?FAKE_MODEL must name tests/fake_model}"

python3 -c 'import sqlite3' 2>/dev/null || { echo "python3 with sqlite3 is needed"; exit 77; }

# write_config MODEL_YAML: one skill (read), runs of the default config.
write_config() {
	mkdir -p "$T/skills/reader"
	printf -- '---\nname: reader\ndescription: reads\nallowed-tools: [read]\n---\nRead.\n' \
		>"$T/skills/reader/SKILL.md"
	cat >"$T/config.yaml" <<CFG
sources: [{path: skills, trust: first_party}]
model: $1
runs: {workers: 1}
configurations:
  default: {skills: [reader]}
CFG
}

start_with() { start_mount -c "$T/config.yaml" --state "$1/state.db"; }

# best_ms N CMD...: the least wall time of N runs of CMD, in ms.
best_ms() {
	local n=$1 best= i s e t
	shift
	for i in $(seq 1 "$n"); do
		s=$(date +%s%N)
		"$@" >/dev/null 2>&1
		e=$(date +%s%N)
		t=$(((e - s) / 1000000))
		if [ -z "$best" ] || [ "$t" -lt "$best" ]; then
			best=$t
		fi
	done
	echo "$best"
}

# best_within N MS WHAT CMD...: the best of N runs of CMD takes under MS ms.
best_within() {
	local n=$1 limit=$2 what=$3 t
	shift 3
	t=$(best_ms "$n" "$@")
	[ "$t" -lt "$limit" ] || fail "$what took $t ms (best of $n; limit $limit ms)"
}

# within MS WHAT CMD...: the best of 3 runs of CMD takes under MS ms.
within() { best_within 3 "$@"; }

# once_within MS WHAT CMD...: the first run of CMD takes under MS ms (a
# best of 3 would hide a first try that waited).
once_within() { best_within 1 "$@"; }

BIG=$T/big
BIG_ID=
# big_run: mounts a state holding one completed run (BIG_ID) whose
# messages.json is about 100 MB: the run is made through the mount, then
# 400 tool results of 256 KiB are added to its chat in the database
# (made once, kept for the tests after), each with its size in
# messages.json as the daemon keeps it (rendered_bytes: jansson's
# JSON_INDENT(2) output of these ASCII messages is Python's indent=2 one;
# inside the array each line after the first is 2 spaces deeper). The
# size a stat gives is checked against the bytes read.
big_run() {
	write_config '{provider: echo}'
	if [ ! -s "$BIG/id" ]; then
		rm -rf "$BIG"
		start_with "$BIG" || return 1
		local id
		id=$(cat "$MNT/runs/new") && mkdir "$MNT/runs/$id" || { fail "mkdir of a run"; return 1; }
		echo hello >"$MNT/runs/$id/prompt"
		assert_eq completed "$(cat "$MNT/runs/$id/wait")" "the run" || return 1
		stop_mount
		python3 - "$BIG/state.db" "$id" <<'PY' || { fail "cannot fill the database"; return 1; }
import json, sqlite3, sys, time
db, rid = sys.argv[1], sys.argv[2]
c = sqlite3.connect(db)
chat = c.execute("SELECT coalesce(chat_id, 'main') FROM runs WHERE id = ?", (rid,)).fetchone()[0]
seq = c.execute("SELECT coalesce(max(seq), 0) FROM messages WHERE run_id = ? AND chat_id = ?",
                (rid, chat)).fetchone()[0]
now = time.time_ns()
body = "line of a long tool result\n" * (256 * 1024 // 27)
rows = []
for i in range(400):
    m = {"role": "tool", "tool_call_id": "c%d" % i, "name": "read", "content": "%d %s" % (i, body)}
    pretty = json.dumps(m, indent=2)
    rendered = len(pretty.encode()) + 2 * pretty.count("\n")
    rows.append((rid, chat, seq + 1 + i, "tool", json.dumps(m, separators=(",", ":")), now, rendered))
c.executemany("INSERT INTO messages (run_id, chat_id, seq, role, json, ts, rendered_bytes) "
              "VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
c.commit()
PY
		echo "$id" >"$BIG/id"
	fi
	BIG_ID=$(cat "$BIG/id")
	start_with "$BIG"
}

test_stat_of_a_large_messages_json() {
	big_run || return
	local f=$MNT/runs/$BIG_ID/messages.json
	within 10 "stat of a 100 MB messages.json" stat "$f"
	local size got
	size=$(stat -c %s "$f")
	[ "$size" -gt 100000000 ] || fail "messages.json is $size bytes, not about 100 MB"
	got=$(wc -c <"$f")
	assert_eq "$size" "$got" "stat size against the bytes read of messages.json"
	within 10 "stat of messages.json after a full read" stat "$f"
}

# The first stat after a mount (nothing rendered yet) takes its size from
# the sizes the store keeps: no render of 100 MB (that took 2.7 s). Best
# of 3 mounts; the limit leaves room for a cold database and the start-up
# work of a just-made mount on a loaded machine (about 6 ms otherwise).
test_first_stat_of_a_large_messages_json_after_a_mount() {
	big_run || return
	local f=$MNT/runs/$BIG_ID/messages.json best= i s e t
	for i in 1 2 3; do
		[ "$i" -eq 1 ] || { stop_mount; start_with "$BIG" || return; }
		s=$(date +%s%N)
		stat "$f" >/dev/null || fail "stat of messages.json"
		e=$(date +%s%N)
		t=$(((e - s) / 1000000))
		if [ -z "$best" ] || [ "$t" -lt "$best" ]; then
			best=$t
		fi
	done
	[ "$best" -lt 50 ] || fail "the first stat of a 100 MB messages.json after a mount took $best ms (best of 3 mounts; limit 50 ms)"
	local size got
	size=$(stat -c %s "$f")
	got=$(wc -c <"$f")
	assert_eq "$size" "$got" "the size of the first stat against the bytes read of messages.json"
}

test_requests_beside_a_full_read_of_a_large_file() {
	big_run || return
	local f=$MNT/runs/$BIG_ID/messages.json
	# Full reads, one after another, for as long as the checks take, in
	# 1 MiB reads with a pause between them: the daemon serves a read all
	# the time, and the reader does not take a core of the (2-core) CI
	# machine from the checks.
	python3 - "$f" "$T/reading" <<'PY' &
import os, sys, time
f, flag = sys.argv[1], sys.argv[2]
while True:
    with open(f, "rb", buffering=0) as r:
        open(flag, "w").close()
        while r.read(1 << 20):
            time.sleep(0.002)
PY
	local reader=$!
	wait_for 30 test -e "$T/reading" || fail "the reader did not start"
	sleep 0.2
	within 20 "cat runs/new beside a full read" cat "$MNT/runs/new"
	within 20 "ls -l runs/<id> beside a full read" ls -l "$MNT/runs/$BIG_ID"
	within 20 "cat README beside a full read" cat "$MNT/README"
	kill "$reader" 2>/dev/null
	wait "$reader" 2>/dev/null
	# The reads did their job: the whole file came through meanwhile.
	[ "$(wc -c <"$f")" = "$(stat -c %s "$f")" ] || fail "a full read after them"
}

test_a_locked_database_holds_up_only_its_waiters() {
	write_config '{provider: echo}'
	start_with "$T/locked-state" || return
	local done_id
	done_id=$(cat "$MNT/runs/new") && mkdir "$MNT/runs/$done_id" || { fail "mkdir"; return; }
	echo "hello" >"$MNT/runs/$done_id/prompt"
	assert_eq completed "$(cat "$MNT/runs/$done_id/wait")" "a run before the lock"
	# The run manager has the database open: lock it from outside for
	# 8 s ($T/locked exists meanwhile).
	python3 - "$T/locked-state/state.db" "$T/locked" <<'PY' &
import os, sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=10)
c.execute("BEGIN EXCLUSIVE")
open(sys.argv[2], "w").close()
time.sleep(8)
os.unlink(sys.argv[2])
c.execute("ROLLBACK")
PY
	local locker=$!
	wait_for 10 test -e "$T/locked" || { fail "the locker did not take the lock"; kill $locker; return; }
	# mkdirs of runs, one after another, each waiting on the database
	# for as long as it is locked.
	(while [ -e "$T/locked" ]; do
		id=$(cat "$MNT/runs/new") || break
		mkdir "$MNT/runs/$id" 2>/dev/null
	done) &
	local maker=$!
	sleep 0.5
	within 20 "cat README while a mkdir waits on the database" cat "$MNT/README"
	within 20 "ls skills while a mkdir waits on the database" ls "$MNT/skills"
	within 20 "stat skills/reader/SKILL.md while a mkdir waits" stat "$MNT/skills/reader/SKILL.md"
	# Nor what needs the run manager or reads the store: a mkdir that
	# waits for the database holds neither meanwhile.
	# The first try of each must not wait for the database (it waited
	# seconds), and the best of three answers as fast as the rest.
	once_within 500 "cat runs/new while a mkdir waits on the database" cat "$MNT/runs/new"
	once_within 500 "cat a run's status while a mkdir waits" cat "$MNT/runs/$done_id/status"
	once_within 500 "cat a run's transcript while a mkdir waits" cat "$MNT/runs/$done_id/transcript"
	within 20 "cat runs/new while a mkdir waits on the database" cat "$MNT/runs/new"
	within 20 "cat a run's status while a mkdir waits" cat "$MNT/runs/$done_id/status"
	within 20 "cat a run's transcript while a mkdir waits" cat "$MNT/runs/$done_id/transcript"
	# The kernel holds runs/ locked while a mkdir in it waits: a listing
	# waits for that mkdir, which gives up after 250 ms (EAGAIN).
	once_within 600 "ls runs while mkdirs wait on the database" ls "$MNT/runs"
	mkdir "$MNT/runs/$(cat "$MNT/runs/new")" 2>"$T/mkdir.err" && fail "a mkdir while locked succeeded"
	grep -q "Resource temporarily unavailable" "$T/mkdir.err" ||
		fail "a mkdir while locked did not say EAGAIN: $(cat "$T/mkdir.err")"
	# Each try ran while the database was locked (a stalled one would
	# have outlasted the lock).
	[ -e "$T/locked" ] || fail "the checks outlasted the lock: they waited for the mkdirs"
	wait "$locker"
	wait "$maker"
	local id
	id=$(cat "$MNT/runs/new") && mkdir "$MNT/runs/$id" || fail "a mkdir after the lock is gone"
}

# The size stat gives equals the bytes a read returns, for messages.json
# and transcript, at each step of a growing run (a sample whose stat
# changed across its read saw the run change, and is not counted).
test_stat_size_is_the_bytes_read_as_a_run_grows() {
	python3 - >"$T/script.json" <<'PY'
import json
turns = [{"sleep_ms": 600 if i else 0, "role": "assistant", "content": "step %d " % i + "y" * 3000,
          "tool_calls": [{"id": "c%d" % i, "type": "function",
                          "function": {"name": "read", "arguments": json.dumps({"path": "SKILL.md"})}}]}
         for i in range(8)]
turns.append({"sleep_ms": 600, "role": "assistant", "content": "done"})
print(json.dumps(turns))
PY
	write_config "{provider: command, command: [$FAKE_MODEL, $T/script.json], timeout: 30}"
	start_with "$T/grow-state" || return
	local id
	id=$(cat "$MNT/runs/new") && mkdir "$MNT/runs/$id" || { fail "mkdir of a run"; return; }
	echo "read it" >"$MNT/runs/$id/prompt"
	local stable=0 f a b n st
	for _ in $(seq 1 200); do
		st=$(cat "$MNT/runs/$id/status")
		for f in messages.json transcript; do
			a=$(stat -c %s "$MNT/runs/$id/$f")
			n=$(wc -c <"$MNT/runs/$id/$f")
			b=$(stat -c %s "$MNT/runs/$id/$f")
			[ "$a" = "$b" ] || continue
			assert_eq "$a" "$n" "stat size against the bytes read of $f ($st)"
			stable=$((stable + 1))
		done
		case $st in completed | failed) break ;; esac
		sleep 0.1
	done
	assert_eq completed "$(cat "$MNT/runs/$id/wait")" "the growing run"
	[ "$stable" -ge 6 ] || fail "only $stable samples saw the run hold still"
	grep -q "step 7" "$MNT/runs/$id/transcript" || fail "the transcript lacks the last step"
}

run_tests
