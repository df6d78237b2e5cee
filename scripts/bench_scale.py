#!/usr/bin/env python3
"""Scale benchmark (not a test), run by `scripts/bench --scale`.

  bench_scale.py SKILLFS N [N ...]

For each catalogue size N, side by side: N generated skills (a SKILL.md of
40 lines and one reference file each) and 40 configurations of 25 skills,
mounted with a state database of their own. It reports the time until the
configurations answer, the daemon's RSS, and for one SKILL.md saved (write
then rename), one skill directory added and one removed: the time until the
mount shows it and the daemon's CPU time for it; then a burst of 500 edits
at once. The CPU time is every daemon thread's run time (schedstat) from
just before the change until the daemon has settled after it.
"""
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

NCONFIGS, PER_CONFIG, TRIALS, BURST = 40, 25, 7, 500


def generate(root, n):
    src = os.path.join(root, "src")
    for i in range(n):
        d = os.path.join(src, f"skill-{i:05d}")
        os.makedirs(os.path.join(d, "references"))
        write_skill(d, i, f"Benchmark skill number {i}, which does a small thing.")
        with open(os.path.join(d, "references", "ref.md"), "w") as f:
            f.write(f"Reference for skill {i}.\n" * 10)
    with open(os.path.join(root, "config.yaml"), "w") as f:
        f.write(f"sources: [{{path: {src}, trust: first_party}}]\nconfigurations:\n")
        for c in range(NCONFIGS):
            f.write(f"  cfg-{c:02d}:\n    skills:\n")
            for k in range(PER_CONFIG):
                f.write(f"      - skill-{(c * PER_CONFIG + k) * max(1, n // 1000) % n:05d}\n")
    return src


def skill_text(i, description):
    tools = "[read, write]" if i % 3 == 0 else "[]"
    body = "".join(f"Step {k}: do the next small thing.\n" for k in range(34))
    return (f"---\nname: skill-{i:05d}\ndescription: {description}\n"
            f"allowed-tools: {tools}\n---\n# Skill {i}\n\n{body}")


def write_skill(d, i, description):
    with open(os.path.join(d, "SKILL.md"), "w") as f:
        f.write(skill_text(i, description))


def save_skill(d, i, description):
    """An editor's save: a new file renamed over the old one."""
    tmp = os.path.join(d, ".SKILL.md.tmp")
    with open(tmp, "w") as f:
        f.write(skill_text(i, description))
    os.rename(tmp, os.path.join(d, "SKILL.md"))


def cpu_ns(pid):
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def settled_cpu_ns(pid, since):
    """CPU used since `since`, once the daemon has used none for 200 ms."""
    last = cpu_ns(pid)
    quiet = time.monotonic()
    while time.monotonic() - quiet < 0.2:
        time.sleep(0.02)
        now = cpu_ns(pid)
        if now - last > 200_000:  # more than 0.2 ms: still working
            quiet = time.monotonic()
        last = now
    return last - since


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def until(pred, limit=30.0):
    t0 = time.monotonic()
    while not pred():
        if time.monotonic() - t0 > limit:
            raise SystemExit("bench: the mount did not show a change within 30 s")
        time.sleep(0.0005)
    return (time.monotonic() - t0) * 1000


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def measure(skillfs, n):
    work = tempfile.mkdtemp(prefix="skillfs-scale.")
    mnt = os.path.join(work, "mnt")
    os.mkdir(mnt)
    daemon = None
    try:
        src = generate(work, n)
        subprocess.run(["sync"], check=True)
        t0 = time.monotonic()
        daemon = subprocess.Popen(
            [skillfs, "-f", "-c", os.path.join(work, "config.yaml"),
             "--state", os.path.join(work, "state", "state.db"), mnt],
            stderr=open(os.path.join(work, "daemon.log"), "w"))
        until(lambda: read(f"{mnt}/configs/cfg-00/allowed-tools") is not None, 120)
        ready = (time.monotonic() - t0) * 1000
        for c in range(NCONFIGS):
            read(f"{mnt}/configs/cfg-{c:02d}/allowed-tools")
        time.sleep(1.0)  # the watches are set up after the mount answers
        settled_cpu_ns(daemon.pid, 0)
        r = {"ready": ready, "rss": rss_kb(daemon.pid)}
        rnd = random.Random(n)
        lat, cpu = [], []
        for t in range(TRIALS):
            i = rnd.randrange(n)
            d = os.path.join(src, f"skill-{i:05d}")
            word = f"edited-{t}-{time.monotonic_ns()}"
            c0 = cpu_ns(daemon.pid)
            save_skill(d, i, word)
            lat.append(until(lambda: word in (read(f"{mnt}/skills/skill-{i:05d}/description") or "")))
            cpu.append(settled_cpu_ns(daemon.pid, c0) / 1e6)
        r["edit"], r["edit_cpu"] = statistics.median(lat), statistics.median(cpu)
        add, add_cpu, rm, rm_cpu = [], [], [], []
        for t in range(TRIALS):
            name = f"added-{t}"
            d = os.path.join(src, name)
            c0 = cpu_ns(daemon.pid)
            os.mkdir(d)
            with open(os.path.join(d, "SKILL.md"), "w") as f:
                f.write(f"---\nname: {name}\ndescription: An added skill.\n---\nBody.\n")
            add.append(until(lambda: os.path.exists(f"{mnt}/skills/{name}")))
            add_cpu.append(settled_cpu_ns(daemon.pid, c0) / 1e6)
            c0 = cpu_ns(daemon.pid)
            shutil.rmtree(d)
            rm.append(until(lambda: not os.path.exists(f"{mnt}/skills/{name}")))
            rm_cpu.append(settled_cpu_ns(daemon.pid, c0) / 1e6)
        r["add"], r["add_cpu"] = statistics.median(add), statistics.median(add_cpu)
        r["rm"], r["rm_cpu"] = statistics.median(rm), statistics.median(rm_cpu)
        picks = rnd.sample(range(n), min(BURST, n))
        c0 = cpu_ns(daemon.pid)
        t0 = time.monotonic()
        for i in picks:
            save_skill(os.path.join(src, f"skill-{i:05d}"), i, f"burst-{i}")
        for i in picks:
            until(lambda: f"burst-{i}" in (read(f"{mnt}/skills/skill-{i:05d}/description") or ""))
        r["burst"] = (time.monotonic() - t0) * 1000
        r["burst_cpu"] = settled_cpu_ns(daemon.pid, c0) / 1e6
        return r
    finally:
        if daemon:
            subprocess.run(["fusermount3", "-u", mnt], stderr=subprocess.DEVNULL)
            try:
                daemon.wait(10)
            except subprocess.TimeoutExpired:
                daemon.kill()
        shutil.rmtree(work, ignore_errors=True)


def main():
    skillfs, sizes = sys.argv[1], [int(a) for a in sys.argv[2:]]
    res = {}
    for n in sizes:
        print(f"measuring {n} skills...", file=sys.stderr)
        res[n] = measure(skillfs, n)
    rows = [("mount ready (config files answer)", "ready", "ms"),
            ("daemon RSS after mount", "rss", "MB"),
            ("one SKILL.md saved -> description shows", "edit", "ms"),
            ("  daemon CPU for that edit", "edit_cpu", "ms"),
            ("a new skill directory shows", "add", "ms"),
            ("  daemon CPU for it", "add_cpu", "ms"),
            ("a removed skill directory goes", "rm", "ms"),
            ("  daemon CPU for it", "rm_cpu", "ms"),
            (f"a burst of {BURST} saves -> all show", "burst", "ms"),
            ("  daemon CPU for the burst", "burst_cpu", "ms")]
    print(f"\nskillfs scale benchmark ({os.cpu_count()} cores), medians of {TRIALS}")
    print(f"{'':42}" + "".join(f"{n:>12} skills" for n in sizes) + "   ratio")
    for label, key, unit in rows:
        vals = [res[n][key] / (1024 if key == "rss" else 1) for n in sizes]
        ratio = vals[-1] / vals[0] if vals[0] else float("inf")
        print(f"{label:42}" + "".join(f"{v:>11.1f} {unit:>2}    " for v in vals)
              + f"  {ratio:.2f}x")
    if len(sizes) > 1:
        a, b = sizes[0], sizes[-1]
        per = (res[b]["rss"] - res[a]["rss"]) * 1024 / (b - a)
        print(f"memory per skill beyond the {a}-skill baseline: {per:.0f} bytes (target <= 2048)")
    print("targets at the largest size: edit/add/remove < 100 ms, edit <= 1.5x the smallest, "
          "edit CPU <= 20 ms, burst CPU <= 1000 ms, mount ready <= 1500 ms")


if __name__ == "__main__":
    main()
