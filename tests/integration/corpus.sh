#!/usr/bin/env bash
# Integration: real public skill collections (../shared/corpus beside the
# source tree; its README.md says what each is). Each collection is mounted
# as one recursive source (-r), and then: every directory holding a SKILL.md
# is a skill of the mount (a sub-skill of its parent when it lies in the
# parent's skills/), every skill is valid (or invalid only for a reason
# listed in INVALID_OK below) and has no injection finding (issue 19: its
# findings file is empty), and every file reads back byte for byte
# through the mount (diff -r and cmp of the source directory against
# skills/<name>/SKILL.md + files/ + sub-skills/, and against the
# configuration's skills/<name>/ folder where the mount has one).
#
# Without the corpus it skips (exit 77) naming the path it looked for; under
# CI (CI=true) or with SKILLFS_REQUIRE_CORPUS set (.ci/run sets it) it fails
# instead, so CI never skips it.
. "$(dirname "$0")/lib.sh"

CORPUS=$SRC_ROOT/../shared/corpus
if [ ! -d "$CORPUS" ]; then
	where=$(cd "$SRC_ROOT/.." 2>/dev/null && pwd)/shared/corpus
	if [ "${CI:-}" = true ] || [ -n "${SKILLFS_REQUIRE_CORPUS:-}" ]; then
		echo "FAIL: the skills corpus is missing: looked for $where" \
			"(required: CI=${CI:-} SKILLFS_REQUIRE_CORPUS=${SKILLFS_REQUIRE_CORPUS:-})" >&2
		exit 1
	fi
	echo "SKIP: the skills corpus is missing: looked for $where"
	exit 77
fi
CORPUS=$(cd "$CORPUS" && pwd)

# Skills of the corpus that may be invalid, each as "<directory relative to
# the corpus>|<text the error must hold>". Any other invalid skill fails.
INVALID_OK=()

# expected_skills COLLECTION: every directory below COLLECTION that holds a
# SKILL.md (hidden ones included, .git and node_modules skipped, links not
# followed), not searched further; the skills/ of such a directory holds its
# sub-skills, printed as "sub<TAB>PARENT<TAB>DIR". Top-level skills print
# as "top<TAB>DIR<TAB>".
expected_skills() {
	python3 - "$1" <<'PY'
import os, sys
root = sys.argv[1]
def holds(d):
    p = os.path.join(d, "SKILL.md")
    return os.path.isfile(p) or os.path.islink(p)
for dirpath, dirs, files in os.walk(root):
    dirs[:] = sorted(x for x in dirs if x not in (".git", "node_modules"))
    keep = []
    for x in dirs:
        d = os.path.join(dirpath, x)
        if os.path.islink(d):
            continue
        if holds(d):
            print("top", d, "", sep="\t")
            subs = os.path.join(d, "skills")
            if os.path.isdir(subs) and not os.path.islink(subs):
                for s in sorted(os.listdir(subs)):
                    sd = os.path.join(subs, s)
                    if os.path.isdir(sd) and not os.path.islink(sd) and holds(sd):
                        print("sub", d, sd, sep="\t")
        else:
            keep.append(x)
    dirs[:] = keep
PY
}

# json_field FILE KEY: a top-level field of a JSON file (lists one item a
# line, null as "null").
json_field() {
	python3 - "$1" "$2" <<'PY'
import json, sys
v = json.load(open(sys.argv[1])).get(sys.argv[2])
if isinstance(v, list):
    for x in v:
        print(x)
elif v is None:
    print("null")
elif isinstance(v, bool):
    print("true" if v else "false")
else:
    print(v)
PY
}

# invalid_ok DIR ERROR: whether INVALID_OK lets the skill in DIR be invalid
# with ERROR.
invalid_ok() {
	local rel=${1#"$CORPUS"/} e
	for e in "${INVALID_OK[@]}"; do
		[ "$rel" = "${e%%|*}" ] && [[ "$2" == *"${e#*|}"* ]] && return 0
	done
	return 1
}

# check_valid VIEW_DIR: the skill shown in VIEW_DIR (skills/<name> or a
# sub-skills/<sub>) is valid, or invalid for a reason INVALID_OK names.
check_valid() {
	local j=$1/skill.json valid dir err
	valid=$(json_field "$j" valid) || { fail "$j cannot be read"; return 1; }
	[ "$valid" = true ] && return 0
	dir=$(json_field "$j" dir)
	err=$(json_field "$j" error)
	invalid_ok "$dir" "$err" || fail "skill in $dir is invalid: $err"
}

# expect_tree SRC_DIR DEST: DEST made a copy of what the mount shows of the
# skill directory SRC_DIR: every file and directory, a symbolic link as the
# regular file it names when that lies inside the skill; other links (to a
# directory, or leading out) are not shown (README, "The mount").
expect_tree() {
	rm -rf "$2"
	python3 - "$1" "$2" <<'PY'
import os, shutil, sys
src, dest = sys.argv[1], sys.argv[2]
top = os.path.realpath(src)
def copy(s, d):
    os.mkdir(d)
    for x in sorted(os.listdir(s)):
        sp, dp = os.path.join(s, x), os.path.join(d, x)
        if os.path.islink(sp):
            r = os.path.realpath(sp)
            if os.path.isfile(r) and r.startswith(top + "/"):
                shutil.copyfile(r, dp)
        elif os.path.isdir(sp):
            copy(sp, dp)
        elif os.path.isfile(sp):
            shutil.copyfile(sp, dp)
copy(src, dest)
PY
}

# compare_skill SRC_DIR VIEW_DIR SUBS: SKILL.md and every other file of the
# skill in SRC_DIR read back byte for byte from VIEW_DIR (SKILL.md, files/;
# with SUBS (the skill has directory sub-skills) its skills/ is shown as
# sub-skills/ instead, compared one by one).
compare_skill() {
	local src=$1 view=$2 subs=$3 out
	cmp "$src/SKILL.md" "$view/SKILL.md" || fail "$view/SKILL.md differs from $src/SKILL.md"
	expect_tree "$src" "$T/expect" || { fail "cannot copy $src"; return 1; }
	rm -f "$T/expect/SKILL.md"
	[ "$subs" = yes ] && rm -rf "$T/expect/skills"
	if [ -d "$view/files" ]; then
		out=$(diff -r "$T/expect" "$view/files" 2>&1) || fail "files of $src differ in $view/files: $out"
	elif [ -n "$(ls -A "$T/expect")" ]; then
		fail "$view has no files/ but $src holds: $(ls -A "$T/expect" | tr '\n' ' ')"
	fi
}

# check_collection COLLECTION: mounts it and checks every skill in it.
check_collection() {
	local col=$1 n=0 subs=0 line kind parent dir name view
	start_mount -r "$col" --state "$T/state.db" || return 1
	# Which mounted skill holds which directory.
	: >"$T/dirs"
	for view in "$MNT/skills"/*/; do
		view=${view%/}
		[ -f "$view/skill.json" ] || continue
		printf '%s\t%s\n' "$(json_field "$view/skill.json" dir)" "${view##*/}" >>"$T/dirs"
	done
	local gate=
	[ -d "$MNT/configs/default/skills" ] && gate=$MNT/configs/default/skills
	while IFS=$'\t' read -r kind parent dir; do
		[ "$kind" = top ] && dir=$parent
		if [ "$kind" = top ]; then
			name=$(awk -F'\t' -v d="$dir" '$1 == d { print $2 }' "$T/dirs")
			if [ -z "$name" ]; then
				grep -qF "in $dir is shadowed by" "$MNT/configs/default/warnings" ||
					fail "the skill in $dir is not in the mount (and no warning says why)"
				continue
			fi
			n=$((n + 1))
			view=$MNT/skills/$name
			check_valid "$view"
			# Issue 19: the injection table is conservative: no
			# skill of the corpus gets a finding.
			[ -s "$view/findings" ] && fail "$view/findings: $(cat "$view/findings")"
			[ -f "$view/findings" ] || fail "$view/findings is missing"
			local has_subs=no
			[ -n "$(json_field "$view/skill.json" directory_sub_skills)" ] && has_subs=yes
			compare_skill "$dir" "$view" "$has_subs"
			if [ -n "$gate" ]; then
				local out
				expect_tree "$dir" "$T/expect"
				out=$(diff -r "$T/expect" "$gate/$name" 2>&1) ||
					fail "$gate/$name differs from $dir: $out"
			fi
		else
			# A directory sub-skill: under its parent's sub-skills/.
			local pname sub found=
			pname=$(awk -F'\t' -v d="$parent" '$1 == d { print $2 }' "$T/dirs")
			[ -n "$pname" ] || continue # the parent's own absence failed above
			for sub in "$MNT/skills/$pname/sub-skills"/*/; do
				sub=${sub%/}
				[ "$(json_field "$sub/skill.json" dir 2>/dev/null)" = "$dir" ] || continue
				found=$sub
			done
			[ -n "$found" ] || { fail "sub-skill $dir is not under skills/$pname/sub-skills"; continue; }
			subs=$((subs + 1))
			check_valid "$found"
			compare_skill "$dir" "$found" no
		fi
	done < <(expected_skills "$col")
	[ "$n" -gt 0 ] || fail "no skill of $col was checked"
	echo "# $col: $n skills, $subs sub-skills checked"
	CHECKED=$((CHECKED + n + subs))
}

test_corpus_every_skill_loads_and_reads_back() {
	CHECKED=0
	local col
	for col in "$CORPUS"/*/; do
		col=${col%/}
		check_collection "$col"
		stop_mount
	done
	[ "$CHECKED" -ge 14 ] || fail "only $CHECKED skills checked in $CORPUS"
}

# test_collection_as_plain_source: superpowers mounted as a plain source
# (-s, one level), as a user points skillfs at it: every skill directory is a
# valid skill and every file reads back byte for byte.
test_collection_as_plain_source() {
	local src=$CORPUS/superpowers
	[ -d "$src" ] || { fail "corpus collection superpowers missing"; return; }
	start_mount -s "$src" || return
	local d n=0
	for d in "$src"/*/; do
		d=$(basename "$d")
		[ -f "$src/$d/SKILL.md" ] || continue
		n=$((n + 1))
		[ -d "$MNT/skills/$d" ] || { fail "corpus skill $d missing"; continue; }
		grep -q '"valid": true' "$MNT/skills/$d/skill.json" || fail "corpus skill $d invalid"
		cmp -s "$src/$d/SKILL.md" "$MNT/skills/$d/SKILL.md" || fail "$d/SKILL.md differs"
		# Not a pipe: fail must count in this shell, not in a subshell.
		while read -r f; do
			cmp -s "$src/$d/$f" "$MNT/skills/$d/files/$f" || fail "$d/files/$f differs"
		done < <(cd "$src/$d" && find . -type f ! -path './SKILL.md')
	done
	assert_eq "$n" "$(ls "$MNT/skills" | wc -l)" "every corpus skill listed"
	[ "$n" -ge 10 ] || fail "corpus too small: $n"
}

run_tests
