#!/usr/bin/env python3
"""Gathers a gpu_check.sh run (DETAIL/steps.tsv and each step's output in
DETAIL) into OUT/summary.json and prints a short table: the steps, the numbers and the
checks of the GPU issue (a resident Pull at least 0.5x the table's find, a
Pull + Push at least 0.25x, replay and train on the GPU equal to the host
runner, find and insert_or_assign at least HierarchicalKV's) and of the
cluster issue (the exchange at least 0.8x plain MPI_Alltoallv at 2-4 host
ranks, its bytes equal to the model's). Exit status 1 when a step failed.

Usage: gpu_check_summary.py DETAIL OUT COMMIT GPU(0|1) GPU_NAME QUICK(0|1)
"""
import json
import os
import sys


def read_json_output(path):
    """The JSON document a step printed (stdout may follow other lines)."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    start = text.find("{")
    if start < 0:
        return None
    try:
        return json.JSONDecoder().raw_decode(text[start:])[0]
    except ValueError:
        return None


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def gtest_counts(doc):
    counts = {"tests": 0, "failed": 0, "skipped": 0}
    for suite in (doc or {}).get("testsuites", []):
        for t in suite.get("testsuite", []):
            counts["tests"] += 1
            if t.get("failures"):
                counts["failed"] += 1
            elif t.get("result") == "SKIPPED":
                counts["skipped"] += 1
    return counts


def main():
    detail, out, commit, gpu, gpu_name, quick = sys.argv[1:7]
    gpu, quick = gpu == "1", quick == "1"
    steps = []
    with open(os.path.join(detail, "steps.tsv")) as f:
        for line in f:
            name, result, seconds, note = line.rstrip("\n").split("\t")
            steps.append({"name": name, "result": result, "seconds": int(seconds), "note": note})
    summary = {"commit": commit, "gpu": gpu_name if gpu else None, "quick": quick,
               "steps": steps, "tests": {}, "numbers": {}, "checks": {}}

    for s in steps:
        if s["name"].startswith("test_"):
            summary["tests"][s["name"][5:]] = gtest_counts(
                load(os.path.join(detail, s["name"] + ".json")))

    numbers = summary["numbers"]
    bench = load(os.path.join(detail, "engine_bench.json")) or {}
    for b in bench.get("benchmarks", []):
        numbers[b["name"]] = {"keys_per_s": b.get("items_per_second"),
                              "ns_per_key": b.get("ns_per_key"),
                              "t0_on_gpu": b.get("t0_on_gpu")}
    table = read_json_output(os.path.join(detail, "table_bench.txt")) or {}
    for r in table.get("results", []):
        numbers["table_" + r["op"]] = {"keys_per_s": r["keys_per_s"], "dim": r["dim"],
                                       "runner": table.get("runner")}
    for where in ("gpu", "host"):
        for kind in ("replay", "replay_nointents"):
            rep = read_json_output(os.path.join(detail, "%s_%s.txt" % (kind, where)))
            if rep:
                numbers[kind + "_" + where] = {k: rep.get(k) for k in (
                    "ssd_row_reads", "ssd_row_writes", "stall_fraction", "rows_per_s",
                    "t0_on_gpu")}
        tr = read_json_output(os.path.join(detail, "train_%s.txt" % where))
        if tr:
            numbers["train_" + where] = {k: tr.get(k) for k in (
                "validation_auc", "ssd_row_reads", "t0_on_gpu")}
    # The cluster's exchange (cluster_r<ranks>_<round>): the ratio
    # and the bytes against the model, one entry per round.
    for s in steps:
        if not s["name"].startswith("cluster_r") or s["result"] != "pass":
            continue
        rep = read_json_output(os.path.join(detail, s["name"] + ".txt"))
        if rep:
            ranks = "cluster_r%d" % rep["ranks"]
            numbers.setdefault(ranks, []).append({k: rep.get(k) for k in (
                "plain_aligned_over_exchange_aligned", "aligned_exchange_ms_per_batch",
                "plain_aligned_ms_per_batch", "plain_over_exchange", "bytes_sent_per_batch",
                "model_bytes_per_batch")})
    hkv = load(os.path.join(detail, "hkv.json"))
    if hkv:
        numbers["hkv"] = hkv
    # The DRAM tier (dram_d<dim>, automatic shards; dram1_d<dim>, one
    # shard; dram_base_d<dim>, a baseline commit's, then dram_again_d<dim>,
    # this commit's once more): issue 19's ratios per thread count.
    for name in ("dram_d16", "dram_d64", "dram1_d16", "dram1_d64", "dram_base_d16",
                 "dram_base_d64", "dram_again_d16", "dram_again_d64"):
        dram = read_json_output(os.path.join(detail, name + ".txt"))
        if dram:
            numbers[name] = {
                "rows": dram.get("rows"),
                "shards": dram.get("shards"),
                "index_bytes_per_row": dram.get("index_bytes_per_row"),
                "index_bytes_per_row_after_evict": dram.get("index_bytes_per_row_after_evict"),
                "by_threads": [{k: r.get(k) for k in (
                    "threads", "lookup_rows_per_s", "gather_gbps", "gather_index_gbps",
                    "gather_slots_gbps", "lookup_vs_gather", "lookup_vs_gather_index",
                    "lookup_vs_gather_slots", "lookup_retries", "insert_evict_rows_per_s",
                    "insert_evict_vs_lookup")} for r in dram.get("by_threads", [])]}

    checks = summary["checks"]

    def rate(name):
        return (numbers.get(name) or {}).get("keys_per_s")

    if gpu and not quick:
        find = rate("table_find")
        pull, round_trip = rate("BM_PullResident1M"), rate("BM_RoundTripResident1M")
        if find and pull:
            checks["pull_vs_table_find"] = {"value": pull / find, "bar": 0.5,
                                            "pass": pull / find >= 0.5}
        if find and round_trip:
            checks["pull_push_vs_table_find"] = {"value": round_trip / find, "bar": 0.25,
                                                 "pass": round_trip / find >= 0.25}
        # Without intents both runners must read exactly the same rows.
        g, h = numbers.get("replay_nointents_gpu"), numbers.get("replay_nointents_host")
        if g and h:
            checks["replay_ssd_reads_equal"] = {
                "value": [g["ssd_row_reads"], h["ssd_row_reads"]],
                "pass": g["ssd_row_reads"] == h["ssd_row_reads"]}
        # With intents the planner's timing moves reads from run to run on
        # either runner (docs/gpu/README.md): within 1% of each other.
        g, h = numbers.get("replay_gpu"), numbers.get("replay_host")
        if g and h and h["ssd_row_reads"]:
            rel = abs(g["ssd_row_reads"] - h["ssd_row_reads"]) / h["ssd_row_reads"]
            checks["replay_intents_ssd_reads_within_1pct"] = {
                "value": [g["ssd_row_reads"], h["ssd_row_reads"]], "bar": 0.01,
                "pass": rel <= 0.01}
        g, h = numbers.get("train_gpu"), numbers.get("train_host")
        if g and h:
            diff = abs(g["validation_auc"] - h["validation_auc"])
            checks["train_auc_equal"] = {"value": diff, "bar": 1e-4, "pass": diff <= 1e-4}
        if hkv:
            for op in ("find", "insert_or_assign", "find_or_insert"):
                ratios = [r["ratio"] for r in hkv["results"] if r["op"] == op]
                if ratios:
                    checks["hkv_%s_min_ratio" % op] = {
                        "value": min(ratios), "bar": 1.0,
                        "pass": min(ratios) >= 1.0 if op != "find_or_insert" else None}

    if not quick:
        # At least 0.8x plain MPI_Alltoallv of the same bytes in every round,
        # and the bytes sent equal to the model's (docs/cluster.md).
        for name, runs in sorted(numbers.items()):
            if not name.startswith("cluster_r"):
                continue
            ratios = [r["plain_aligned_over_exchange_aligned"] for r in runs]
            checks[name + "_vs_plain_alltoallv"] = {"value": ratios, "bar": 0.8,
                                                     "pass": min(ratios) >= 0.8}
            checks[name + "_bytes_equal_model"] = {
                "value": [[r["bytes_sent_per_batch"], r["model_bytes_per_batch"]] for r in runs],
                "pass": all(abs(r["bytes_sent_per_batch"] - r["model_bytes_per_batch"]) <= 1e-6 *
                            max(1.0, r["model_bytes_per_batch"]) for r in runs)}

        # Issue 19 (docs/dram-cache.md): index bytes per row at most 24,
        # lookups at least 0.8x the index-free gather (dimension 64),
        # inserts with eviction at least 0.5x lookups; one thread.
        for dim in (16, 64):
            dram = numbers.get("dram_d%d" % dim)
            if not dram:
                continue
            one = [r for r in dram["by_threads"] if r["threads"] == 1]
            checks["dram_d%d_index_bytes_per_row" % dim] = {
                "value": dram["index_bytes_per_row_after_evict"], "bar": 24,
                "pass": dram["index_bytes_per_row_after_evict"] <= 24}
            if one:
                if dim == 64:
                    checks["dram_d64_lookup_vs_gather"] = {
                        "value": one[0]["lookup_vs_gather"], "bar": 0.8,
                        "pass": one[0]["lookup_vs_gather"] >= 0.8}
                # Reported, not judged: lookups against the gather through an
                # index line onto keyed slots (the least such an index reads;
                # docs/dram-cache.md, "Targets and current numbers", proposes 0.8 of
                # it as the reachable form of the lookup bar), and at
                # dimension 16 against the index-free gather.
                checks["dram_d%d_lookup_vs_gather_slots" % dim] = {
                    "value": one[0].get("lookup_vs_gather_slots"), "bar": 0.8, "pass": None}
                if dim == 16:
                    checks["dram_d16_lookup_vs_gather"] = {
                        "value": one[0]["lookup_vs_gather"], "bar": 0.8, "pass": None}
                checks["dram_d%d_insert_evict_vs_lookup" % dim] = {
                    "value": one[0]["insert_evict_vs_lookup"], "bar": 0.5,
                    "pass": one[0]["insert_evict_vs_lookup"] >= 0.5}
            # Reported, not judged: inserts at the most threads, the
            # automatic shards over one shard (the same machine, one call).
            single = numbers.get("dram1_d%d" % dim)
            if single and dram["by_threads"] and single["by_threads"]:
                most, most1 = dram["by_threads"][-1], single["by_threads"][-1]
                if most["threads"] == most1["threads"] and most1["insert_evict_rows_per_s"]:
                    checks["dram_d%d_insert_sharded_vs_one_shard" % dim] = {
                        "value": most["insert_evict_rows_per_s"] /
                        most1["insert_evict_rows_per_s"],
                        "threads": most["threads"], "shards": dram.get("shards"),
                        "pass": None}

        # Reported, not judged: this commit's lookups and inserts over the
        # baseline commit's, per thread count, in the runs before and after
        # the baseline's (the spread between them is the machine's drift).
        for dim in (16, 64):
            base = numbers.get("dram_base_d%d" % dim)
            if not base:
                continue
            for run in ("dram_d%d" % dim, "dram_again_d%d" % dim):
                ours = {r["threads"]: r for r in (numbers.get(run) or {}).get("by_threads", [])}
                for key in ("lookup_rows_per_s", "insert_evict_rows_per_s"):
                    value = {r["threads"]: ours[r["threads"]][key] / r[key]
                             for r in base["by_threads"]
                             if r["threads"] in ours and r[key] and ours[r["threads"]][key]}
                    if value:
                        checks["%s_%s_vs_baseline" % (run, key)] = {"value": value, "pass": None}

    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")

    print("%-44s %-6s %6s  %s" % ("step", "result", "s", "note"))
    for s in steps:
        print("%-44s %-6s %6d  %s" % (s["name"], s["result"], s["seconds"], s["note"]))
    for name, counts in summary["tests"].items():
        print("tests %-38s %d run, %d failed, %d skipped" % (
            name, counts["tests"], counts["failed"], counts["skipped"]))
    for name, c in checks.items():
        verdict = {True: "pass", False: "FAIL", None: "info"}[c["pass"]]
        print("check %-38s %-4s %s" % (name, verdict, json.dumps(c["value"])))
    return 1 if any(s["result"] == "fail" for s in steps) else 0


if __name__ == "__main__":
    sys.exit(main())
