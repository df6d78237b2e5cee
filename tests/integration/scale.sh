#!/usr/bin/env bash
# Integration: a catalogue of 5,000 skills edited through the file system
# while a reader loops over configs/*/allowed-tools (issue: scale). Every
# read of a configuration's allow-list is one the configuration had at some
# point, in order (never a mix of two states, never an older one after a
# newer), and the mount after the edits equals a fresh mount of the same
# tree, file for file.
. "$(dirname "$0")/lib.sh"

N=5000
CONFIGS=20
EDITS=200

# The tree, the config, and the model the checks compare with: gen.py
# writes the skills (each declaring a random subset of five tools) and
# prints nothing; the same script edits them later (edit.py).
cat >"$T/scale.py" <<'PY'
import json, os, random, sys, threading, time

TOOLS = ["edit", "glob", "grep", "read", "write"]
root, mnt, n, nconf, nedits = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
src = os.path.join(root, "skills")
rnd = random.Random(17)

def text(i, tools, version):
    return (f"---\nname: s{i:05d}\ndescription: version {version}\n"
            f"allowed-tools: [{', '.join(tools)}]\n---\nBody of skill {i}.\n")

def save(i, tools, version):
    d = os.path.join(src, f"s{i:05d}")
    tmp = os.path.join(d, ".SKILL.md.tmp")
    with open(tmp, "w") as f:
        f.write(text(i, tools, version))
    os.rename(tmp, os.path.join(d, "SKILL.md"))

def allowed(conf, tools):
    s = sorted({t for i in conf for t in tools[i]})
    return "".join(t + "\n" for t in s)

tools = {i: sorted(rnd.sample(TOOLS, rnd.randrange(0, 3))) for i in range(n)}
confs = [sorted(rnd.sample(range(n), 3)) for _ in range(nconf)]
if mnt == "-":  # generate
    for i in range(n):
        os.makedirs(os.path.join(src, f"s{i:05d}"))
        save(i, tools[i], 0)
    with open(os.path.join(root, "config.yaml"), "w") as f:
        f.write(f"sources: [{{path: {src}, trust: first_party}}]\nconfigurations:\n")
        for c, conf in enumerate(confs):
            f.write(f"  c{c:02d}: {{skills: [{', '.join(f's{i:05d}' for i in conf)}]}}\n")
    sys.exit(0)

def read(path):
    with open(path) as f:
        return f.read()

# history[c]: each allow-list configuration c had, in order
history = [[allowed(conf, tools)] for conf in confs]
for c in range(nconf):
    got = read(f"{mnt}/configs/c{c:02d}/allowed-tools")
    if got != history[c][0]:
        sys.exit(f"c{c:02d} starts as {got!r}, not {history[c][0]!r}")

seen = [[] for _ in range(nconf)]
stop = threading.Event()
def reader():
    while not stop.is_set():
        for c in range(nconf):
            seen[c].append(read(f"{mnt}/configs/c{c:02d}/allowed-tools"))
t = threading.Thread(target=reader)
t.start()
attached = sorted({i for conf in confs for i in conf})
try:
    for k in range(1, nedits + 1):
        # mostly a skill some configuration attaches; at times another
        i = rnd.choice(attached) if rnd.random() < 0.8 else rnd.randrange(n)
        tools[i] = sorted(rnd.sample(TOOLS, rnd.randrange(0, 4)))
        save(i, tools[i], k)
        for c, conf in enumerate(confs):
            now = allowed(conf, tools)
            if now != history[c][-1]:
                history[c].append(now)
        # the next edit once this one shows: each state is then one the
        # tree had (a build never straddles two edits)
        want = f"version {k}"
        t0 = time.monotonic()
        while read(f"{mnt}/skills/s{i:05d}/description").strip() != want:
            if time.monotonic() - t0 > 10:
                sys.exit(f"edit {k} of s{i:05d} not shown within 10 s")
            time.sleep(0.002)
finally:
    stop.set()
    t.join()
reads = 0
for c in range(nconf):
    at = 0
    for got in seen[c]:
        reads += 1
        # the first state at or after the last one seen that matches
        nxt = next((j for j in range(at, len(history[c])) if history[c][j] == got), None)
        if nxt is None:
            older = got in history[c]
            sys.exit(f"c{c:02d} read {got!r}: " + ("an older state after a newer one" if older
                     else "never a state of the configuration"))
        at = nxt
    if seen[c] and history[c][-1] != read(f"{mnt}/configs/c{c:02d}/allowed-tools"):
        sys.exit(f"c{c:02d} does not end in its last state")
changed = sum(len(h) - 1 for h in history)
print(f"# {nedits} edits, {changed} changes of an allow-list, {reads} reads checked")
PY

# Every file under configs/ and skills/ of a mount, with its bytes.
dump() {
	python3 - "$1" <<'PY'
import os, sys
root = sys.argv[1]
out = sys.stdout.buffer
for top in ("configs", "skills"):
    for d, dirs, files in sorted(os.walk(os.path.join(root, top))):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out.write(b"== " + os.path.relpath(p, root).encode() + b"\n" + fh.read())
PY
}

test_edits_under_readers_are_whole_and_end_as_a_fresh_mount() {
	python3 "$T/scale.py" "$T" - "$N" "$CONFIGS" "$EDITS" || { fail "generating"; return; }
	start_mount -c "$T/config.yaml" --state "$T/state/a.db" || return
	wait_for 60 test -e "$MNT/configs/c00/allowed-tools" || { fail "configs not shown"; return; }
	python3 "$T/scale.py" "$T" "$MNT" "$N" "$CONFIGS" "$EDITS" || { fail "the readers' check"; return; }
	# the final mount equals a fresh one (a second mount of the same tree)
	dump "$MNT" >"$T/updated.txt"
	local fresh=$T/fresh
	mkdir -p "$fresh"
	"$SKILLFS" -f -c "$T/config.yaml" --state "$T/state/b.db" "$fresh" >>"$T/fresh.log" 2>&1 &
	local fpid=$!
	wait_for 60 test -e "$fresh/configs/c00/allowed-tools"
	dump "$fresh" >"$T/fresh.txt"
	fusermount3 -u "$fresh"
	wait "$fpid"
	[ "$(wc -l <"$T/fresh.txt")" -gt $((N * 5)) ] || fail "the fresh mount shows too little"
	cmp -s "$T/updated.txt" "$T/fresh.txt" ||
		fail "the mount after the edits differs from a fresh mount: $(diff "$T/updated.txt" "$T/fresh.txt" | head -20)"
}

run_tests
