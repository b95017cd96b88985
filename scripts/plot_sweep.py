#!/usr/bin/env python3
"""Plots of a `strata bench sweep` (sweep.csv): SSD row reads against the
Belady MIN, horizon and LRU floors, stall fraction and rows/s, each against
lookahead (0 = no intents), one line per tier configuration, fallback and
simulated compute time."""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(csv_path, out_dir):
    rows = list(csv.DictReader(open(csv_path)))
    groups = defaultdict(list)
    for r in rows:
        groups[(r["workload"], r["device_rows"], r["dram_rows"], r["fallback"], r["ssd_backend"],
                r.get("compute_us", "0"))].append(r)
    plots = {
        "ssd_reads": ("SSD row reads", "ssd_row_reads"),
        "stall_fraction": ("stall fraction", "stall_fraction"),
        "rows_per_s": ("rows pulled per second", "rows_per_s"),
    }
    for name, (label, column) in plots.items():
        fig, ax = plt.subplots(figsize=(7, 4.5))
        for key, rs in sorted(groups.items()):
            rs.sort(key=lambda r: int(r["lookahead"]))
            xs = [max(int(r["lookahead"]), 0) for r in rs]
            xpos = list(range(len(xs)))
            tag = "%s T0=%s T1=%s %s %s compute=%sus" % key
            ax.plot(xpos, [float(r[column]) for r in rs], marker="o", label="store " + tag)
            if name == "ssd_reads":
                ax.plot(xpos, [float(r["horizon_misses"]) for r in rs], ls="--", marker="x",
                        label="horizon " + tag)
                ax.plot(xpos, [float(r["opt_misses"]) for r in rs], ls=":", label="Belady MIN " + tag)
                ax.plot(xpos, [float(r["lru_misses"]) for r in rs], ls="-.", label="LRU " + tag)
            ax.set_xticks(xpos)
            ax.set_xticklabels(["none" if x == 0 else str(x) for x in xs])
        ax.set_xlabel("intent lookahead (batches)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
        fig.tight_layout()
        fig.savefig("%s/%s.png" % (out_dir, name), dpi=110)
        plt.close(fig)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: plot_sweep.py SWEEP_CSV OUT_DIR")
    main(sys.argv[1], sys.argv[2])
