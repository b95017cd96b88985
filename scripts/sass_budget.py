#!/usr/bin/env python3
"""The SASS and resource budget of the built CUDA kernels (docs/device-table.md).

    python3 scripts/sass_budget.py --budget kernels/sass_budget.txt LIB_OR_OBJECT...

Reads every cubin in the given static libraries or objects with cuobjdump
(-res-usage for registers, local memory and stack; -sass for the
instructions), prints one row per kernel (registers, local bytes, the fence
and cache-invalidate instructions it holds, the bound it is held to) and
fails when a kernel breaks its budget line:
  - more registers than the line's bound;
  - local memory (register spills) in a kernel whose line bounds registers;
  - an instruction whose opcode starts with one of the line's forbidden
    prefixes (e.g. MEMBAR.SC, CCTL.IVALL).
Every kernel must match some line (the first match applies) and every line
must match some kernel, so a renamed kernel cannot leave its budget.

cuobjdump comes from $CUOBJDUMP, the PATH, the CUDA toolkit, or
.cuda-tools/ (scripts/deps.sh cuda-tools installs it there when missing).
Exit status: 0 within budget, 1 over it, 2 for a usage or tool error.
"""

import argparse
import collections
import glob
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Instructions reported per kernel (counted by opcode prefix).
REPORTED = ("MEMBAR.SC", "MEMBAR.ALL", "CCTL.IVALL", "ERRBAR")


def find_cuobjdump():
    candidates = [os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump"),
                  "/usr/local/cuda/bin/cuobjdump"]
    candidates += sorted(glob.glob(os.path.join(HERE, ".cuda-tools/nvidia/*/bin/cuobjdump")))
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    subprocess.run(["bash", os.path.join(HERE, "scripts/deps.sh"), "cuda-tools"], check=False)
    found = sorted(glob.glob(os.path.join(HERE, ".cuda-tools/nvidia/*/bin/cuobjdump")))
    return found[0] if found else None


def short_name(mangled):
    """FindKernel for _ZN6strata7kernels<anonymous namespace>10FindKernelE...: the last
    component of the (nested) mangled name; c++filt does not read nvcc's names for
    anonymous namespaces."""
    if not mangled.startswith("_Z"):
        return mangled
    i = 3 if mangled.startswith("_ZN") else 2
    last = mangled
    while i < len(mangled) and mangled[i].isdigit():
        j = i
        while mangled[j].isdigit():
            j += 1
        n = int(mangled[i:j])
        last = mangled[j:j + n]
        i = j + n
    return last


def parse_budget(path):
    lines = []
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            text = raw.split("#", 1)[0].strip()
            if not text:
                continue
            fields = text.split()
            if len(fields) != 3:
                sys.exit(f"sass_budget: {path}:{number}: want 'PATTERN MAX_REGISTERS FORBIDDEN', "
                         f"got '{text}'")
            pattern, regs, forbidden = fields
            try:
                regex = re.compile(pattern)
            except re.error as e:
                sys.exit(f"sass_budget: {path}:{number}: bad pattern '{pattern}': {e}")
            bound = None if regs == "-" else int(regs)
            banned = [] if forbidden == "-" else forbidden.split(",")
            lines.append({"line": number, "pattern": pattern, "regex": regex, "regs": bound,
                          "forbidden": banned, "used": False})
    return lines


def read_kernels(tool, files):
    """{short name: {"regs", "local", "stack", "opcodes": Counter}} over all cubins."""
    kernels = collections.defaultdict(lambda: {"regs": 0, "local": 0, "stack": 0,
                                               "opcodes": collections.Counter()})
    for f in files:
        res = subprocess.run([tool, "-res-usage", f], capture_output=True, text=True, check=False)
        if res.returncode != 0:
            sys.exit(f"sass_budget: {tool} -res-usage {f} failed: {res.stderr.strip()}")
        current = None
        for line in res.stdout.splitlines():
            m = re.match(r"\s*Function (\S+):\s*$", line)
            if m:
                current = short_name(m.group(1))
                continue
            m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:\d+ LOCAL:(\d+)", line)
            if m and current:
                k = kernels[current]
                k["regs"] = max(k["regs"], int(m.group(1)))
                k["stack"] = max(k["stack"], int(m.group(2)))
                k["local"] = max(k["local"], int(m.group(3)))
                current = None
        sass = subprocess.run([tool, "-sass", f], capture_output=True, text=True, check=False)
        if sass.returncode != 0:
            sys.exit(f"sass_budget: {tool} -sass {f} failed: {sass.stderr.strip()}")
        current = None
        for line in sass.stdout.splitlines():
            m = re.match(r"\s*Function : (\S+)\s*$", line)
            if m:
                current = short_name(m.group(1))
                kernels[current]  # noqa: B018 (a kernel without resource lines still counts)
                continue
            # /*0040*/   @!P0 MEMBAR.SC.GPU ;   /* 0x... */
            m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
            if m and current:
                kernels[current]["opcodes"][m.group(1)] += 1
    return kernels


def count(opcodes, prefix):
    return sum(n for op, n in opcodes.items() if op.startswith(prefix))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--budget", required=True, help="the budget file (kernels/sass_budget.txt)")
    parser.add_argument("files", nargs="+", help="static libraries or objects holding cubins")
    args = parser.parse_args()
    for f in args.files:
        if not os.path.isfile(f):
            print(f"sass_budget: no such file {f} (build the CUDA targets first)", file=sys.stderr)
            return 2
    tool = find_cuobjdump()
    if tool is None:
        print("sass_budget: cuobjdump not found and `scripts/deps.sh cuda-tools` did not install it",
              file=sys.stderr)
        return 2
    budget = parse_budget(args.budget)
    kernels = read_kernels(tool, args.files)
    if not kernels:
        print(f"sass_budget: no kernels in {' '.join(args.files)} (built without CUDA?)",
              file=sys.stderr)
        return 2

    failures = []
    header = ("kernel", "regs", "bound", "local", *REPORTED, "verdict")
    rows = []
    for name in sorted(kernels):
        k = kernels[name]
        line = next((b for b in budget if b["regex"].fullmatch(name)), None)
        problems = []
        if line is None:
            problems.append("no budget line matches")
        else:
            line["used"] = True
            if line["regs"] is not None:
                if k["regs"] > line["regs"]:
                    problems.append(f"{k['regs']} registers > {line['regs']}")
                if k["local"] > 0:
                    problems.append(f"{k['local']} bytes of local memory (spills)")
            for prefix in line["forbidden"]:
                n = count(k["opcodes"], prefix)
                if n:
                    problems.append(f"{n} x {prefix}")
        bound = "-" if line is None or line["regs"] is None else str(line["regs"])
        rows.append((name, str(k["regs"]), bound, str(k["local"]),
                     *(str(count(k["opcodes"], p)) for p in REPORTED),
                     "ok" if not problems else "OVER: " + "; ".join(problems)))
        failures += [f"{name}: {p}" for p in problems]
    for b in budget:
        if not b["used"]:
            failures.append(f"{args.budget}:{b['line']}: pattern '{b['pattern']}' matches no kernel")

    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    for r in [header, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1])
    if failures:
        print(f"sass_budget: {len(failures)} over budget ({args.budget}):", file=sys.stderr)
        for f in failures:
            print("  " + f, file=sys.stderr)
        return 1
    print(f"sass_budget: {len(kernels)} kernels within {args.budget} (cuobjdump: {tool})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
