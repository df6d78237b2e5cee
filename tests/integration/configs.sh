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
	wait_for 1 grep -q 'reader invalid' "$MNT/configs/main/attachments" || fail "invalid state not shown: $(cat "$MNT/configs/main/attachments")"
	assert_eq "write" "$(cat "$MNT/configs/main/allowed-tools")" "invalid skill grants nothing"
}

test_disabled_skill_leaves_effective() {
	setup 24000
	start || return
	assert_eq "$(printf 'reader\nwriter\nplain')" "$(cat "$MNT/configs/main/effective")" "effective (R1)"
	sed -i 's/main: {skills: \[reader, writer, plain\]}/main: {skills: [reader, {name: writer, enabled: false}, plain]}/' "$T/config.yaml"
	wait_for 1 file_is "$MNT/configs/main/effective" "$(printf 'reader\nplain')" ||
		fail "disabled skill still effective: $(cat "$MNT/configs/main/effective")"
	grep -q '^writer disabled' "$MNT/configs/main/attachments" || fail "skills file: $(cat "$MNT/configs/main/attachments")"
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

# A config file reached through links that are swapped, as Kubernetes
# updates a mounted ConfigMap (config.yaml -> ..data/config.yaml, and
# ..data -> a new version directory, renamed into place), is followed; so
# is an edit of the file the links lead to. Relative paths in it are taken
# from the directory it is in.
test_config_behind_swapped_links_is_followed() {
	setup 24000
	local cm=$T/cm
	rm -rf "$cm"
	mkdir -p "$cm/..v1"
	mv "$T/skills" "$cm/..v1/skills"
	cp "$T/config.yaml" "$cm/..v1/config.yaml"
	ln -s ..v1 "$cm/..data"
	ln -s ..data/config.yaml "$cm/config.yaml"
	start_mount -c "$cm/config.yaml" --state "$T/state.db" || return
	assert_eq "$(printf 'reader\nwriter\nplain')" "$(cat "$MNT/configs/main/effective")" "before"
	mkdir "$cm/..v2"
	cp -r "$cm/..v1/skills" "$cm/..v2/skills"
	sed 's/main: {skills: \[reader, writer, plain\]}/main: {skills: [writer]}/' \
		"$cm/..v1/config.yaml" >"$cm/..v2/config.yaml"
	ln -s ..v2 "$cm/..data_tmp"
	mv -T "$cm/..data_tmp" "$cm/..data"
	rm -rf "$cm/..v1"
	wait_for 2 file_is "$MNT/configs/main/effective" writer ||
		fail "the swapped config was not followed: $(cat "$MNT/configs/main/effective")"
	[ ! -e "$MNT/configs/ERROR" ] || fail "an error after the swap: $(cat "$MNT/configs/ERROR")"
	# An edit in place of the file behind the links.
	sed -i 's/main: {skills: \[writer\]}/main: {skills: [reader]}/' "$cm/..v2/config.yaml"
	wait_for 2 file_is "$MNT/configs/main/effective" reader ||
		fail "an edit behind the links was not followed: $(cat "$MNT/configs/main/effective")"
}

# cfg_named FILE NAME: a config with one configuration, NAME, attaching
# skill reader from $T/skills (absolute), written to FILE.
cfg_named() {
	printf 'sources: [{path: %s, trust: first_party}]\nconfigurations:\n  %s: {skills: [reader]}\n' \
		"${3:-$T/skills}" "$2" >"$1"
}

# shows NAME: configs/ lists exactly NAME.
shows() { [ "$(ls "$MNT/configs" 2>/dev/null | tr '\n' ' ')" = "$1 " ]; }

# follows NAME WHAT: the mount comes to show configuration NAME.
follows() {
	wait_for 2 shows "$1" || fail "$2: configs shows [$(ls "$MNT/configs" | tr '\n' ' ')], not $1"
}

# The ways a config file can be reached through links, and changed behind
# them: each change is followed.
test_config_links_every_way() {
	setup 24000
	local w=$T/ln
	# A config kept in a source directory, the source named by a link.
	rm -rf "$w"
	mkdir -p "$w/c"
	ln -s c "$w/clink"
	make_skill "$w/c" k1 -
	cfg_named "$w/c/config.yaml" I1 "$w/clink"
	start_mount -c "$w/c/config.yaml" --state "$T/state.db" || return
	follows I1 "a config in a linked source"
	cfg_named "$w/c/config.yaml" I2 "$w/clink"
	follows I2 "rewritten in a linked source"
	sed -i 's/I2/I3/' "$w/c/config.yaml"
	follows I3 "sed -i in a linked source"
	stop_mount
	# Through a linked directory, to a file of another name.
	rm -rf "$w"
	mkdir -p "$w/A" "$w/B"
	cfg_named "$w/A/real.yaml" R1
	ln -s real.yaml "$w/A/config.yaml"
	cfg_named "$w/B/config.yaml" B1
	ln -s A "$w/link"
	start_mount -c "$w/link/config.yaml" --state "$T/state.db" || return
	follows R1 "through a linked directory"
	cfg_named "$w/A/real.yaml" R2
	follows R2 "an edit of the file of another name"
	# The linked directory retargeted, then an edit there.
	ln -sfn B "$w/link"
	follows B1 "the linked directory retargeted"
	cfg_named "$w/B/config.yaml" B2
	follows B2 "an edit in the new directory"
	stop_mount
	# A chain of two links, the middle one retargeted by a rename.
	rm -rf "$w"
	mkdir -p "$w/given" "$w/mid" "$w/v1" "$w/v2"
	cfg_named "$w/v1/config.yaml" V1
	cfg_named "$w/v2/config.yaml" V2
	ln -s ../v1/config.yaml "$w/mid/link.yaml"
	ln -s ../mid/link.yaml "$w/given/config.yaml"
	start_mount -c "$w/given/config.yaml" --state "$T/state.db" || return
	follows V1 "a chain of links"
	ln -s ../v2/config.yaml "$w/mid/tmp.yaml"
	mv -T "$w/mid/tmp.yaml" "$w/mid/link.yaml"
	follows V2 "the middle link retargeted"
	# The directory holding the file renamed, the link made to follow.
	mv "$w/v2" "$w/v3"
	ln -sfn ../v3/config.yaml "$w/mid/link.yaml"
	cfg_named "$w/v3/config.yaml" V3
	follows V3 "an edit after its directory was renamed"
	# The directory removed and made again.
	rm -rf "$w/v3"
	mkdir "$w/v3"
	cfg_named "$w/v3/config.yaml" V4
	follows V4 "the directory removed and made again"
	# A link to a file not there yet: an error, until it is there.
	ln -sfn ../v3/later.yaml "$w/mid/link.yaml"
	wait_for 2 test -e "$MNT/configs/ERROR" || fail "no ERROR for a dangling link"
	cfg_named "$w/v3/later.yaml" V5
	follows V5 "the missing file written"
	[ ! -e "$MNT/configs/ERROR" ] || fail "ERROR left after the file came"
}

test_bad_config_reload_keeps_last_good() {
	setup 24000
	start || return
	[ ! -e "$MNT/configs/ERROR" ] || fail "ERROR present with a good config"
	sed -i 's/^skills: {maxBytes: 24000}/skills: {maxBytes: 24000, execution_mode: fast}/' "$T/config.yaml"
	wait_for 1 test -e "$MNT/configs/ERROR" || fail "configs/ERROR did not appear"
	grep -q "execution_mode" "$MNT/configs/ERROR" || fail "ERROR does not name the key: $(cat "$MNT/configs/ERROR")"
	assert_eq "$(printf 'reader\nwriter\nplain')" "$(cat "$MNT/configs/main/effective")" "last good config kept"
	# The daemon's log says so too, naming the key.
	grep -q "config file was not reloaded.*execution_mode" "$DAEMON_LOG" ||
		fail "the log does not show the refused edit: $(cat "$DAEMON_LOG")"
	setup 24000
	wait_for 1 test ! -e "$MNT/configs/ERROR" || fail "ERROR stayed after the fix"
	grep -q "config file was reloaded" "$DAEMON_LOG" ||
		fail "the log does not show the config taken again: $(cat "$DAEMON_LOG")"
	# An edit that brings a warning (a mistyped key) logs it once.
	sed -i 's/^skills: {maxBytes: 24000}/skills: {maxBytes: 24000, maxbyte: 3}/' "$T/config.yaml"
	wait_for 1 grep -q "warning:.*maxbyte" "$DAEMON_LOG" ||
		fail "the log does not show the new warning: $(cat "$DAEMON_LOG")"
	assert_eq 1 "$(grep -c "warning:.*maxbyte" "$DAEMON_LOG")" "the new warning is logged once"
}

# A config file of 100,000 nested '[' is refused at once with the bound
# named (the document loader's cost grows with the square of the depth: it
# never finished, and the watcher applied nothing meanwhile); a valid edit
# after it is taken.
test_deep_nesting_reload_refused_fast() {
	setup 24000
	start || return
	python3 -c 'print("[" * 100000)' >"$T/config.yaml"
	wait_for 10 grep -qs "nested deeper than 64 levels" "$MNT/configs/ERROR" ||
		fail "no configs/ERROR naming the nesting: $(cat "$MNT/configs/ERROR" 2>&1)"
	assert_eq "$(printf 'reader\nwriter\nplain')" "$(cat "$MNT/configs/main/effective")" "last good config kept"
	grep -q "config file was not reloaded.*nested deeper" "$DAEMON_LOG" ||
		fail "the log does not show the refusal: $(cat "$DAEMON_LOG")"
	setup 24000
	sed -i 's/main: {skills: \[reader, writer, plain\]}/main: {skills: [reader]}/' "$T/config.yaml"
	wait_for 10 file_is "$MNT/configs/main/effective" reader ||
		fail "the valid edit after it was not taken: $(cat "$MNT/configs/main/effective")"
	[ ! -e "$MNT/configs/ERROR" ] || fail "ERROR stayed after the fix"
}

# An emptied config file (or one left with only comments) is refused like
# any broken one: the mount keeps the last good config instead of dropping
# every configuration.
test_empty_config_reload_keeps_last_good() {
	setup 24000
	start || return
	local text
	for text in "" "# being rewritten"; do
		printf '%s' "$text" >"$T/config.yaml"
		wait_for 10 grep -qs "holds no settings" "$MNT/configs/ERROR" ||
			fail "no configs/ERROR for [$text]: $(cat "$MNT/configs/ERROR" 2>&1)"
		assert_eq "$(printf 'reader\nwriter\nplain')" "$(cat "$MNT/configs/main/effective" 2>&1)" "last good config kept for [$text]"
		ls "$MNT/configs" | grep -qx main || fail "configuration main gone for [$text]"
		setup 24000
		wait_for 10 test ! -e "$MNT/configs/ERROR" || fail "ERROR stayed after the fix"
	done
}

# At start-up an empty config file is an error that says so, and the mount
# does not come up.
test_empty_config_at_start_is_refused() {
	setup 24000
	printf '# nothing here yet\n' >"$T/config.yaml"
	mkdir -p "$MNT"
	local rc=0
	timeout 20 "$SKILLFS" -f -c "$T/config.yaml" --state "$T/state.db" "$MNT" >"$T/out" 2>&1 || rc=$?
	[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "skillfs exited $rc on an empty config"
	grep -q "config.yaml: the file holds no settings" "$T/out" ||
		fail "no clear message: $(cat "$T/out")"
	! grep -qs " $MNT fuse" /proc/self/mounts || { fusermount3 -u "$MNT"; fail "mounted anyway"; }
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
	# Its start-up rescan is over once it stays asleep for 300 ms (a
	# loaded machine takes longer than an idle one).
	local prev=-1
	before=$(awk '/^voluntary_ctxt_switches/ {print $2}' "$tid/status")
	for _ in $(seq 1 30); do
		[ "$before" = "$prev" ] && break
		prev=$before
		sleep 0.3
		before=$(awk '/^voluntary_ctxt_switches/ {print $2}' "$tid/status")
	done
	# The watcher also watches the sources' ancestors (such as /tmp) for
	# the next name on the way down, and other programs creating files
	# there wake it too: what counts is how much more it wakes while the
	# file is written than in as long a time without (up to three tries,
	# so that only a watcher woken by the writes fails every time).
	local try woke quiet mid
	wakes() { awk '/^voluntary_ctxt_switches/ {print $2}' "$tid/status"; }
	for try in 1 2 3; do
		before=$(wakes)
		for i in $(seq 1 40); do sleep 0.01; done
		mid=$(wakes)
		exec 7>>"$T/held.log"
		for i in $(seq 1 40); do
			echo "$i" >&7
			sleep 0.01
		done
		after=$(wakes)
		exec 7>&-
		quiet=$((mid - before))
		woke=$((after - mid))
		[ "$woke" -le $((quiet + 3)) ] && break
	done
	[ "$woke" -le $((quiet + 3)) ] ||
		fail "the watcher woke $woke times for 40 writes beside the config, $quiet times without (3 tries)"
	# A save of the config itself is still seen.
	sed -i 's/main: {skills: \[reader, writer, plain\]}/main: {skills: [reader]}/' "$T/config.yaml"
	wait_for 1 file_is "$MNT/configs/main/effective" reader ||
		fail "config edit not seen: $(cat "$MNT/configs/main/effective")"
}

# skills_are NAMES: the mount lists exactly these skills (space-separated).
skills_are() {
	[ "$(ls "$MNT/skills" 2>/dev/null | tr '\n' ' ')" = "${1:+$1 }" ]
}

# listed DIR NAME: a listing of DIR holds NAME.
listed() {
	ls -a "$1" 2>/dev/null | grep -qxF "$2"
}

# A source that is itself one skill: its subdirectories belong to it, so
# edits there show (listings are cached by the kernel until the skill
# changes), after a reload of the config as before one.
test_single_skill_source_files_follow_edits() {
	rm -rf "$T/myskill"
	make_skill "$T" myskill -
	mkdir -p "$T/myskill/references" "$T/myskill/skills"
	echo v1 >"$T/myskill/references/api.md"
	cat >"$T/config.yaml" <<CFG
sources: [{path: myskill}]
configurations:
  main: {skills: [myskill]}
CFG
	start || return
	local refs=$MNT/skills/myskill/files/references v
	file_is "$refs/api.md" v1 || fail "before: $(cat "$refs/api.md")"
	# any reload of the config
	echo "  other: {skills: [myskill]}" >>"$T/config.yaml"
	wait_for 2 test -d "$MNT/configs/other" || { fail "config edit not seen"; return; }
	sleep 0.3 # the reload has invalidated what it changed
	ls "$refs" >/dev/null
	for v in v2 v3; do
		echo "$v" >"$T/myskill/references/api.md"
		wait_for 2 file_is "$refs/api.md" "$v" || fail "edit $v not shown: $(cat "$refs/api.md")"
		ls "$refs" >/dev/null
		echo "$v" >"$T/myskill/references/$v.md"
		wait_for 2 listed "$refs" "$v.md" || fail "new file $v.md not listed: $(ls "$refs")"
	done
	# a sub-skill made in its skills/ directory is its too
	make_skill "$T/myskill/skills" extra -
	wait_for 2 test -e "$MNT/skills/myskill/sub-skills/extra/SKILL.md" ||
		fail "new sub-skill not shown: $(ls "$MNT/skills/myskill")"
}

# Files far below a skill (as deep as the mount shows) follow edits, also
# in directories made after the mount.
test_deep_files_follow_edits() {
	setup 24000
	local rel=a/b/c/d/e/f/g/h/i/j/k/l
	mkdir -p "$T/skills/reader/$rel"
	echo v1 >"$T/skills/reader/$rel/notes.md"
	start || return
	local d=$MNT/skills/reader/files/$rel
	file_is "$d/notes.md" v1 || fail "before: $(cat "$d/notes.md")"
	ls "$d" >/dev/null
	echo v2 >"$T/skills/reader/$rel/notes.md"
	echo v2 >"$T/skills/reader/$rel/added.md"
	wait_for 2 file_is "$d/notes.md" v2 || fail "deep edit not shown: $(cat "$d/notes.md")"
	wait_for 2 listed "$d" added.md || fail "new deep file not listed: $(ls "$d")"
	mkdir -p "$T/skills/reader/$rel/m/n"
	echo w1 >"$T/skills/reader/$rel/m/n/more.md"
	wait_for 2 listed "$d" m || fail "new deep directory not listed: $(ls "$d")"
	wait_for 2 file_is "$d/m/n/more.md" w1 || fail "new deep file not shown"
	ls "$d/m/n" >/dev/null
	echo w2 >"$T/skills/reader/$rel/m/n/second.md"
	wait_for 2 listed "$d/m/n" second.md ||
		fail "file in a new deep directory not listed: $(ls "$d/m/n")"
}

# A source directory replaced by another, or made after the mount, is
# followed (its parent is watched for its name).
test_sources_replaced_or_created_are_followed() {
	rm -rf "$T/src" "$T/src.old" "$T/src.new" "$T/later"
	make_skill "$T/src" a -
	cat >"$T/config.yaml" <<CFG
sources: [{path: src}, {path: later}]
configurations:
  main: {skills: [a, b, c]}
CFG
	start || return
	skills_are a || fail "before: $(ls "$MNT/skills")"
	mv "$T/src" "$T/src.old"
	wait_for 2 skills_are "" || fail "moved source still listed: $(ls "$MNT/skills")"
	make_skill "$T/src.new" c -
	mv "$T/src.new" "$T/src"
	wait_for 2 skills_are c || fail "replaced source not seen: $(ls "$MNT/skills")"
	make_skill "$T/later" b -
	wait_for 2 skills_are "b c" || fail "source made after the mount not seen: $(ls "$MNT/skills")"
	# the new directories' skills are followed too
	sed -i 's/^description: .*/description: changed/' "$T/src/c/SKILL.md" "$T/later/b/SKILL.md"
	wait_for 2 file_is "$MNT/skills/c/description" changed || fail "edit in the replacement not seen"
	wait_for 2 file_is "$MNT/skills/b/description" changed || fail "edit in the new source not seen"
	rm -rf "$T/src.old"
}

# A skills directory given with -s as a symbolic link follows the link
# being retargeted, as a source in the config file does.
test_dash_s_symlink_retargeted_is_followed() {
	rm -rf "$T/s1" "$T/s2" "$T/scur"
	make_skill "$T/s1" one -
	make_skill "$T/s2" two -
	ln -s s1 "$T/scur"
	start_mount -s "$T/scur" --state "$T/state.db" || return
	skills_are one || fail "before: $(ls "$MNT/skills")"
	ln -sfn s2 "$T/scur"
	wait_for 2 skills_are two || fail "retargeted -s link not seen: $(ls "$MNT/skills")"
}

# A source deeper down follows a directory above it being replaced (a
# repository cloned again) or made after the mount.
test_source_below_replaced_directory_is_followed() {
	rm -rf "$T/repo" "$T/repo.new" "$T/deep"
	make_skill "$T/repo/skills" k -
	cat >"$T/config.yaml" <<CFG
sources: [{path: repo/skills}, {path: deep/er/skills}]
configurations:
  main: {skills: [k, d]}
CFG
	start || return
	skills_are k || fail "before: $(ls "$MNT/skills")"
	cp -r "$T/repo" "$T/repo.new"
	rm -rf "$T/repo"
	wait_for 2 skills_are "" || fail "removed source still listed: $(ls "$MNT/skills")"
	mv "$T/repo.new" "$T/repo"
	wait_for 2 skills_are k || fail "source under a replaced directory not seen: $(ls "$MNT/skills")"
	make_skill "$T/deep/er/skills" d -
	wait_for 2 skills_are "d k" || fail "source under new directories not seen: $(ls "$MNT/skills")"
}

# A file written without a pause near the skills (a log in a skill, one
# beside the config) does not hold other changes back.
test_changes_seen_while_a_file_is_written_nonstop() {
	setup 24000
	start || return
	( for _ in $(seq 1 800); do echo x >>"$T/skills/reader/log.txt"; echo y >>"$T/beside.log"; sleep 0.005; done ) &
	local writer=$!
	sleep 0.3
	sed -i 's/^description: .*/description: changed meanwhile/' "$T/skills/writer/SKILL.md"
	wait_for 2 file_is "$MNT/skills/writer/description" "changed meanwhile" ||
		fail "an edit was held back by a file written nonstop: $(cat "$MNT/skills/writer/description")"
	kill "$writer" 2>/dev/null
	wait "$writer" 2>/dev/null
	return 0
}

# A source given as a symbolic link follows the link being retargeted, even
# to a copy whose SKILL.md is the same file (hard-linked) with other files.
test_source_symlink_retargeted_is_followed() {
	rm -rf "$T/v1" "$T/v2" "$T/v3" "$T/v4" "$T/cur" "$T/next"
	make_skill "$T/v1" one -
	make_skill "$T/v2" two -
	ln -s v1 "$T/cur"
	cat >"$T/config.yaml" <<CFG
sources: [{path: cur}]
configurations:
  main: {skills: [one, two]}
CFG
	start || return
	skills_are one || fail "before: $(ls "$MNT/skills")"
	ln -sfn v2 "$T/cur"
	wait_for 2 skills_are two || fail "retargeted link not seen: $(ls "$MNT/skills")"
	mkdir -p "$T/v3/two"
	ln "$T/v2/two/SKILL.md" "$T/v3/two/SKILL.md"
	echo extra >"$T/v3/two/extra.md"
	sleep 0.2 # the new link count of SKILL.md has been seen
	assert_eq "" "$(ls "$MNT/skills/two/files")" "files before"
	ln -sfn v3 "$T/cur"
	wait_for 2 file_is "$MNT/skills/two/files/extra.md" extra ||
		fail "same SKILL.md in a new target: files not reloaded: $(ls "$MNT/skills/two/files")"
	make_skill "$T/v4" four -
	ln -s v4 "$T/next"
	mv -T "$T/next" "$T/cur"
	wait_for 2 skills_are four || fail "link renamed over the source not seen: $(ls "$MNT/skills")"
}

# Issue 15, items 3 and 4: an unquoted ': ' in a description is read as
# plain text with a warning (its allowed-tools count); a description over
# 1,024 characters, a missing one, one shortened in <available_skills> and a
# skill left out by listingMaxBytes are each warned, naming the skill and the
# limit, in skill.json (the skill's own), configs/<cfg>/warnings and
# `skillfs check`.
test_lenient_description_and_listing_warnings() {
	rm -rf "$T/skills"
	mkdir -p "$T/skills"/{dlv,long,extra,nodesc,anchored,badtools}
	printf -- '---\nname: dlv\ndescription: Debug Go with Delve (dlv): inspect goroutines\nallowed-tools: Bash(dlv:*) Read\n---\nbody\n' \
		>"$T/skills/dlv/SKILL.md"
	{
		printf -- '---\nname: long\ndescription: start'
		for _ in $(seq 1 110); do printf ' wordy text'; done # 5 + 1,210 characters
		printf '\n---\nbody\n'
	} >"$T/skills/long/SKILL.md"
	printf -- '---\nname: extra\ndescription: the extra skill\n---\nbody\n' >"$T/skills/extra/SKILL.md"
	printf -- '---\nname: nodesc\nallowed-tools: [write]\n---\nbody\n' >"$T/skills/nodesc/SKILL.md"
	# the fallback would hand the description to allowed-tools: refused
	printf -- '---\nname: anchored\ndescription: &t Bash, Read: all files\nallowed-tools: *t\n---\nbody\n' \
		>"$T/skills/anchored/SKILL.md"
	printf -- '---\nname: badtools\ndescription: d\nallowed-tools: Bash(git: diff) Read: all\n---\nbody\n' \
		>"$T/skills/badtools/SKILL.md"
	cat >"$T/config.yaml" <<CFG
sources: [{path: skills, trust: first_party}]
skills: {listingMaxBytes: 1}
configurations:
  main: {skills: [long, dlv, extra, nodesc]}
  broken: {skills: [anchored, badtools]}
CFG
	local out rc=0
	out=$("$SKILLFS" check -c "$T/config.yaml" 2>&1) || rc=$?
	start || return
	local j=$MNT/skills
	grep -q '"valid": true' "$j/dlv/skill.json" || fail "dlv not valid: $(cat "$j/dlv/skill.json")"
	assert_eq "Debug Go with Delve (dlv): inspect goroutines" "$(cat "$j/dlv/description")" "dlv description"
	assert_eq "$(printf 'Bash(dlv:*)\nRead')" "$(cat "$j/dlv/allowed-tools")" "dlv allowed-tools"
	grep -q '"pattern": "dlv"' "$MNT/configs/main/grants.json" || fail "dlv's grant not in grants.json"
	assert_eq "$(printf 'bash(dlv:*)\nread\nwrite')" "$(cat "$MNT/configs/main/allowed-tools")" \
		"the lenient skill's allowed-tools count"
	grep -q '"valid": false' "$j/anchored/skill.json" || fail "anchored read leniently"
	grep -q "would change the key 'allowed-tools'" "$j/anchored/skill.json" || fail "anchored error: $(cat "$j/anchored/skill.json")"
	grep -q '"valid": false' "$j/badtools/skill.json" || fail "broken allowed-tools line read leniently"
	assert_eq "" "$(cat "$MNT/configs/broken/allowed-tools")" "invalid skills grant nothing"
	# the listing: long first (always listed) and cut, nodesc left out
	local a
	a=$(cat "$MNT/configs/main/available-skills")
	grep 'name="long"' <<<"$a" | grep -qF ' wordy…</skill>' || fail "long not cut with an ellipsis: $a"
	grep -q 'name="nodesc"' <<<"$a" && fail "a skill without description listed: $a"
	local w
	w=$(cat "$MNT/configs/main/warnings")
	local want name
	# the skills' own: "skill 'x': ..." in warnings, "skill x: warning: ..." in check
	for want in \
		"dlv: front-matter line 3: the description's value holds ': '" \
		"long: the description is 1215 characters, over the limit of 1024 characters" \
		"nodesc: no description in the front-matter: the skill is not listed in <available_skills>"; do
		name=${want%%:*}
		grep -qF "skill '$name'${want#"$name"}" <<<"$w" || fail "configs/main/warnings lacks [$want]: $w"
		grep -qF "skill $name: warning${want#"$name"}" <<<"$out" || fail "skillfs check lacks [$want]: $out"
	done
	# the configuration's
	for want in \
		"skill 'long': description shortened in <available_skills> from 1215 to 199 characters" \
		"skill 'dlv' not listed in <available_skills>: the listing is full, budget skills.listingMaxBytes=1" \
		"skill 'extra' not listed in <available_skills>: the listing is full, budget skills.listingMaxBytes=1"; do
		grep -qF "$want" <<<"$w" || fail "configs/main/warnings lacks [$want]: $w"
		grep -qF "$want" <<<"$out" || fail "skillfs check lacks [$want]: $out"
	done
	grep -qF "read as plain text" "$j/dlv/skill.json" || fail "dlv skill.json lacks the warning"
	grep -qF "over the limit of 1024 characters" "$j/long/skill.json" || fail "long skill.json lacks the warning"
	grep -qF "not listed in <available_skills>" "$j/nodesc/skill.json" || fail "nodesc skill.json lacks the warning"
	assert_eq 1 "$rc" "check exit status (configuration broken has invalid skills)"
}

run_tests
