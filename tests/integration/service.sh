#!/usr/bin/env bash
# Integration: skillfs under a service manager, without systemd (issue 16,
# item 4; README "`mount`, `/etc/fstab` and systemd"): the Type=notify protocol on a datagram socket
# named by NOTIFY_SOCKET (READY=1 only once the mount answers; RELOADING=1
# and READY=1 around a SIGHUP reload; STOPPING=1), and SIGHUP reloading the
# config file (DESIGN.md section 9: the config is taken again without a
# remount).
. "$(dirname "$0")/lib.sh"

LISTENER_PID=

listener_stop() {
	[ -n "$LISTENER_PID" ] && kill "$LISTENER_PID" 2>/dev/null && wait "$LISTENER_PID" 2>/dev/null
	LISTENER_PID=
	return 0
}
trap 'listener_stop; cleanup' EXIT

# listen SOCKET: a listener that writes each message's lines to
# $T/notify.log and, at READY=1, whether the mount answered then
# ("answering=yes": $MNT is a mount of its own and lists runs/).
listen() {
	: >"$T/notify.log"
	case $1 in /*) rm -f "$1" ;; esac
	python3 - "$1" "$MNT" "$T/notify.log" <<'PY' &
import os, socket, sys
path, mnt, log = sys.argv[1:4]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + path[1:] if path.startswith("@") else path)
with open(log, "a", buffering=1) as f:
    f.write("bound\n")
    while True:
        lines = s.recv(4096).decode().split("\n")
        for line in lines:
            f.write(line + "\n")
        if "READY=1" in lines:
            try:
                ok = (os.stat(mnt).st_dev != os.stat(os.path.dirname(mnt)).st_dev
                      and "runs" in os.listdir(mnt))
            except OSError:
                ok = False
            f.write("answering=%s\n" % ("yes" if ok else "no"))
PY
	LISTENER_PID=$!
	wait_for 5 grep -q '^bound$' "$T/notify.log" || fail "the listener did not start"
}

# config NAME: $C/NAME.yaml, with one configuration called NAME. $C holds
# nothing else that changes (the logs are elsewhere), so the watcher hears
# of no event there.
C=$T/cfg
config() {
	mkdir -p "$C/skills/one"
	printf -- '---\nname: one\ndescription: one\n---\nBody.\n' >"$C/skills/one/SKILL.md"
	printf 'sources: [{path: skills}]\nmodel: {provider: echo}\nconfigurations:\n  %s: {skills: [one]}\n' \
		"$1" >"$C/$1.yaml"
}

test_ready_only_once_the_mount_answers() {
	config alpha
	listen "$T/notify.sock"
	NOTIFY_SOCKET=$T/notify.sock start_mount -c "$C/alpha.yaml" --state "$T/state.db" || return
	wait_for 10 grep -q '^READY=1$' "$T/notify.log" || fail "no READY=1: $(cat "$T/notify.log")"
	assert_eq "answering=yes" "$(grep '^answering=' "$T/notify.log" | head -1)" \
		"the mount answered when READY=1 came"
	grep -q "^MAINPID=$DAEMON_PID$" "$T/notify.log" || fail "MAINPID: $(cat "$T/notify.log")"
	assert_eq 1 "$(grep -c '^READY=1$' "$T/notify.log")" "READY=1 sent once"
	# SIGTERM: STOPPING=1, and the daemon exits cleanly.
	kill -TERM "$DAEMON_PID"
	local rc=0
	wait "$DAEMON_PID" || rc=$?
	DAEMON_PID=
	assert_eq 0 "$rc" "exit status after SIGTERM"
	grep -q '^STOPPING=1$' "$T/notify.log" || fail "no STOPPING=1: $(cat "$T/notify.log")"
	listener_stop
}

test_abstract_socket_name() {
	config alpha
	local name="@skillfs-test-$$-$RANDOM"
	listen "$name"
	NOTIFY_SOCKET=$name start_mount -c "$C/alpha.yaml" --state "$T/state.db" || return
	wait_for 10 grep -q '^READY=1$' "$T/notify.log" || fail "no READY=1 on $name"
	stop_mount
	grep -q '^STOPPING=1$' "$T/notify.log" || fail "no STOPPING=1 at unmount"
	listener_stop
}

test_sighup_reloads_the_config() {
	config alpha
	config gamma
	cp "$C/alpha.yaml" "$C/config.yaml"
	listen "$T/notify.sock"
	NOTIFY_SOCKET=$T/notify.sock start_mount -c "$C/config.yaml" --state "$T/state/state.db" || return
	wait_for 10 grep -q '^READY=1$' "$T/notify.log" || { fail "no READY=1"; return; }
	[ -d "$MNT/configs/alpha" ] || fail "configs/alpha missing at start"
	# gamma.yaml written over config.yaml through a hard link in another
	# directory (inotify reports a change to the watchers of the directory
	# it was made through), same size, mtime put back: nothing the watcher
	# sees or compares changed, so only the SIGHUP can make the mount take it.
	mkdir -p "$T/elsewhere"
	ln "$C/config.yaml" "$T/elsewhere/link.yaml"
	assert_eq "$(stat -c %s "$C/alpha.yaml")" "$(stat -c %s "$C/gamma.yaml")" "the two configs' sizes"
	# Written in place with its mtime put back at once (microseconds
	# apart: the watcher also compares the file's stat after events in
	# the directories above it, and /tmp has many).
	python3 -c '
import os, sys
link, new = sys.argv[1:3]
st = os.stat(link)
data = open(new, "rb").read()
fd = os.open(link, os.O_WRONLY)
os.write(fd, data)
os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))
os.close(fd)' "$T/elsewhere/link.yaml" "$C/gamma.yaml"
	grep -q gamma "$C/config.yaml" || fail "the edit did not reach config.yaml"
	sleep 1.5
	[ -d "$MNT/configs/alpha" ] && [ ! -e "$MNT/configs/gamma" ] ||
		fail "the watcher took the new config by itself: the test proves nothing"
	kill -HUP "$DAEMON_PID"
	wait_for 10 grep -q 'SIGHUP: reloaded' "$DAEMON_LOG" || fail "no reload log line: $(cat "$DAEMON_LOG")"
	wait_for 5 [ -d "$MNT/configs/gamma" ] || fail "configs/gamma missing after SIGHUP: $(ls "$MNT/configs")"
	[ ! -e "$MNT/configs/alpha" ] || fail "configs/alpha still there after SIGHUP"
	# RELOADING=1, then READY=1 again, in that order.
	wait_for 5 [ "$(grep -c '^READY=1$' "$T/notify.log")" = 2 ] || fail "no second READY=1"
	assert_eq "READY=1 RELOADING=1 READY=1" \
		"$(grep -E '^(READY|RELOADING)=1$' "$T/notify.log" | tr '\n' ' ' | sed 's/ $//')" \
		"notify messages"
	grep -q '^MONOTONIC_USEC=[0-9]' "$T/notify.log" || fail "RELOADING=1 without MONOTONIC_USEC"
	# The daemon still serves and SIGHUP did not stop it.
	kill -0 "$DAEMON_PID" || fail "the daemon exited on SIGHUP"
	cat "$MNT/runs/new" >/dev/null || fail "the mount does not answer after SIGHUP"
	# A broken config at SIGHUP keeps the last good one, and says so.
	printf 'runs: {workers: lots}\n' >"$C/config.yaml"
	kill -HUP "$DAEMON_PID"
	wait_for 10 grep -q 'SIGHUP: the config file was not taken' "$DAEMON_LOG" ||
		fail "no log line for a broken config at SIGHUP: $(cat "$DAEMON_LOG")"
	[ -d "$MNT/configs/gamma" ] || fail "the last good config was dropped"
	grep -q "workers" "$MNT/configs/ERROR" || fail "configs/ERROR does not say why"
}

run_tests
