#!/usr/bin/env bash
# Integration: finding skills in a source (DESIGN.md section 2; issue 15,
# "Finding skills"). A collection keeps its skills one or two levels down
# (skills/, plugins/<p>/skills/, hidden .curated/): a plain source on its
# root says where they are; a recursive one (recursive: true, -r DIR) loads
# them all and follows edits.
. "$(dirname "$0")/lib.sh"

# skill_md NAME [DESCRIPTION]: a valid SKILL.md text.
skill_md() {
	printf -- '---\nname: %s\ndescription: %s\n---\nBody of %s.\n' "$1" "${2:-the $1 skill}" "$1"
}

# collection DIR: a collection's root: skills/a, plugins/p/skills/b and
# .curated/c, nothing directly in it; beside them what a search must not
# take: skills in .git and node_modules, one behind a symbolic link to a
# directory, and a SKILL.md inside skill a's own files (a's sub-skill in
# a/skills/sub is a sub-skill).
collection() {
	local x=$1
	rm -rf "$x" "$T/elsewhere" "$T/new" "$T/plain" # the previous test's
	mkdir -p "$x/skills/a/examples/inner" "$x/skills/a/skills/sub" "$x/plugins/p/skills/b" \
		"$x/.curated/c" "$x/.git/hooks/g" "$x/node_modules/pkg/n" "$T/elsewhere/l" "$x/docs"
	skill_md a >"$x/skills/a/SKILL.md"
	skill_md inner >"$x/skills/a/examples/inner/SKILL.md"
	skill_md sub >"$x/skills/a/skills/sub/SKILL.md"
	skill_md b >"$x/plugins/p/skills/b/SKILL.md"
	skill_md c >"$x/.curated/c/SKILL.md"
	skill_md g >"$x/.git/hooks/g/SKILL.md"
	skill_md n >"$x/node_modules/pkg/n/SKILL.md"
	skill_md l >"$T/elsewhere/l/SKILL.md"
	ln -s "$T/elsewhere" "$x/docs/linked"
	echo "# a collection" >"$x/README.md"
}

# The hint names each directory holding skills, with its count.
hint_ok() { # TEXT
	local x=$T/coll
	grep -qF "no skills directly in $x; 3 found in" <<<"$1" &&
		grep -qF "$x/skills (1)" <<<"$1" &&
		grep -qF "$x/plugins/p/skills (1)" <<<"$1" &&
		grep -qF "$x/.curated (1)" <<<"$1" &&
		grep -qF 'recursive: true' <<<"$1"
}

test_plain_source_hint_in_check_log_and_warnings() {
	collection "$T/coll"
	local out
	out=$("$SKILLFS" check -s "$T/coll" 2>&1)
	hint_ok "$out" || fail "skillfs check gives no hint naming the directories: $out"
	grep -q "\.git\|node_modules\|elsewhere\|inner" <<<"$out" &&
		fail "the hint counts skills it must not: $out"
	start_mount -s "$T/coll" --state "$T/state.db" || return
	hint_ok "$(cat "$DAEMON_LOG")" || fail "the daemon log gives no hint: $(cat "$DAEMON_LOG")"
	hint_ok "$(cat "$MNT/configs/default/warnings")" ||
		fail "configs/default/warnings gives no hint: $(cat "$MNT/configs/default/warnings")"
	assert_eq "" "$(ls "$MNT/skills")" "skills/ of a plain source on the collection's root"
}

# A source with no SKILL.md anywhere says so too.
test_source_without_any_skill_warns() {
	mkdir -p "$T/empty/docs"
	local out
	out=$("$SKILLFS" check -s "$T/empty" 2>&1)
	grep -qF "no skills in $T/empty: no directory in it holds a SKILL.md" <<<"$out" ||
		fail "no warning for a source without skills: $out"
	out=$("$SKILLFS" check -r "$T/empty" 2>&1)
	grep -qF "no skills in $T/empty: no directory below it holds a SKILL.md" <<<"$out" ||
		fail "no warning for a recursive source without skills: $out"
}

# What a recursive source of the collection must show.
check_recursive_mount() {
	assert_eq "$(printf 'a\nb\nc')" "$(ls "$MNT/skills")" "skills/ of the recursive source"
	assert_eq "sub" "$(ls "$MNT/skills/a/sub-skills" 2>&1)" "a's sub-skills"
	assert_file_eq "$T/coll/plugins/p/skills/b/SKILL.md" "$MNT/skills/b/SKILL.md"
	assert_file_eq "$T/coll/skills/a/examples/inner/SKILL.md" "$MNT/skills/a/files/examples/inner/SKILL.md"
	assert_eq "$(printf 'a\nb\nc')" "$(cat "$MNT/configs/default/effective")" "effective skills"
	grep -q "no skills directly" "$MNT/configs/default/warnings" &&
		fail "a recursive source still warns: $(cat "$MNT/configs/default/warnings")"
	return 0
}

# ms until skill b's description reads TEXT after it is written (best of 3
# edits: a stall is seconds, noise milliseconds), into LATENCY_MS.
edit_latency() {
	local best= i t0 t1 ms
	for i in 1 2 3; do
		t0=$(date +%s%N)
		skill_md b "edit $i" >"$T/coll/plugins/p/skills/b/SKILL.md"
		wait_for 10 file_is "$MNT/skills/b/description" "edit $i" ||
			{ fail "edit $i of b did not show within 10 s: $(cat "$MNT/skills/b/description")"; return 1; }
		t1=$(date +%s%N)
		ms=$(((t1 - t0) / 1000000))
		[ -z "$best" ] || [ "$ms" -lt "$best" ] && best=$ms
	done
	LATENCY_MS=$best
	echo "# edit of b shown after $best ms (best of 3)"
}

test_recursive_true_loads_every_skill_and_follows_edits() {
	collection "$T/coll"
	printf 'sources:\n  - {path: coll, trust: community, recursive: true}\nconfigurations:\n  default: {skills: [a, b, c]}\n' >"$T/config.yaml"
	local out
	out=$("$SKILLFS" check -c "$T/config.yaml" 2>&1) || fail "check failed: $out"
	for s in a b c; do
		grep -q "^skill $s: valid" <<<"$out" || fail "check does not load $s: $out"
	done
	grep -q "^skill \(g\|n\|l\|inner\):" <<<"$out" && fail "check loads a skill it must not: $out"
	start_mount -c "$T/config.yaml" --state "$T/state.db" || return
	check_recursive_mount
	grep -q '"trust": "community"' "$MNT/skills/c/skill.json" || fail "c does not take the source's trust"
	edit_latency || return
	[ "$LATENCY_MS" -lt 1000 ] || fail "an edit took $LATENCY_MS ms (best of 3) to show"
}

test_dash_r_loads_every_skill_and_follows_edits() {
	collection "$T/coll"
	local out
	out=$("$SKILLFS" check -r "$T/coll" 2>&1) || fail "check -r failed: $out"
	grep -q "^skill c: valid" <<<"$out" || fail "check -r does not load .curated/c: $out"
	start_mount -r "$T/coll" --state "$T/state.db" || return
	check_recursive_mount
	edit_latency || return
	[ "$LATENCY_MS" -lt 1000 ] || fail "an edit took $LATENCY_MS ms (best of 3) to show"
	# Skills moved in deep below directories the search went through, and
	# into a hidden one.
	mkdir -p "$T/new/d" "$T/new/e"
	skill_md d >"$T/new/d/SKILL.md"
	skill_md e >"$T/new/e/SKILL.md"
	mv "$T/new/d" "$T/coll/plugins/p/skills/d"
	mv "$T/new/e" "$T/coll/.curated/e"
	wait_for 10 test -e "$MNT/skills/d/SKILL.md" || fail "a new deep skill did not show: $(ls "$MNT/skills")"
	wait_for 10 test -e "$MNT/skills/e/SKILL.md" || fail "a new hidden skill did not show: $(ls "$MNT/skills")"
	# A file edited in its files shows too.
	echo "one" >"$T/coll/.curated/c/notes.txt"
	wait_for 10 file_is "$MNT/skills/c/files/notes.txt" one || fail "a new file of c did not show"
}

# -s and -r keep their order: the first source wins a duplicate, the other
# is reported.
test_duplicate_across_plain_and_recursive_sources() {
	collection "$T/coll"
	mkdir -p "$T/plain/b"
	skill_md b "the plain b" >"$T/plain/b/SKILL.md"
	local out
	out=$("$SKILLFS" check -s "$T/plain" -r "$T/coll" 2>&1)
	grep -qF "skill 'b' in $T/coll/plugins/p/skills/b is shadowed by the one in $T/plain/b" <<<"$out" ||
		fail "no shadowing warning: $out"
	start_mount -s "$T/plain" -r "$T/coll" --state "$T/state.db" || return
	assert_eq "the plain b" "$(cat "$MNT/skills/b/description")" "b from the first source"
	assert_eq "$(printf 'a\nb\nc')" "$(ls "$MNT/skills")" "skills/ of both sources"
}

# In a recursive source the first in search order wins a duplicate; the
# other is reported and still followed: renamed, it shows as its own skill.
test_recursive_duplicate_reported_and_followed() {
	collection "$T/coll"
	skill_md b "the curated b" >"$T/coll/.curated/c/SKILL.md"
	start_mount -r "$T/coll" --state "$T/state.db" || return
	assert_eq "$(printf 'a\nb')" "$(ls "$MNT/skills")" "skills/ with a duplicate"
	assert_eq "the curated b" "$(cat "$MNT/skills/b/description")" "b first in search order"
	grep -qF "skill 'b' in $T/coll/plugins/p/skills/b is shadowed by the one in $T/coll/.curated/c" \
		"$MNT/configs/default/warnings" || fail "no shadowing warning: $(cat "$MNT/configs/default/warnings")"
	skill_md e >"$T/coll/plugins/p/skills/b/SKILL.md"
	wait_for 10 test -e "$MNT/skills/e/SKILL.md" || fail "the shadowed skill renamed did not show: $(ls "$MNT/skills")"
}

# The search stays on the source's filesystem: the mount itself placed
# inside a recursive source (and any other mount below it) is not searched,
# at start or when the source changes.
test_recursive_search_does_not_enter_other_filesystems() {
	collection "$T/coll"
	local tmpfs=
	if [ "$(id -u)" -ne 0 ]; then
		echo "# not root: no tmpfs below the source"
	else
		tmpfs=$T/coll/plugins/other
		mkdir -p "$T/coll/plugins/other"
		mount -t tmpfs tmpfs "$T/coll/plugins/other" || { fail "cannot mount a tmpfs"; return; }
		mkdir -p "$T/coll/plugins/other/x"
		skill_md x >"$T/coll/plugins/other/x/SKILL.md"
	fi
	local outer=$MNT
	MNT=$T/coll/mnt
	if start_mount -r "$T/coll" --state "$T/state.db"; then
		check_mount_inside_source
	fi
	stop_mount
	rmdir "$MNT"
	MNT=$outer
	if [ -n "$tmpfs" ]; then
		umount "$tmpfs" || fail "cannot unmount the tmpfs"
	fi
}

check_mount_inside_source() {
	assert_eq "$(printf 'a\nb\nc')" "$(ls "$MNT/skills")" "skills/ with the mount inside the source"
	skill_md b "edited" >"$T/coll/plugins/p/skills/b/SKILL.md"
	wait_for 10 file_is "$MNT/skills/b/description" edited || fail "the edit did not show"
	assert_eq "$(printf 'a\nb\nc')" "$(ls "$MNT/skills")" "skills/ after a reload"
	grep -q "shadowed" "$MNT/configs/default/warnings" &&
		fail "the mount's own skills were searched: $(cat "$MNT/configs/default/warnings")"
	return 0
}

test_help_names_dash_r() {
	"$SKILLFS" --help | grep -q -- '-r, --recursive DIR' || fail "--help does not name -r"
}

run_tests
