#!/usr/bin/env bash
# Integration: the read-only skill catalogue through a real mount
# (DESIGN.md sections 2 and 8; issue "Foundation").
. "$(dirname "$0")/lib.sh"

EXAMPLES=$SRC_ROOT/examples/skills

# A private copy of the examples, so tests can edit skills.
fresh_skills() {
	rm -rf "$T/skills"
	cp -r "$EXAMPLES" "$T/skills"
}

test_listing_and_reading() {
	fresh_skills
	start_mount -s "$T/skills" || return
	assert_eq "README audit configs runs skills tools" "$(ls "$MNT" | tr '\n' ' ' | sed 's/ $//')" "root listing"
	local want have
	want=$(cd "$T/skills" && ls | tr '\n' ' ')
	have=$(ls "$MNT/skills" | tr '\n' ' ')
	assert_eq "$want" "$have" "skills listed, sorted"
	ls -R "$MNT" >/dev/null || fail "ls -R failed"
	cmp -s "$T/skills/greet/SKILL.md" "$MNT/skills/greet/SKILL.md" || fail "SKILL.md not byte for byte"
	assert_eq "Greets a person by name and tells them what this skill set can do." \
		"$(cat "$MNT/skills/greet/description")" "description file"
	assert_eq "read" "$(cat "$MNT/skills/greet/allowed-tools")" "allowed-tools list form"
	assert_eq "Read|Bash(git diff:*)|Bash(git log:*)" \
		"$(paste -sd'|' "$MNT/skills/git-review/allowed-tools")" "allowed-tools string form"
	[ ! -e "$MNT/skills/style-guide/allowed-tools" ] || fail "allowed-tools present though undeclared"
	[ -f "$MNT/skills/offline-answer/allowed-tools" ] || fail "declared [] must be a file"
	assert_eq 0 "$(stat -c %s "$MNT/skills/offline-answer/allowed-tools")" "declared [] is empty"
	cmp -s "$T/skills/file-notes/references/format.md" \
		"$MNT/skills/file-notes/files/references/format.md" || fail "files/ not byte for byte"
	assert_eq "changelog version-bump" "$(ls "$MNT/skills/release/sub-skills" | tr '\n' ' ' | sed 's/ $//')" \
		"directory sub-skills"
	cmp -s "$T/skills/release/skills/changelog/SKILL.md" \
		"$MNT/skills/release/sub-skills/changelog/SKILL.md" || fail "sub-skill SKILL.md"
	[ ! -e "$MNT/skills/release/files/skills" ] || fail "sub-skills repeated under files/"
	[ ! -e "$MNT/skills/greet/files/SKILL.md" ] || fail "SKILL.md repeated under files/"
	grep -q '"trust": "first_party"' "$MNT/skills/greet/skill.json" || fail "skill.json lacks trust"
	grep -q '"valid": true' "$MNT/skills/greet/skill.json" || fail "skill.json lacks validity"
	assert_eq "$(grep -c . <<<"$(printf 'bash\npython\nterminal\nread\nwrite\nedit\nglob\ngrep\nwebfetch\nrun_skill\nlearn_skill\nask_user\n')")" \
		"$(wc -l <"$MNT/tools")" "tools file lists the built-in tools"
	grep -rl 'git diff' "$MNT/skills" >"$T/grep.out" || fail "grep -r found nothing"
	grep -q 'skills/git-review/SKILL.md' "$T/grep.out" || fail "grep -r missed SKILL.md"
}

test_stat_sizes_equal_bytes_read() {
	fresh_skills
	start_mount -s "$T/skills" || return
	local f n bad=0
	while IFS= read -r -d '' f; do
		n=$(wc -c <"$f")
		if [ "$(stat -c %s "$f")" != "$n" ]; then
			fail "stat size of $f is $(stat -c %s "$f"), read $n bytes"
			bad=1
		fi
		case "$(stat -c %a "$f")" in 444) ;; *) fail "$f mode is $(stat -c %a "$f")" ;; esac
	done < <(find "$MNT" -type f -print0)
	[ "$(find "$MNT" -type f | wc -l)" -gt 30 ] || fail "find saw too few files"
	return $bad
}

test_cp_and_tar_round_trip() {
	fresh_skills
	start_mount -s "$T/skills" || return
	cp -r "$MNT/skills" "$T/copy" || fail "cp -r out of the mount failed"
	tar -cf "$T/all.tar" -C "$MNT" . 2>"$T/tar.err" || fail "tar failed: $(cat "$T/tar.err")"
	[ ! -s "$T/tar.err" ] || fail "tar warned: $(cat "$T/tar.err")"
	mkdir "$T/untar" && tar -xf "$T/all.tar" -C "$T/untar" || fail "untar failed"
	local d
	for d in "$T/skills"/*/; do
		d=$(basename "$d")
		for out in "$T/copy/$d" "$T/untar/skills/$d"; do
			cmp -s "$T/skills/$d/SKILL.md" "$out/SKILL.md" || fail "$out/SKILL.md differs"
			# every other file of the skill is under files/ (sub-skills aside)
			(cd "$T/skills/$d" && find . -type f ! -path './SKILL.md' ! -path './skills/*') |
				while read -r f; do
					cmp -s "$T/skills/$d/$f" "$out/files/$f" || fail "$out/files/$f differs"
				done
		done
	done
	diff -r "$T/copy" "$T/untar/skills" >/dev/null || fail "cp -r and tar disagree"
}

test_writes_refused() {
	fresh_skills
	start_mount -s "$T/skills" || return
	expect_fail "Permission denied" bash -c "echo x > '$MNT/skills/greet/SKILL.md'"
	expect_fail "Permission denied" bash -c "echo x >> '$MNT/skills/greet/description'"
	expect_fail "Permission denied" touch "$MNT/skills/greet/new-file"
	expect_fail "Permission denied" mkdir "$MNT/skills/new-skill"
	expect_fail "Permission denied" rm -f "$MNT/skills/greet/SKILL.md"
	expect_fail "Permission denied" rmdir "$MNT/skills/greet/files"
	expect_fail "Permission denied" mv "$MNT/skills/greet" "$MNT/skills/greet2"
	expect_fail "Permission denied" chmod 0666 "$MNT/skills/greet/SKILL.md"
	expect_fail "Permission denied" ln -s x "$MNT/skills/greet/link"
	expect_fail "Permission denied" cp /etc/hostname "$MNT/tools"
	cmp -s "$EXAMPLES/greet/SKILL.md" "$T/skills/greet/SKILL.md" || fail "backing file changed"
	[ ! -e "$T/skills/greet/new-file" ] || fail "a file was created"
}

test_edits_show_within_one_second() {
	fresh_skills
	start_mount -s "$T/skills" || return
	cat "$MNT/skills/greet/description" "$MNT/skills/greet/SKILL.md" >/dev/null
	sed -i 's/^description: .*/description: Edited description./' "$T/skills/greet/SKILL.md"
	wait_for 1 grep -qx 'Edited description.' "$MNT/skills/greet/description" ||
		fail "edited description not visible within 1 s"
	cmp -s "$T/skills/greet/SKILL.md" "$MNT/skills/greet/SKILL.md" || fail "SKILL.md stale after edit"
	assert_eq "$(wc -c <"$T/skills/greet/SKILL.md")" "$(stat -c %s "$MNT/skills/greet/SKILL.md")" "size after edit"
	# a new skill appears, a deleted one disappears
	mkdir "$T/skills/brand-new"
	printf -- '---\nname: brand-new\ndescription: new\n---\nbody\n' >"$T/skills/brand-new/SKILL.md"
	wait_for 1 test -f "$MNT/skills/brand-new/SKILL.md" || fail "new skill not visible within 1 s"
	ls "$MNT/skills" | grep -qx brand-new || fail "new skill not listed"
	rm -rf "$T/skills/greet"
	wait_for 1 test ! -e "$MNT/skills/greet" || fail "deleted skill still visible after 1 s"
	ls "$MNT/skills" | grep -qx greet && fail "deleted skill still listed"
	# a file under files/ changes
	echo "more" >>"$T/skills/file-notes/references/format.md"
	wait_for 1 cmp -s "$T/skills/file-notes/references/format.md" \
		"$MNT/skills/file-notes/files/references/format.md" || fail "edited reference file stale"
	return 0
}

test_invalid_skill_listed_with_error() {
	fresh_skills
	mkdir "$T/skills/broken"
	printf -- '---\nname: broken\ndescription: [a: b: c\n---\nbody\n' >"$T/skills/broken/SKILL.md"
	start_mount -s "$T/skills" || return
	grep -q '"valid": false' "$MNT/skills/broken/skill.json" || fail "broken skill not marked invalid"
	grep -q '"error": "' "$MNT/skills/broken/skill.json" || fail "broken skill has no error"
	[ -f "$MNT/skills/broken/allowed-tools" ] || fail "D1: invalid skill must declare []"
	assert_eq 0 "$(stat -c %s "$MNT/skills/broken/allowed-tools")" "D1: declared-empty"
	cmp -s "$T/skills/broken/SKILL.md" "$MNT/skills/broken/SKILL.md" || fail "invalid SKILL.md not served"
}

test_symlink_outside_not_followed() {
	fresh_skills
	ln -s /etc "$T/skills/file-notes/etc-link"
	ln -s /etc/hostname "$T/skills/file-notes/host-link"
	ln -s references/format.md "$T/skills/file-notes/inside-link"
	start_mount -s "$T/skills" || return
	[ ! -e "$MNT/skills/file-notes/files/etc-link" ] || fail "symlink to /etc followed"
	[ ! -e "$MNT/skills/file-notes/files/host-link" ] || fail "symlink to /etc/hostname followed"
	ls "$MNT/skills/file-notes/files" | grep -q link$ && ! ls "$MNT/skills/file-notes/files" | grep -qx inside-link &&
		fail "escaping links listed"
	cmp -s "$T/skills/file-notes/references/format.md" "$MNT/skills/file-notes/files/inside-link" ||
		fail "a symlink inside the skill should be served"
}

# Section 2: a skill named after its directory gets the checks of a
# front-matter name. A newline in a directory name must not make a phantom
# line in configs/<cfg>/effective; a name that only breaks the naming rules
# is listed with a warning. Two sub-skills of one name: the first by
# directory name is shown, and the parent warns about the other.
test_directory_names_checked_like_front_matter_names() {
	local src=$T/names nl=$'\n'
	mkdir -p "$src/evil${nl}injected" "$src/good" "$src/Ünï" "$src/x<y>&" \
		"$src/p/skills/child" "$src/p/skills/child2"
	echo 'no fm' >"$src/evil${nl}injected/SKILL.md"
	printf -- '---\nname: good\ndescription: g\n---\nG\n' >"$src/good/SKILL.md"
	echo 'no fm' >"$src/Ünï/SKILL.md"
	echo 'no fm' >"$src/x<y>&/SKILL.md"
	printf -- '---\nname: p\ndescription: p\n---\nP\n' >"$src/p/SKILL.md"
	printf -- '---\nname: child\ndescription: c\n---\nfirst\n' >"$src/p/skills/child/SKILL.md"
	printf -- '---\nname: child\ndescription: c\n---\nsecond\n' >"$src/p/skills/child2/SKILL.md"
	start_mount -s "$src" --state "$T/state.db" || return
	assert_eq "good|p|x<y>&|Ünï" "$(paste -sd'|' "$MNT/configs/default/effective")" \
		"effective skills, one per line, no phantom"
	assert_eq "good|p|x<y>&|Ünï" "$(LC_ALL=C ls "$MNT/skills" | paste -sd'|')" "skills listed"
	grep -q 'breaks the naming rules' "$MNT/skills/Ünï/skill.json" ||
		fail "no naming-rule warning for Ünï"
	grep -q 'breaks the naming rules' "$MNT/skills/x<y>&/skill.json" ||
		fail "no naming-rule warning for x<y>&"
	grep -q "skill 'x<y>&': name 'x<y>&' breaks the naming rules" \
		"$MNT/configs/default/warnings" || fail "configs/default/warnings lacks the naming warning"
	local out
	out=$("$SKILLFS" check -s "$src" 2>&1)
	grep -qF "catalog: warning: skill directory 'evil\\x0Ainjected' in $src is not listed" <<<"$out" ||
		fail "check does not report the unlisted skill: $out"
	assert_eq "child" "$(ls "$MNT/skills/p/sub-skills" | paste -sd'|')" "sub-skills listed"
	assert_eq "first" "$(tail -n1 "$MNT/skills/p/sub-skills/child/SKILL.md")" "the first by directory name is shown"
	python3 - "$MNT/skills/p/skill.json" <<'PY' || fail "skill.json of p disagrees with the listing"
import json, sys
j = json.load(open(sys.argv[1]))
assert j["directory_sub_skills"] == ["child"], j["directory_sub_skills"]
assert any("'skills/child' and 'skills/child2' are both named 'child'" in w and
           "first by directory name" in w for w in j["warnings"]), j["warnings"]
PY
}

test_unmount_leaves_no_stale_mount() {
	fresh_skills
	start_mount -s "$T/skills" || return
	stop_mount
	grep -qs " $MNT fuse" /proc/self/mounts && fail "mount still present"
	ls "$MNT" >/dev/null 2>&1 || fail "mountpoint unusable after unmount"
}

run_tests
