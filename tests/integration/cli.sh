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
	printf -- '---\nname: greet\ndescription: a: b\n---\n' >"$T/skills/greet/SKILL.md"
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

run_tests
