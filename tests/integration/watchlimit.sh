#!/usr/bin/env bash
# Integration: the inotify watch limit (fs.inotify.max_user_watches) run
# out. The daemon says so (its log, every configs/<cfg>/warnings, `skillfs
# check`), and the directories it could not watch are rescanned every
# watch.rescan_seconds, so an edit in one still shows; once the limit is
# raised, every directory is watched again and the warning goes.
#
# The limit is lowered in a user namespace of the test's own
# (user.max_inotify_watches, which applies beside the system's), so
# nothing else on the machine is affected. Without user namespaces the
# script is skipped (exit 77); under CI it fails instead.
. "$(dirname "$0")/lib.sh"

if ! unshare -U -r -m --propagation private \
	sh -c 'echo 6 >/proc/sys/user/max_inotify_watches' 2>/dev/null; then
	if [ -n "${CI:-}" ]; then
		echo "no user namespace to lower the inotify watch limit in (unshare -U -r), under CI" >&2
		exit 1
	fi
	echo "SKIP: no user namespace to lower the inotify watch limit in (unshare -U -r)"
	exit 77
fi

make_skill() { # dir name description
	mkdir -p "$1/$2"
	printf -- '---\nname: %s\ndescription: %s\n---\n# %s\n' "$2" "$3" "$2" >"$1/$2/SKILL.md"
}

setup() {
	rm -rf "$T/skills"
	make_skill "$T/skills" reader "first reader"
	make_skill "$T/skills" writer "first writer"
	make_skill "$T/skills" plain "first plain"
	mkdir -p "$T/skills/reader/a/b/c/d"
	cat >"$T/config.yaml" <<CFG
sources: [{path: skills, trust: first_party}]
watch: {rescan_seconds: 1}
configurations:
  main: {skills: [reader, writer, plain]}
CFG
}

# The directories from $T up to the root ($T and / included): watched
# for the config file and as the source's parents, before the source.
dirs_above() {
	local d=$T n=1
	while [ "$d" != / ]; do
		d=$(dirname "$d")
		n=$((n + 1))
	done
	echo "$n"
}

# in_namespace LIMIT SCRIPT: runs the bash SCRIPT in a user namespace
# whose inotify watch limit is LIMIT, with SKILLFS, T and MNT set, and a
# daemon started by `start` stopped when it ends.
in_namespace() {
	mkdir -p "$MNT"
	SKILLFS=$SKILLFS T=$T MNT=$MNT LIMIT=$1 timeout 120 \
		unshare -U -r -m --propagation private bash -c '
		set -u
		echo "$LIMIT" >/proc/sys/user/max_inotify_watches || exit 1
		pid=
		start() {
			"$SKILLFS" -f -c "$T/config.yaml" --state "$T/state.db" "$MNT" >>"$T/daemon.log" 2>&1 &
			pid=$!
			for _ in $(seq 1 200); do
				grep -qs " $MNT fuse" /proc/self/mounts && return 0
				sleep 0.05
			done
			echo "mount did not come up" >&2
			return 1
		}
		trap "fusermount3 -u \"\$MNT\" 2>/dev/null; [ -z \"\$pid\" ] || wait \$pid" EXIT
		# within SECONDS CMD...: CMD holds within SECONDS; prints the
		# milliseconds it took.
		within() {
			local limit=$1 t0 now
			shift
			t0=$(date +%s%N)
			while :; do
				now=$(date +%s%N)
				if "$@"; then
					echo $(((now - t0) / 1000000))
					return 0
				fi
				[ $((now - t0)) -lt $((limit * 1000000000)) ] || return 1
				sleep 0.02
			done
		}
		# watched DIR: the daemon holds an inotify watch on DIR.
		watched() {
			local ino
			ino=$(printf "%x" "$(stat -c %i "$1")")
			cat /proc/$pid/fdinfo/* 2>/dev/null | grep -q "^inotify wd:.* ino:$ino "
		}
		shows() { [ "$(cat "$MNT/skills/$1/description" 2>/dev/null)" = "$2" ]; }
		warned() { grep -qs "inotify watch limit" "$MNT/configs/main/warnings"; }
		'"$2"
}

# Under a watch limit that leaves the skills' directories unwatched: the
# warning is in configs/main/warnings, in the daemon's log (once) and in
# `skillfs check`; an edit to a SKILL.md in a directory not watched
# shows in the mount within the rescan interval (1 s here, plus the
# reload); after the limit is raised, every directory is watched, the
# warning goes and an edit shows at once.
test_unwatched_directories_are_rescanned() {
	setup
	local limit out
	limit=$(($(dirs_above) + 1)) # those, and the source
	out=$(in_namespace "$limit" '
		"$SKILLFS" check -c "$T/config.yaml" 2>&1 | grep "inotify" | sed "s/^/check: /"
		start || exit 1
		within 5 warned >/dev/null || echo "no warning in configs/main/warnings"
		grep "inotify" "$MNT/configs/main/warnings" | sed "s/^/warnings: /"
		echo "effective: $(cat "$MNT/configs/main/effective" | tr "\n" " ")"
		for s in reader writer plain; do
			watched "$T/skills/$s" || { unwatched=$s; break; }
		done
		[ -n "${unwatched:-}" ] || { echo "every skill directory is watched"; exit 0; }
		echo "unwatched: $unwatched"
		printf -- "---\nname: %s\ndescription: edited while not watched\n---\nbody\n" \
			"$unwatched" >"$T/skills/$unwatched/SKILL.md"
		if ms=$(within 3 shows "$unwatched" "edited while not watched"); then
			echo "edit shown after: $ms ms"
		else
			echo "edit not shown: $(cat "$MNT/skills/$unwatched/description")"
		fi
		echo 100000 >/proc/sys/user/max_inotify_watches
		within 5 eval "! warned" >/dev/null && echo "warning gone"
		watched "$T/skills/$unwatched" && echo "watched now"
		printf -- "---\nname: %s\ndescription: edited when watched\n---\nbody\n" \
			"$unwatched" >"$T/skills/$unwatched/SKILL.md"
		ms=$(within 3 shows "$unwatched" "edited when watched") &&
			echo "second edit shown after: $ms ms"
	')
	echo "$out" | sed 's/^/  | /'
	case "$out" in
	*"warnings: the inotify watch limit is reached: changes in $T/"*"fs.inotify.max_user_watches"*) ;;
	*) fail "configs/main/warnings does not name the directory and the sysctl" ;;
	esac
	grep -q "^warnings: .*rescan every 1 s (watch.rescan_seconds)" <<<"$out" ||
		fail "the warning does not say the directories are rescanned, and how often"
	grep -q "^check: catalog: warning: the inotify watch limit is too low .*fs.inotify.max_user_watches" <<<"$out" ||
		fail "skillfs check does not say the watch limit is too low"
	grep -q "^effective: reader writer plain $" <<<"$out" || fail "the mount did not answer as usual"
	grep -q "^unwatched: " <<<"$out" || fail "every skill directory was watched: the limit did not hold"
	local ms
	ms=$(sed -n 's/^edit shown after: \([0-9]*\) ms$/\1/p' <<<"$out")
	if [ -z "$ms" ]; then
		fail "an edit in a directory not watched never showed"
	elif [ "$ms" -gt 2500 ]; then
		fail "an edit in a directory not watched took $ms ms (rescan every 1 s)"
	fi
	grep -q "^warning gone$" <<<"$out" || fail "the warning stayed after the limit was raised"
	grep -q "^watched now$" <<<"$out" || fail "the directory was not watched after the limit was raised"
	grep -q "^second edit shown after: " <<<"$out" || fail "an edit after the limit was raised never showed"
	assert_eq 1 "$(grep -c 'skillfs: warning: the inotify watch limit is reached' "$DAEMON_LOG")" \
		"the daemon's log says the watch limit is reached, once"
	grep -q "every directory is watched again" "$DAEMON_LOG" ||
		fail "the daemon's log does not say every directory is watched again"
}

# watch.rescan_seconds: 0 turns the rescans off: the warning says the
# directories not watched are not followed.
test_rescan_off_is_said() {
	setup
	sed -i 's/rescan_seconds: 1/rescan_seconds: 0/' "$T/config.yaml"
	local out
	out=$(in_namespace "$(($(dirs_above) + 1))" '
		start || exit 1
		within 5 warned >/dev/null || echo "no warning"
		grep "inotify" "$MNT/configs/main/warnings"
	')
	grep -q "are not followed (watch.rescan_seconds is 0)" <<<"$out" ||
		fail "the warning does not say the rescans are off: [$out]"
}

run_tests
