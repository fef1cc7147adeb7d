#!/usr/bin/env python3
"""bench/sass.py - the fused attention kernels' machine code, read without a GPU (issue 35).

Reads the SASS of src/cuda/flash_attn.cu's kernels (cuobjdump --dump-sass and
--dump-resource-usage on the nvcc object) and prints, per kernel, kind, head size and mode:
registers, spills, shared memory, CTAs per SM, the main loop's instructions per tensor-core op,
and whether ldmatrix, cp.async, wgmma and TMA appear. Goals at D = 64, bf16 (issue 35): softmax
forward <= 10 and backward <= 10 instructions per tensor op, lssar forward <= 15 and backward
<= 14, no spills. It prints; it never fails on a missed goal (a benchmark, not a test).

Usage: bench/sass.sh [--arch sm_90a] [--D 64] [--all] [--json FILE] (see --help)

How the figures are read
- Main loop: the outermost loops (backward branches) of the kernel that hold tensor-core ops
  (HMMA, HGMMA): the instructions one pass over a tile executes, divided by its tensor ops. A
  loop nested inside counts CHUNKS = FLASH_BC / 16 = 4 times if it holds tensor ops (the kernels'
  only rolled loops with tensor ops walk a tile's four 16-key chunks, `#pragma unroll 1`), once
  otherwise (the tile loads, unrolled over their four steps at D = 64); `inner` counts the nested
  loops, and with none the figure is the exact static count. The lssar forward's two passes are
  two main loops: their sum is divided by their tensor ops. A kernel without tensor ops (the fp32
  SIMT mode) shows '-'.
- Backward: dkdv_kernel (dK, dV and the dQ parts: five products per block) and, for the
  re-weighting kinds, the row-sum pass (rowpass_kernel PASS_RS: the row constants, two more
  products per block), their main loops summed (the per-row, dQ finishing and ds kernels run once
  per row or head, outside the tile loops). The ssmax row pass (rowpass_kernel PASS_SSMAX: ssmax's row terms of ds, shown as
  kernel ssmax) is listed under the instance it shares with the dot score (kind softmax,
  lssa+dot, ...) but runs for ssmax only: not in the goals; rowpass_kernel PASS_RS is rowsums.
- Shared memory per CTA: the dynamic bytes the host code launches with (Tile<MMA, D> in
  flash_attn.cu: FWD, ROWSUMS, DKDV; mirrored in dyn_smem below) plus the static bytes cuobjdump
  reports, plus the 1 KB per CTA that the driver reserves (included in cuobjdump's figure on sm_90,
  not on sm_80).
- CTAs per SM: the CUDA occupancy rules (65536 registers per SM allocated per warp in units of
  256, 64 warps, 32 CTAs, 228 KB (sm_90) or 164 KB (sm_80) of shared memory per SM).
"""
import argparse
import json
import re
import subprocess
import sys

# Kernel template instances: flash_st(cos, phi, rw) = cos * 16 + phi * 2 + rw (flash_attn.cu)
STAGES = {0: "softmax", 1: "softmax+rw", 2: "lssa+dot", 3: "lssar+dot", 4: "sigmoid", 16: "softmax+cos",
          17: "softmax+cos+rw", 18: "lssa", 19: "lssar"}
GOALS = {("softmax", "fwd"): 10, ("softmax", "bwd"): 10, ("lssar", "fwd"): 15, ("lssar", "bwd"): 14}
CHUNKS = 4  # FLASH_BC / 16: the trips of a nested loop with tensor ops (the 16-key chunks)
SMEM_SM = {"sm_80": 167936, "sm_86": 102400, "sm_89": 102400, "sm_90": 233472, "sm_90a": 233472}


def dyn_smem(kernel, D, mma):
    """Tile<MMA, D> of flash_attn.cu: the dynamic shared memory each kernel launches with."""
    es, pad = (2, 8) if mma else (4, 4)
    tile = 64 * (D + pad) * es
    stage = 64 * (64 + pad) * es
    pw = 0 if mma else 4 * 16 * 24 * 4
    nbuf = 2 if mma and D <= 64 else 1  # the walked tiles' buffers (Tile<MMA, D>::NBUF)
    return {"fwd": (1 + 2 * nbuf) * tile + nbuf * 256 + pw, "rowsums": (2 + 2 * nbuf) * tile + 256,
            "dkdv": (2 + 2 * nbuf) * tile + 2 * stage + 256, "ssmax": (2 + 2 * nbuf) * tile + 256}[kernel]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"sass.py: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[:500]}")
    return r.stdout


def resources(cuobjdump, obj, arch):
    """{mangled name: {REG, STACK, SHARED, LOCAL}} from --dump-resource-usage."""
    out, fn, res = run([cuobjdump, "--dump-resource-usage", "-arch", arch, obj]), None, {}
    for line in out.splitlines():
        m = re.match(r"\s*Function (\S+):", line)
        if m:
            fn = m.group(1)
            continue
        if fn and "REG:" in line:
            res[fn] = {k: int(v) for k, v in re.findall(r"(\w+):(\d+)", line)}
            fn = None
    return res


def sass_functions(cuobjdump, obj, arch):
    """{mangled name: [(address, opcode, text)]} from one --dump-sass of the whole object."""
    out, fn, funcs = run([cuobjdump, "--dump-sass", "-arch", arch, obj]), None, {}
    for line in out.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            fn = m.group(1)
            funcs[fn] = []
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if fn and m:
            text = re.sub(r"^@!?U?P\w+\s+", "", m.group(2).strip())   # drop the predicate
            funcs[fn].append((int(m.group(1), 16), text.split()[0] if text else "", text))
    return funcs


# what the main loop's instructions do (opcode prefixes), for --detail: where the count goes
CLASSES = [("tensor", ("HMMA", "HGMMA")), ("smem", ("LDS", "STS", "LDSM", "STSM")),
           ("gmem", ("LDG", "STG", "LDGSTS", "LDC", "ULDC")),
           ("fp", ("FFMA", "FMUL", "FADD", "FMNMX", "FSEL", "FSETP", "MUFU", "FCHK", "HADD2", "HFMA2")),
           ("convert", ("F2FP", "F2I", "I2F", "F2F", "PRMT")),
           ("int", ("IMAD", "LEA", "LOP3", "SHF", "IADD3", "ISETP", "SEL", "VIADD", "IMNMX", "VIMNMX", "IABS",
                    "VIADDMNMX", "UIADD3", "ULEA", "UMOV", "S2R", "S2UR", "CS2R", "MOV", "P2R", "R2P", "PLOP3")),
           ("control", ("BRA", "BSSY", "BSYNC", "BAR", "WARPSYNC", "SHFL", "NOP", "EXIT", "CALL", "RET"))]


def op_class(op):
    base = op.split(".")[0]
    for name, prefixes in CLASSES:
        if base in prefixes:
            return name
    return "other"


def is_tensor_op(op):
    return op.startswith(("HMMA", "HGMMA", "IMMA", "DMMA"))


def main_loops(ins):
    """The figures of a kernel's main loops: see the module's docstring."""
    at = {a: i for i, (a, _, _) in enumerate(ins)}
    loops = []
    for i, (a, op, text) in enumerate(ins):
        m = re.search(r"0x[0-9a-f]+", text) if op.startswith("BRA") else None
        if m and int(m.group(0), 16) <= a and int(m.group(0), 16) in at:
            loops.append((at[int(m.group(0), 16)], i))
    mma_loops = [(s, e) for s, e in loops if any(is_tensor_op(ins[k][1]) for k in range(s, e + 1))]
    outer = [l for l in mma_loops if not any(o != l and o[0] <= l[0] and l[1] <= o[1] for o in mma_loops)]
    nested = [l for l in loops if l not in outer and any(o[0] <= l[0] and l[1] <= o[1] for o in outer)]
    n = mma = 0
    by_class = {name: 0 for name, _ in CLASSES + [("other", ())]}
    for s, e in outer:
        for k in range(s, e + 1):
            times = 1
            for ls, le in nested:
                if ls <= k <= le:
                    times *= CHUNKS if (ls, le) in mma_loops else 1
            n += times
            mma += times if is_tensor_op(ins[k][1]) else 0
            by_class[op_class(ins[k][1])] += times
    return n, mma, len(nested), by_class


def features(ins):
    ops = [op for _, op, _ in ins]
    has = lambda *p: sum(1 for op in ops if op.startswith(p))
    return {"mma": has("HMMA", "HGMMA"), "ldsm": has("LDSM"), "cp_async": has("LDGSTS"),
            "wgmma": has("HGMMA"), "tma": has("UTMALDG", "UBLKCP", "UTMAPF"),
            "spill_ops": has("STL", "LDL"), "lds_u16": sum(1 for _, op, _ in ins if op in ("LDS.U16", "LDS.S16"))}


def ctas_per_sm(regs, smem, arch, nthreads=128):
    warps = (nthreads + 31) // 32
    regs_warp = ((max(regs, 1) * 32 + 255) // 256) * 256
    by_regs = 65536 // (regs_warp * warps)
    by_smem = SMEM_SM.get(arch, 233472) // smem if smem else 32
    return min(by_regs, by_smem, 64 // warps, 32)


def demangle(name):
    m = re.match(r"_Z\d+(fwd_kernel|dkdv_kernel|rowpass_kernel)ILi(\d+)ELi(\d+)ELb([01])E(?:Li([01])E)?", name)
    if not m:
        return None
    kernel = m.group(1).replace("_kernel", "")
    if kernel == "rowpass":  # PASS_RS = 0: the re-weighting's row sums; PASS_SSMAX = 1
        kernel = "ssmax" if m.group(5) == "1" else "rowsums"
    return kernel, int(m.group(2)), int(m.group(3)), m.group(4) == "1"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--obj", required=True, help="the nvcc object of src/cuda/flash_attn.cu")
    ap.add_argument("--cuobjdump", default="cuobjdump", help="the cuobjdump program")
    ap.add_argument("--arch", default="sm_90a", help="the SASS to read (default sm_90a)")
    ap.add_argument("--D", type=int, nargs="*", default=[64], help="head sizes (default 64)")
    ap.add_argument("--all", action="store_true", help="also the fp32 (SIMT) mode")
    ap.add_argument("--detail", action="store_true",
                    help="also where the main loop's instructions go, per tensor op, by kind of instruction")
    ap.add_argument("--json", help="write the rows as JSON to this file")
    args = ap.parse_args()

    res = resources(args.cuobjdump, args.obj, args.arch)
    funcs = sass_functions(args.cuobjdump, args.obj, args.arch)
    if not funcs:
        sys.exit(f"sass.py: no {args.arch} SASS in {args.obj} (cuobjdump --list-elf lists what is there)")
    kinds = STAGES
    rows = []
    for name, ins in funcs.items():
        d = demangle(name)
        if not d or d[1] not in kinds or d[2] not in args.D or (not d[3] and not args.all):
            continue
        kernel, st, D, mma = d
        r = res.get(name, {})
        smem = dyn_smem(kernel, D, mma) + r.get("SHARED", 0) + (1024 if args.arch == "sm_80" else 0)
        n, nmma, inner, by_class = main_loops(ins)
        rows.append(dict(kernel=kernel, kind=kinds[st], stages=st, D=D, mode="bf16" if mma else "fp32",
                         regs=r.get("REG", 0), local_bytes=r.get("LOCAL", 0), smem=smem,
                         ctas_per_sm=ctas_per_sm(r.get("REG", 0), smem, args.arch),
                         loop_ins=n, loop_mma=nmma, inner=inner,
                         ins_per_mma=round(n / nmma, 1) if nmma else None, loop_classes=by_class,
                         **features(ins)))
    order = {"fwd": 0, "rowsums": 1, "dkdv": 2, "ssmax": 3}
    rows.sort(key=lambda x: (x["D"], x["mode"], list(kinds).index(x["stages"]), order[x["kernel"]]))

    print(f"sass: {args.obj}, {args.arch} ({len(funcs)} functions)")
    hdr = ("kernel", "kind", "D", "mode", "regs", "spill", "smem_KB", "CTA/SM", "loop_ins", "mma", "ins/mma",
           "inner", "ldsm", "cp.async", "wgmma", "tma", "lds16")
    fmt = "{:<7} {:<15} {:>3} {:<4} {:>4} {:>5} {:>7} {:>6} {:>8} {:>4} {:>7} {:>5} {:>4} {:>8} {:>5} {:>3} {:>5}"
    print(fmt.format(*hdr))
    for x in rows:
        print(fmt.format(x["kernel"], x["kind"], x["D"], x["mode"], x["regs"], x["local_bytes"] + x["spill_ops"],
                         f"{x['smem'] / 1024:.1f}", x["ctas_per_sm"], x["loop_ins"], x["loop_mma"],
                         "-" if x["ins_per_mma"] is None else f"{x['ins_per_mma']:.1f}", x["inner"], x["ldsm"],
                         x["cp_async"], x["wgmma"], x["tma"], x["lds_u16"]))

    if args.detail:
        names = [name for name, _ in CLASSES] + ["other"]
        print("main loop, instructions per tensor op by kind (" + "; ".join(
            f"{n}: {' '.join(p[:4])}{' ...' if len(p) > 4 else ''}" for n, p in CLASSES) + ")")
        print("{:<7} {:<15} {:>3} ".format("kernel", "kind", "D") + " ".join(f"{n:>7}" for n in names))
        for x in rows:
            if x["loop_mma"]:
                print("{:<7} {:<15} {:>3} ".format(x["kernel"], x["kind"], x["D"]) +
                      " ".join(f"{x['loop_classes'][n] / x['loop_mma']:7.1f}" for n in names))

    goals = []
    for (kind, part), goal in GOALS.items():
        ks = ["fwd"] if part == "fwd" else ["rowsums", "dkdv"]
        sel = [x for x in rows if x["kind"] == kind and x["D"] == 64 and x["mode"] == "bf16" and x["kernel"] in ks]
        if not any(x["kernel"] == ks[-1] for x in sel) or not all(x["loop_mma"] for x in sel):
            continue
        ratio = sum(x["loop_ins"] for x in sel) / sum(x["loop_mma"] for x in sel)
        spills = sum(x["local_bytes"] + x["spill_ops"] for x in sel)
        met = ratio <= goal and spills == 0
        goals.append(dict(kind=kind, part=part, ins_per_mma=round(ratio, 1), goal=goal, spills=spills, met=met))
    if goals:
        print("goals at D = 64, bf16 (main-loop instructions per tensor op; no spills):")
        for g in goals:
            print(f"  {g['kind']:<8} {g['part']}: {g['ins_per_mma']:6.1f}  goal <= {g['goal']:<3} spills {g['spills']}"
                  f"  {'met' if g['met'] else 'MISSED'}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"object": args.obj, "arch": args.arch, "kernels": rows, "goals": goals}, f, indent=1)
        print(f"sass: wrote {args.json}")


if __name__ == "__main__":
    main()
