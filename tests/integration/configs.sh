#!/usr/bin/env bash
# Integration: configurations through a real mount (DESIGN.md sections 3,
# 4, 8; issue "Configurations"): derived files follow edits within a second.
. "$(dirname "$0")/lib.sh"

make_skill() { # dir name allowed-tools|- [category]
	mkdir -p "$1/$2"
	{
		echo "---"
		echo "name: $2"
		echo "description: skill $2"
		[ "$3" = "-" ] || echo "allowed-tools: $3"
		[ -z "${4:-}" ] || echo "category: $4"
		echo "---"
		echo "# $2"
		echo "Knowledge of $2. $(printf 'filler %.0s' $(seq 1 40))"
	} >"$1/$2/SKILL.md"
}

setup() { # maxBytes
	rm -rf "$T/skills"
	make_skill "$T/skills" reader "[read]" knowledge
	make_skill "$T/skills" writer "[write]" knowledge
	make_skill "$T/skills" plain - knowledge
	cat >"$T/config.yaml" <<CFG
sources: [{path: skills, trust: first_party}]
skills: {maxBytes: $1}
configurations:
  main: {skills: [reader, writer, plain]}
CFG
}

start() { start_mount -c "$T/config.yaml" --state "$T/state.db"; }

# A mistyped key (a security setting that silently does nothing) and a
# source that cannot be read are said on stderr at start and shown in
# every configuration's warnings.
test_config_warnings_are_shown() {
	setup 24000
	sed -i 's/^sources: .*/sources: [{path: skills, trust: first_party}, {path: missing}]/' "$T/config.yaml"
	echo "skils: {minTrustLevel: first_party}" >>"$T/config.yaml"
	start || return
	local w
	w=$(cat "$MNT/configs/main/warnings")
	case "$w" in *"unknown key 'skils'"*) ;; *) fail "warnings lack the unknown key: [$w]" ;; esac
	case "$w" in *"missing"*) ;; *) fail "warnings lack the missing source: [$w]" ;; esac
	grep -q "skillfs: warning: .*unknown key 'skils'" "$DAEMON_LOG" ||
		fail "no warning on stderr: $(cat "$DAEMON_LOG")"
	assert_eq "$(wc -c <"$MNT/configs/main/warnings")" "$(stat -c %s "$MNT/configs/main/warnings")" \
		"warnings size"
}

test_allowed_tools_follow_skill_edit() {
	setup 24000
	start || return
	assert_eq "$(printf 'read\nwrite')" "$(cat "$MNT/configs/main/allowed-tools")" "union (R2)"
	sed -i 's/^allowed-tools: .*/allowed-tools: [read, bash]/' "$T/skills/reader/SKILL.md"
	wait_for 1 grep -qx bash "$MNT/configs/main/allowed-tools" ||
		fail "allowed-tools did not follow the edit within 1 s: $(cat "$MNT/configs/main/allowed-tools")"
	assert_eq "$(printf 'bash\nread\nwrite')" "$(cat "$MNT/configs/main/allowed-tools")" "after edit"
	assert_eq "$(wc -c <"$MNT/configs/main/allowed-tools")" "$(stat -c %s "$MNT/configs/main/allowed-tools")" "size"
	grep -q '"policy": "list"' "$MNT/configs/main/grants.json" || fail "grants.json policy"
	# a broken SKILL.md declares [] (D1): the others still grant their tools
	printf -- '---\nname: reader\ndescription: [unclosed\n---\n' >"$T/skills/reader/SKILL.md"
	wait_for 1 grep -q 'reader invalid' "$MNT/configs/main/skills" || fail "invalid state not shown: $(cat "$MNT/configs/main/skills")"
	assert_eq "write" "$(cat "$MNT/configs/main/allowed-tools")" "invalid skill grants nothing"
}

test_disabled_skill_leaves_effective() {
	setup 24000
	start || return
	assert_eq "$(printf 'reader\nwriter\nplain')" "$(cat "$MNT/configs/main/effective")" "effective (R1)"
	sed -i 's/main: {skills: \[reader, writer, plain\]}/main: {skills: [reader, {name: writer, enabled: false}, plain]}/' "$T/config.yaml"
	wait_for 1 file_is "$MNT/configs/main/effective" "$(printf 'reader\nplain')" ||
		fail "disabled skill still effective: $(cat "$MNT/configs/main/effective")"
	grep -q '^writer disabled' "$MNT/configs/main/skills" || fail "skills file: $(cat "$MNT/configs/main/skills")"
	assert_eq read "$(cat "$MNT/configs/main/allowed-tools")" "R4: a disabled skill grants nothing"
}

test_R9_budget_drop_keeps_tools() {
	setup 700
	start || return
	grep -q "writer" "$MNT/configs/main/warnings" || fail "no drop warning: $(cat "$MNT/configs/main/warnings")"
	grep -q "maxBytes" "$MNT/configs/main/warnings" || fail "drop warning does not name the budget"
	grep -q 'name="writer"' "$MNT/configs/main/skill-block" && fail "dropped skill's prose reached the block"
	assert_eq "$(printf 'read\nwrite')" "$(cat "$MNT/configs/main/allowed-tools")" "R9: dropped skill keeps its tools"
	[ "$(stat -c %s "$MNT/configs/main/skill-block")" -le 700 ] || fail "skill block over budget"
	return 0
}

test_bad_config_reload_keeps_last_good() {
	setup 24000
	start || return
	[ ! -e "$MNT/configs/ERROR" ] || fail "ERROR present with a good config"
	sed -i 's/^skills: {maxBytes: 24000}/skills: {maxBytes: 24000, execution_mode: fast}/' "$T/config.yaml"
	wait_for 1 test -e "$MNT/configs/ERROR" || fail "configs/ERROR did not appear"
	grep -q "execution_mode" "$MNT/configs/ERROR" || fail "ERROR does not name the key: $(cat "$MNT/configs/ERROR")"
	assert_eq "$(printf 'reader\nwriter\nplain')" "$(cat "$MNT/configs/main/effective")" "last good config kept"
	setup 24000
	wait_for 1 test ! -e "$MNT/configs/ERROR" || fail "ERROR stayed after the fix"
}

test_system_prompt_parts_consistent() {
	setup 24000
	start || return
	local sp=$MNT/configs/main/system-prompt
	grep -q "Knowledge of reader" "$sp" || fail "system prompt lacks the knowledge block"
	assert_eq "$(wc -c <"$sp")" "$(stat -c %s "$sp")" "system-prompt size"
	assert_eq "$(printf 'inline\nexecution_mode inline')" "$(head -2 "$MNT/skills/reader/mode")" "mode (R10)"
}

test_files_beside_config_do_not_reload() {
	setup 24000
	export SKILLFS_STATS=1
	start || { unset SKILLFS_STATS; return; }
	unset SKILLFS_STATS
	cat "$MNT/configs/main/allowed-tools" >/dev/null
	# The state database usually lives beside the config and changes at
	# every step of every run: that must not rebuild anything.
	local i
	for i in 1 2 3 4 5; do
		echo "$i" >"$T/unrelated.$i"
		sleep 0.05
	done
	sleep 0.3
	cat "$MNT/configs/main/allowed-tools" >/dev/null
	fusermount3 -u "$MNT"
	wait "$DAEMON_PID"
	DAEMON_PID=
	grep -q "resolutions_built=1\$" "$DAEMON_LOG" ||
		fail "a file beside the config caused a reload: $(grep stats "$DAEMON_LOG")"
}

# A file beside the config that is written while held open (SQLite's WAL
# when the state database lives there) must not even wake the watcher:
# only a save of the config itself (a close or a rename) concerns it.
test_writes_beside_config_leave_watcher_asleep() {
	setup 24000
	start || return
	local t tid= before after i
	# The watcher thread starts beside the mount: give it a moment.
	for _ in $(seq 1 100); do
		for t in /proc/"$DAEMON_PID"/task/*; do
			[ "$(cat "$t/comm" 2>/dev/null)" = skillfs-watch ] && tid=$t
		done
		[ -n "$tid" ] && break
		sleep 0.02
	done
	[ -n "$tid" ] || { fail "no skillfs-watch thread within 2 s"; return; }
	sleep 0.5 # its start-up rescan is over
	before=$(awk '/^voluntary_ctxt_switches/ {print $2}' "$tid/status")
	exec 7>>"$T/held.log"
	for i in $(seq 1 40); do
		echo "$i" >&7
		sleep 0.01
	done
	after=$(awk '/^voluntary_ctxt_switches/ {print $2}' "$tid/status")
	exec 7>&-
	[ $((after - before)) -le 3 ] ||
		fail "the watcher woke $((after - before)) times for 40 writes beside the config"
	# A save of the config itself is still seen.
	sed -i 's/main: {skills: \[reader, writer, plain\]}/main: {skills: [reader]}/' "$T/config.yaml"
	wait_for 1 file_is "$MNT/configs/main/effective" reader ||
		fail "config edit not seen: $(cat "$MNT/configs/main/effective")"
}

run_tests
