#!/usr/bin/env python3
"""Write and space amplification of two append designs for the native SSD
row store (docs/ssd-format.md, "Native format, version 2"), under uniform random overwrites
of 512-byte rows: a simulation, not the store.

  log   every row lives in an append-only log of segments; a greedy cleaner
        copies the live records of the emptiest sealed segment to the head
        when free space runs out. Space amplification is fixed by the
        segments the store may hold.
  merge dirty rows are appended to a log; a cursor merges the log into
        key-ordered 4 KiB leaves (7 rows, packed to 90 %), a range of leaves at
        a time, whenever the log exceeds its budget. Log space is reclaimed
        as soon as its rows are merged (the best case for this design).

  python3 scripts/ssd_log_model.py [--keys 100000] [--updates-per-key 6]
      [--segment-records 500] [--leaf-fill 0.9] [--designs both|log|merge]
"""
import argparse
import random

ROW = 512
RECORD = ROW + 24          # record header: checksum, key, sequence + flags
PAGE = 4096
LEAF_ROWS = 7
LEAF_FILL = 0.9


def log_design(keys, updates, space_amp, segment_records, rng):
    """Greedy cleaning; returns (write_amp, space_amp) over the second half."""
    segments = int(space_amp * keys * ROW / (RECORD * segment_records))
    where = [0] * keys                      # segment of each key's live record
    live = [0] * segments
    members = [[] for _ in range(segments)]  # keys appended (may be stale)
    free = list(range(segments))
    head = free.pop()
    fill = 0
    written = 0

    def append(k):
        nonlocal head, fill, written
        if fill == segment_records:
            head = free.pop()
            fill = 0
        where[k] = head
        live[head] += 1
        members[head].append(k)
        fill += 1
        written += 1

    for k in range(keys):                   # load, sequential
        append(k)
    user = 0
    start_written = start_user = None
    for i in range(updates):
        if i == updates // 2:
            start_written, start_user = written, user
        while len(free) < 2:                 # clean the emptiest sealed segment
            idle = set(free)
            victim = min((s for s in range(segments) if s != head and s not in idle),
                         key=lambda s: live[s])
            for k in members[victim]:
                if where[k] == victim:
                    live[victim] -= 1
                    append(k)
            members[victim] = []
            live[victim] = 0
            free.insert(0, victim)
        k = rng.randrange(keys)
        live[where[k]] -= 1
        append(k)
        user += 1
    wa = (written - start_written) * RECORD / ((user - start_user) * ROW)
    return wa, segments * segment_records * RECORD / (keys * ROW)


def merge_design(keys, updates, log_budget, rng, leaf_fill, leaves_per_merge=64):
    """Returns (write_amp, peak space_amp) over the second half."""
    per_leaf = max(1, round(LEAF_ROWS * leaf_fill))
    leaf_count = (keys + per_leaf - 1) // per_leaf
    leaf_of = lambda k: k // per_leaf        # keys spread uniformly over leaves
    pending = [set() for _ in range(leaf_count)]
    log_records = 0                          # appended, not yet merged (dups included)
    log_of_leaf = [0] * leaf_count
    cursor = 0
    written = 0
    user = 0
    peak = 0.0
    budget_records = int(log_budget * keys * ROW / RECORD)
    start = None
    for i in range(updates):
        if i == updates // 2:
            start = (written, user)
        k = rng.randrange(keys)
        leaf = leaf_of(k)
        pending[leaf].add(k)
        log_of_leaf[leaf] += 1
        log_records += 1
        written += RECORD
        user += ROW
        while log_records > budget_records:  # merge the next range of leaves
            for _ in range(leaves_per_merge):
                if pending[cursor]:
                    written += PAGE
                    log_records -= log_of_leaf[cursor]
                    log_of_leaf[cursor] = 0
                    pending[cursor] = set()
                cursor = (cursor + 1) % leaf_count
        if start is not None:
            space = (leaf_count * PAGE + log_records * RECORD) / (keys * ROW)
            peak = max(peak, space)
    return (written - start[0]) / (user - start[1]), peak


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--keys", type=int, default=100000)
    p.add_argument("--updates-per-key", type=int, default=6)
    p.add_argument("--segment-records", type=int, default=500)
    p.add_argument("--leaf-fill", type=float, default=LEAF_FILL,
                   help="merge design: rows per leaf / 7 (0.9 is version 1's packing)")
    p.add_argument("--designs", default="both", choices=("both", "log", "merge"))
    a = p.parse_args()
    updates = a.keys * a.updates_per_key
    print(f"uniform overwrites of {ROW}-byte rows, {a.keys} keys, {updates} updates")
    print("design  setting              write_amp  space_amp")
    for sa in (1.3, 1.4, 1.5) if a.designs != "merge" else ():
        wa, s = log_design(a.keys, updates, sa, a.segment_records, random.Random(1))
        print(f"log     space_amp {sa:<10}  {wa:9.2f}  {s:9.2f}")
    for budget in (0.15, 0.25, 0.35, 0.6, 1.0) if a.designs != "log" else ():
        wa, s = merge_design(a.keys, updates, budget, random.Random(1), a.leaf_fill)
        print(f"merge   log budget {budget:<9}  {wa:9.2f}  {s:9.2f} (peak)")


if __name__ == "__main__":
    main()
