#!/bin/bash
# Lookup variants of T1 on this host; one JSON per run under $1.
out=$1; mkdir -p $out
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$here/lib
s=$here/bin/strata
cat /sys/kernel/mm/transparent_hugepage/enabled > $out/thp.txt 2>&1
lscpu > $out/lscpu.txt 2>&1
run() { local name=$1; shift; local t0=$SECONDS; env "$@" > $out/$name.json 2> $out/$name.err; echo "$name rc=$? $((SECONDS-t0))s"; }
for d in 16 64; do
  B="$s bench dram --rows 4000000 --dim $d --batch 4096 --json"
  run auto_d$d $B --threads 1,8
  run one_d$d $B --threads 1,8 --shards 1
  run noother_d$d XNOOTHER=1 $B --threads 1,8 --shards 1
  run ahead16_d$d XAHEAD=16 $B --threads 1,8 --shards 1
  run ahead4_d$d XAHEAD=4 $B --threads 1 --shards 1
  run nosort_d$d XNOSORT=1 $B --threads 1,8 --shards 1
  run nosort_noother_d$d XNOSORT=1 XNOOTHER=1 $B --threads 1 --shards 1
  run one2_d$d $B --threads 1,8 --shards 1
done
