#!/usr/bin/env bash
# Integration: modes from the source and the gate view (issue 15, items 1
# and 2): an executable script stays executable in the mount and runs from
# there; configs/<cfg>/skills/ holds exactly the effective skills, each its
# source directory byte for byte; the attachment report is attachments.
. "$(dirname "$0")/lib.sh"

make_skill() { # dir name
	mkdir -p "$1/$2"
	printf -- '---\nname: %s\ndescription: skill %s\n---\n# %s\n' "$2" "$2" "$2" >"$1/$2/SKILL.md"
}

setup() {
	rm -rf "$T/skills" "$T/low" "$T/copy" "$T/gate-copy"
	make_skill "$T/skills" tooly
	mkdir -p "$T/skills/tooly/scripts" "$T/skills/tooly/references" "$T/skills/tooly/skills"
	printf '#!/bin/sh\necho "ran $(basename "$0") $1"\n' >"$T/skills/tooly/scripts/run.sh"
	chmod 0755 "$T/skills/tooly/scripts/run.sh"
	printf '#!/bin/sh\necho owner only\n' >"$T/skills/tooly/scripts/mine.sh"
	chmod 0700 "$T/skills/tooly/scripts/mine.sh"
	printf 'data, not a program\n' >"$T/skills/tooly/scripts/data.txt"
	chmod 0644 "$T/skills/tooly/scripts/data.txt"
	printf '# Guide\nsee scripts/run.sh\n' >"$T/skills/tooly/references/guide.md"
	head -c 70000 /dev/urandom >"$T/skills/tooly/references/blob.bin"
	printf 'hidden\n' >"$T/skills/tooly/.hidden"
	make_skill "$T/skills/tooly/skills" sub
	printf '#!/bin/sh\necho sub ran\n' >"$T/skills/tooly/skills/sub/go.sh"
	chmod 0755 "$T/skills/tooly/skills/sub/go.sh"
	make_skill "$T/skills" plain
	make_skill "$T/skills" off
	make_skill "$T/skills" loose
	make_skill "$T/low" lowly
	write_config "[tooly, plain, {name: off, enabled: false}, lowly]"
}

write_config() { # main's skills
	cat >"$T/config.yaml.new" <<CFG
sources: [{path: skills, trust: first_party}, {path: low, trust: community}]
skills: {minTrustLevel: verified}
configurations:
  main: {skills: $1}
  other: {skills: [loose]}
CFG
	mv "$T/config.yaml.new" "$T/config.yaml"
}

start() { start_mount -c "$T/config.yaml" --state "$T/state.db"; }

perm() { stat -c %a "$1"; }

# Item 1: the owner-exec bit of the source, in files/ and in the gate view;
# directories 0555; the script runs from the mount; cp -a keeps the bit.
test_exec_bit_kept_and_runs() {
	setup
	start || return
	local f g
	f=$MNT/skills/tooly/files/scripts
	g=$MNT/configs/main/skills/tooly/scripts
	for d in "$f" "$g"; do
		assert_eq 555 "$(perm "$d/run.sh")" "mode of $d/run.sh"
		assert_eq 555 "$(perm "$d/mine.sh")" "mode of $d/mine.sh (0700 in the source)"
		assert_eq 444 "$(perm "$d/data.txt")" "mode of $d/data.txt"
		assert_eq 555 "$(perm "$d")" "mode of $d"
		[ -x "$d/run.sh" ] || fail "$d/run.sh is not executable"
		assert_eq "ran run.sh x" "$("$d/run.sh" x 2>&1)" "running $d/run.sh"
		assert_eq "ran run.sh y" "$(sh -c "cd '$d' && ./run.sh y" 2>&1)" "sh -c ./run.sh in $d"
	done
	assert_eq 444 "$(perm "$MNT/skills/tooly/SKILL.md")" "mode of SKILL.md"
	assert_eq 555 "$(perm "$MNT/configs/main/skills/tooly/skills/sub/go.sh")" "mode of a sub-skill's script"
	assert_eq "sub ran" "$("$MNT/configs/main/skills/tooly/skills/sub/go.sh" 2>&1)" "a sub-skill's script runs"
	assert_eq 555 "$(perm "$MNT/skills/tooly/sub-skills/sub/files/go.sh")" "mode under sub-skills/"
	cp -a "$MNT/skills/tooly/files" "$T/copy" || fail "cp -a of files/ failed"
	cp -a "$MNT/configs/main/skills/tooly" "$T/gate-copy" || fail "cp -a of the gate view failed"
	for c in "$T/copy/scripts" "$T/gate-copy/scripts"; do
		[ -x "$c/run.sh" ] || fail "cp -a lost the exec bit: $(perm "$c/run.sh")"
		[ -x "$c/data.txt" ] && fail "cp -a made data.txt executable"
		assert_eq "ran run.sh z" "$("$c/run.sh" z 2>&1)" "running the copy $c/run.sh"
	done
	# A chmod in the source shows (it changes the file's ctime).
	chmod 0644 "$T/skills/tooly/scripts/run.sh"
	wait_for 10 sh -c "[ \"\$(stat -c %a '$f/run.sh')\" = 444 ]" ||
		fail "chmod -x did not show in files/: $(perm "$f/run.sh")"
	wait_for 10 sh -c "[ \"\$(stat -c %a '$g/run.sh')\" = 444 ]" ||
		fail "chmod -x did not show in the gate view: $(perm "$g/run.sh")"
	chmod 0744 "$T/skills/tooly/SKILL.md"
	wait_for 10 sh -c "[ \"\$(stat -c %a '$MNT/skills/tooly/SKILL.md')\" = 555 ]" ||
		fail "chmod +x of SKILL.md did not show: $(perm "$MNT/skills/tooly/SKILL.md")"
}

# The mode of every file of a tree as "path x|-" lines, sorted.
exec_bits() {
	(cd "$1" && find . -type f -printf '%P %m\n' | sort |
		while read -r p m; do [ -x "$p" ] && echo "$p x" || echo "$p -"; done)
}

# Item 2: exactly the effective skills, each its source directory whole.
test_gate_view_is_the_effective_skills() {
	setup
	start || return
	local g=$MNT/configs/main/skills
	[ -d "$g" ] || { fail "$g is not a directory"; return; }
	assert_eq "plain tooly" "$(ls "$g" | paste -sd' ')" "configs/main/skills lists the effective skills"
	assert_eq "loose" "$(ls "$MNT/configs/other/skills" | paste -sd' ')" "configs/other/skills"
	assert_eq "$(cat "$MNT/configs/main/effective" | sort | paste -sd' ')" "$(ls "$g" | paste -sd' ')" \
		"the gate view agrees with effective"
	for s in off lowly loose missing; do
		[ -e "$g/$s" ] && fail "$s is in the gate view"
	done
	for s in tooly plain; do
		diff -r "$T/skills/$s" "$g/$s" >"$T/diff.out" 2>&1 ||
			fail "the gate view of $s differs from its source: $(head -5 "$T/diff.out")"
		assert_eq "$(exec_bits "$T/skills/$s")" "$(exec_bits "$g/$s")" "exec bits of $s"
	done
	assert_eq "$(ls -A "$T/skills/tooly" | paste -sd' ')" "$(ls -A "$g/tooly" | paste -sd' ')" \
		"top of tooly's gate directory"
	# Nothing generated is there.
	for x in skill.json description mode files sub-skills allowed-tools; do
		[ -e "$g/tooly/$x" ] && fail "generated $x is in the gate view"
	done
	# cp -a of the whole gate view is a skills folder of the effective skills.
	cp -a "$g" "$T/gate-copy" || fail "cp -a of the gate view failed"
	diff -r "$T/skills/tooly" "$T/gate-copy/tooly" >/dev/null || fail "the copy of tooly differs"
	assert_eq "plain tooly" "$(ls "$T/gate-copy" | paste -sd' ')" "the copy holds the effective skills"
}

# An edit of the config shows in the gate view (the kernel's cache of it
# is invalidated); so does a file added to a skill's source.
test_gate_view_follows_edits() {
	setup
	start || return
	local g=$MNT/configs/main/skills
	assert_eq "plain tooly" "$(ls "$g" | paste -sd' ')" "before"
	cat "$g/plain/SKILL.md" >/dev/null
	write_config "[tooly, {name: plain, enabled: false}, off]"
	wait_for 10 sh -c "[ \"\$(ls '$g' | paste -sd' ')\" = 'off tooly' ]" ||
		fail "disabling plain did not show: $(ls "$g" | paste -sd' ')"
	[ -e "$g/plain/SKILL.md" ] && fail "plain/SKILL.md is still reachable"
	diff -r "$T/skills/off" "$g/off" >/dev/null || fail "off differs from its source"
	printf 'new\n' >"$T/skills/tooly/references/new.md"
	wait_for 10 test -e "$g/tooly/references/new.md" || fail "a new file did not show"
	diff -r "$T/skills/tooly" "$g/tooly" >/dev/null || fail "tooly differs after the edit"
	# A skill that turns invalid (D1) is no longer effective: it leaves.
	cat "$g/off/SKILL.md" >/dev/null
	printf -- '---\nname: off\ndescription: [unclosed\n---\n' >"$T/skills/off/SKILL.md"
	wait_for 10 sh -c "[ \"\$(ls '$g' | paste -sd' ')\" = tooly ]" ||
		fail "an invalid skill stayed in the gate view: $(ls "$g" | paste -sd' ')"
	[ -e "$g/off/SKILL.md" ] && fail "off/SKILL.md is still reachable"
	grep -q '^off invalid ' "$MNT/configs/main/attachments" ||
		fail "attachments: $(cat "$MNT/configs/main/attachments")"
}

# The attachment report that was configs/<cfg>/skills.
test_attachments_report() {
	setup
	start || return
	local a=$MNT/configs/main/attachments
	[ -f "$a" ] || { fail "no $a"; return; }
	grep -q '^tooly effective ' "$a" || fail "attachments: $(cat "$a")"
	grep -q '^off disabled ' "$a" || fail "attachments: $(cat "$a")"
	grep -q '^lowly below-trust ' "$a" || fail "attachments: $(cat "$a")"
	assert_eq "$(wc -c <"$a")" "$(stat -c %s "$a")" "attachments size"
	assert_eq "allowed-tools attachments available-skills claude effective grants.json skill-block skills system-prompt warnings" \
		"$(ls "$MNT/configs/main" | paste -sd' ')" "configs/main lists"
}

run_tests
