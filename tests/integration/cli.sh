#!/usr/bin/env bash
# Integration: the command line (DESIGN.md section 9).
. "$(dirname "$0")/lib.sh"

EXAMPLES=$SRC_ROOT/examples

test_check_examples_ok() {
	local out
	out=$("$SKILLFS" check -c "$EXAMPLES/config.yaml" 2>&1) || fail "check failed on the examples: $out"
	grep -q "git-review" <<<"$out" || fail "check does not list skills: $out"
	grep -q "configuration default" <<<"$out" || fail "check does not show configurations"
	grep -q "first_party" <<<"$out" || fail "check does not show trust"
}

test_check_invalid_attached_skill_exits_1() {
	cp -r "$EXAMPLES/skills" "$T/skills"
	printf -- '---\nname: greet\ndescription: [a: b\n---\n' >"$T/skills/greet/SKILL.md"
	local out rc=0
	out=$("$SKILLFS" check -s "$T/skills" 2>&1) || rc=$?
	assert_eq 1 "$rc" "exit status with an invalid attached skill"
	grep -q "greet" <<<"$out" || fail "check does not name the broken skill: $out"
}

test_check_bad_config_names_line_and_key() {
	printf 'sources: [{path: skills}]\nskills:\n  execution_mode: sometimes\n' >"$T/bad.yaml"
	local out rc=0
	out=$("$SKILLFS" check -c "$T/bad.yaml" 2>&1) || rc=$?
	assert_eq 1 "$rc" "exit status with a bad config"
	grep -q "bad.yaml:3" <<<"$out" || fail "message lacks file:line: $out"
	grep -q "execution_mode" <<<"$out" || fail "message lacks the key: $out"
}

# configs/ERROR is the reload-error file, so a configuration cannot be named so.
test_check_refuses_configuration_named_ERROR() {
	mkdir -p "$T/skills"
	printf 'sources: [{path: skills}]\nconfigurations:\n  default: {skills: []}\n  ERROR: {skills: []}\n' >"$T/err.yaml"
	local out rc=0
	out=$("$SKILLFS" check -c "$T/err.yaml" 2>&1) || rc=$?
	assert_eq 1 "$rc" "exit status with a configuration named ERROR"
	grep -q "err.yaml:4: configurations.ERROR: bad configuration name 'ERROR'" <<<"$out" ||
		fail "message lacks file:line, key or name: $out"
}

test_mount_refuses_bad_config() {
	printf 'runs: {workers: lots}\n' >"$T/bad.yaml"
	mkdir -p "$MNT"
	local out rc=0
	out=$("$SKILLFS" -f -c "$T/bad.yaml" "$MNT" 2>&1) || rc=$?
	[ "$rc" -ne 0 ] || fail "mount started with a bad config"
	grep -q "workers" <<<"$out" || fail "error does not name the key: $out"
	grep -qs " $MNT fuse" /proc/self/mounts && fail "mounted anyway"
	return 0
}

test_usage_and_version() {
	"$SKILLFS" --version | grep -q '^skillfs ' || fail "--version"
	"$SKILLFS" --help | grep -q 'skillfs check' || fail "--help"
	local rc=0
	"$SKILLFS" -s "$EXAMPLES/skills" >/dev/null 2>&1 || rc=$?
	assert_eq 2 "$rc" "missing mountpoint exit status"
}

test_daemonises_and_unmounts_cleanly() {
	mkdir -p "$MNT"
	"$SKILLFS" -s "$EXAMPLES/skills" --state "$T/state.db" "$MNT" || { fail "daemon mode failed"; return; }
	grep -qs " $MNT fuse" /proc/self/mounts || fail "not mounted when the command returned"
	ls "$MNT/skills" | grep -qx greet || fail "mount not serving"
	fusermount3 -u "$MNT" || fail "fusermount3 -u failed"
	sleep 0.2
	grep -qs " $MNT fuse" /proc/self/mounts && fail "still mounted"
	python3 - "$T/state.db" <<'PY' || fail "state database not consistent after unmount"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
assert c.execute("pragma integrity_check").fetchone()[0] == "ok"
PY
}

# Relative paths name what they name in the caller's directory, although
# the daemon works from / once started: the state database lands beside the
# caller, and SIGTERM (whose wake-up goes through the mount point) exits.
test_relative_mount_point_and_state() {
	mkdir -p "$MNT"
	local rel=${MNT#"$T"/}
	(cd "$T" && exec "$SKILLFS" -f -s "$EXAMPLES/skills" --state rel-state/s.db "$rel") \
		>>"$DAEMON_LOG" 2>&1 &
	local pid=$! i
	for i in $(seq 1 200); do
		grep -qs " $MNT fuse" /proc/self/mounts && break
		sleep 0.05
	done
	ls "$MNT/skills" | grep -qx greet || fail "mount not serving"
	[ -f "$T/rel-state/s.db" ] || fail "state database not beside the caller: $(ls "$T")"
	kill -TERM "$pid"
	for i in $(seq 1 40); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	if kill -0 "$pid" 2>/dev/null; then
		fail "SIGTERM did not end a daemon mounted on a relative path within 2 s"
		kill -KILL "$pid"
	fi
	wait "$pid" 2>/dev/null
	grep -qs " $MNT fuse" /proc/self/mounts && fail "still mounted after SIGTERM"
	local out rc=0
	out=$(cd "$T" && "$SKILLFS" -f -s "$EXAMPLES/skills" no-such-dir 2>&1) || rc=$?
	assert_eq 1 "$rc" "exit status for a missing mount point"
	grep -q "mount point no-such-dir: No such file or directory" <<<"$out" ||
		fail "unclear error for a missing mount point: $out"
	return 0
}

run_tests
