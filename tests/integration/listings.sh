#!/usr/bin/env bash
# Integration: directory listings through a real mount (DESIGN.md section 8:
# listings are sorted and complete). A listing too big for one READDIR
# reply must be taken once per open directory, not once per request: taken
# per request, `ls` of a directory of n entries costs O(n^2).
. "$(dirname "$0")/lib.sh"

# make_big N: a skill "big" whose files/many holds N files. The names
# (1, 10, 100, 1000, 1001, ...) do not come in numeric order when sorted,
# and some files have content, so sizes are checked too. Made once per
# script: creating thousands of files is slow on some machines.
make_big() {
	[ "$(ls "$T/skills/big/many" 2>/dev/null | wc -l)" = "$1" ] && return
	rm -rf "$T/skills"
	mkdir -p "$T/skills/big/many"
	printf -- '---\nname: big\ndescription: d\n---\nbody\n' >"$T/skills/big/SKILL.md"
	(cd "$T/skills/big/many" && seq 1 "$1" | xargs touch)
	local i
	for i in 1 77 2500 "$1"; do
		printf 'file %s\n' "$i" >"$T/skills/big/many/$i"
	done
}

BIG=skills/big/files/many

test_big_listing_complete_and_sorted() {
	make_big 5000
	start_mount -s "$T/skills" --state "$T/state/state.db" || return
	assert_eq 5000 "$(ls "$MNT/$BIG" | wc -l)" "entries listed"
	assert_eq "$(cd "$T/skills/big/many" && LC_ALL=C ls)" "$(LC_ALL=C ls -f "$MNT/$BIG" | grep -v '^\.\.\?$')" \
		"the mount's own order is the sorted source listing"
	# Attributes from READDIRPLUS: every size as on disk.
	assert_eq "$(cd "$T/skills/big/many" && find . -type f -printf '%f %s\n' | LC_ALL=C sort)" \
		"$(cd "$MNT/$BIG" && find . -type f -printf '%f %s\n' | LC_ALL=C sort)" "names and sizes"
	assert_eq "file 2500" "$(cat "$MNT/$BIG/2500")" "a file read after the listing"
	# A second listing (from the kernel's cache or from us) is the same.
	assert_eq 5000 "$(ls "$MNT/$BIG" | wc -l)" "entries listed again"
}

# The deterministic check of cost: the daemon counts the listings it takes
# (SKILLFS_STATS) and -d logs every request. One `ls` of 5,000 entries needs
# dozens of READDIR(PLUS) requests and must take one listing.
test_big_listing_taken_once_per_open() {
	make_big 5000
	export SKILLFS_STATS=1
	start_mount -d -s "$T/skills" --state "$T/state/state.db" || { unset SKILLFS_STATS; return; }
	unset SKILLFS_STATS
	assert_eq 5000 "$(ls "$MNT/$BIG" | wc -l)" "entries listed"
	fusermount3 -u "$MNT"
	wait "$DAEMON_PID"
	DAEMON_PID=
	local requests taken
	requests=$(grep -cE 'opcode: READDIR(PLUS)? ' "$DAEMON_LOG")
	taken=$(sed -n 's/.*listings_taken=\([0-9]*\).*/\1/p' "$DAEMON_LOG")
	[ "$requests" -ge 5 ] ||
		fail "expected the listing to need many READDIR requests, saw $requests"
	[ -n "$taken" ] || { fail "no listings_taken in the stats: $(grep stats "$DAEMON_LOG")"; return; }
	[ "$taken" -eq 1 ] ||
		fail "one ls took $taken listings for $requests READDIR requests (one per request is quadratic)"
}

# Two readers of one directory while it changes: each goes on in the
# listing it started with, so an entry that did not change comes exactly
# once to each (POSIX), however the other reader's listing differs.
test_two_readers_of_a_changing_directory() {
	make_big 5000
	start_mount -s "$T/skills" --state "$T/state/state.db" || return
	local out
	out=$(python3 - "$MNT/$BIG" "$T/skills/big/many" <<'PY'
import collections, ctypes, os, platform, struct, sys, time
mnt, disk = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": 217, "aarch64": 61}[platform.machine()]
def getdents(fd, size):
    buf = ctypes.create_string_buffer(size)
    n = libc.syscall(nr, fd, buf, size)
    if n < 0:
        raise OSError(ctypes.get_errno(), "getdents64")
    out, off, raw = [], 0, buf.raw[:n]
    while off < n:
        reclen = struct.unpack_from("<H", raw, off + 16)[0]
        out.append(raw[off + 19:off + reclen].split(b"\0", 1)[0].decode())
        off += reclen
    return out
def rest(fd, got, size):
    while True:
        e = getdents(fd, size)
        if not e:
            return [x for x in got + e if x not in (".", "..")]
        got += e
stable = set(os.listdir(disk))
a = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
first = getdents(a, 2048)
for i in range(50):  # names that sort first: they shift every later place
    open(os.path.join(disk, "0new%02d" % i), "w").close()
time.sleep(1)
b = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
rb = rest(b, [], 4096)
ra = rest(a, first, 2048)
dups = [k for k, v in collections.Counter(ra).items() if v > 1]
print(len(dups), len(stable - set(ra)), len(rb))
PY
) || { fail "reader script failed: $out"; return; }
	assert_eq "0 0 5050" "$out" "duplicates and missing entries for the first reader, entries for the second"
}

# A rewinddir on an open directory (a READDIR at offset 0 on the same
# handle) takes a fresh listing: the handle's listing is not kept past it.
# runs/ is listed afresh at every open, so this reaches the daemon.
test_rewinddir_sees_a_new_entry() {
	start_mount -s "$SRC_ROOT/examples/skills" --state "$T/state/state.db" || return
	local out
	out=$(python3 - "$MNT" <<'PY'
import os, sys
mnt = sys.argv[1]
fd = os.open(mnt + "/runs", os.O_RDONLY | os.O_DIRECTORY)
before = sorted(os.listdir(fd))  # leaves the directory rewound
with open(mnt + "/runs/new") as f:
    rid = f.read().strip()
os.mkdir(mnt + "/runs/" + rid)
after = sorted(os.listdir(fd))   # the same open directory, from offset 0
os.close(fd)
print(" ".join(before))
print(" ".join(after))
print(" ".join(sorted(["new", rid])))
PY
) || { fail "python failed: $out"; return; }
	assert_eq new "$(sed -n 1p <<<"$out")" "runs/ before mkdir"
	assert_eq "$(sed -n 3p <<<"$out")" "$(sed -n 2p <<<"$out")" "runs/ re-read after rewinddir"
}

run_tests
