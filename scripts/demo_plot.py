#!/usr/bin/env python3
"""The comparison `make demo` prints and plots: `strata train --json` with
intents beside the same run with --no-intents. Prints SSD reads, stall
fraction and rows/s of both against the Belady MIN of the run's own key
sequence, and writes one PNG: per epoch, the lookups served by each tier
(T0, T1, SSD) for both runs, and the SSD reads so far against MIN.

Usage: demo_plot.py INTENTS_JSON NO_INTENTS_JSON OUT_PNG"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(with_path, without_path, out_png):
    runs = {"intents": json.load(open(with_path)), "no intents": json.load(open(without_path))}
    print("%-12s %11s %9s %10s %10s %9s" % ("run", "ssd_reads", "/ MIN", "stall", "rows/s", "val_auc"))
    floor = None
    for name, j in runs.items():
        floor = j.get("belady_min_ssd_reads", floor)
        ratio = "%9.2f" % (j["ssd_row_reads"] / floor) if floor else "%9s" % "-"
        print("%-12s %11d %s %10.4f %10.0f %9.4f" % (name, j["ssd_row_reads"], ratio,
                                                    j["stall_fraction"], j["rows_per_s"],
                                                    j["validation_auc"]))
    if floor is not None:
        print("%-12s %11d %9.2f   (Belady MIN, same key sequence, %d rows above the SSD)" %
              ("MIN", floor, 1.0, runs["intents"]["cache_rows"]))

    fig, (hits, reads) = plt.subplots(1, 2, figsize=(14, 5))
    width = 0.4
    colors = {"t0_hits": "tab:green", "t1_hits": "tab:blue", "ssd_row_reads": "tab:red"}
    labels = {"t0_hits": "T0 hits", "t1_hits": "T1 hits", "ssd_row_reads": "SSD reads"}
    for i, (name, j) in enumerate(runs.items()):
        epochs = [e["epoch"] + 1 for e in j["epochs"]]
        x = [e + (i - 0.5) * width for e in epochs]
        bottom = [0] * len(epochs)
        for key in ("t0_hits", "t1_hits", "ssd_row_reads"):
            values = [e[key] for e in j["epochs"]]
            hits.bar(x, values, width * 0.95, bottom=bottom, color=colors[key],
                     alpha=1.0 if i == 0 else 0.45,
                     label="%s (%s)" % (labels[key], name))
            bottom = [b + v for b, v in zip(bottom, values)]
        total = 0
        cumulative = []
        for e in j["epochs"]:
            total += e["ssd_row_reads"]
            cumulative.append(total)
        reads.plot(epochs, cumulative, marker="o", label="SSD reads, %s" % name)
    if floor is not None:
        reads.axhline(floor, color="black", linestyle="--", label="Belady MIN (whole run)")
    epochs = [e["epoch"] + 1 for e in runs["intents"]["epochs"]]
    hits.set_xticks(epochs)
    reads.set_xticks(epochs)
    hits.set_xlabel("epoch")
    hits.set_ylabel("rows served (solid: intents, pale: no intents)")
    hits.set_title("hits per tier per epoch (T1 and SSD include prefetches)")
    # Legends below the axes, off the data.
    hits.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    reads.set_xlabel("epoch")
    reads.set_ylabel("SSD row reads so far")
    reads.set_title("SSD reads against Belady's MIN")
    reads.set_ylim(bottom=0)
    reads.legend(fontsize=8, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    print("plot: %s" % out_png)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
