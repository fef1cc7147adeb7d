#!/usr/bin/env python3
"""test_symreg_sympy.py - `lssar symreg` end to end: its equations parse with SymPy's sympify
UNCHANGED (no local names passed) and are symbolically equal to the true law, and bad CSV files
give a clear error and exit code 2.

Symbolic equality: constants in the found equation are made exact rationals (nsimplify), then
either simplify(found - truth) == 0, or found / truth simplifies to a pure number within 1e-3 of 1
(constants within 1e-3 relative). The binary is $LSSAR_BIN or build/lssar."""
import json, math, os, random, shutil, subprocess, sys, tempfile

import sympy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("LSSAR_BIN", os.path.join(ROOT, "build", "lssar"))

# name, target, truth, features with ranges (as in the spec and src/symreg/laws.c)
LAWS = [
    ("newton", "F", "39.4784*m1*m2/r**2", [("r", 0.5, 5), ("m1", 0.1, 2), ("m2", 0.1, 2)]),
    ("flux", "flux", "P/(4*pi*r**2)", [("P", 1, 5), ("r", 1, 5)]),
    ("angular_momentum", "L", "m*v*r", [("m", 1, 5), ("v", 1, 5), ("r", 1, 5)]),
    ("mass_energy", "E", "m*c**2", [("m", 1, 5), ("c", 1, 5)]),
]

passed = failed = 0


def check(cond, msg):
    global passed, failed
    if cond:
        passed += 1
        print("ok -", msg)
    else:
        failed += 1
        print("not ok -", msg)


def numerically_close(found, truth, tol=1e-3):
    """Max relative difference at random points of [1, 2]^k; a cheap filter before simplify()."""
    syms = sorted(found.free_symbols | truth.free_symbols, key=str)
    f, t = sympy.lambdify(syms, found, "math"), sympy.lambdify(syms, truth, "math")
    rng = random.Random(5)
    for _ in range(20):
        pt = [rng.uniform(1, 2) for _ in syms]
        try:
            a, b = float(f(*pt)), float(t(*pt))
        except (ValueError, ZeroDivisionError, OverflowError):
            return False
        if not abs(a - b) <= tol * abs(b):
            return False
    return True


def equivalent(found, truth):
    if not numerically_close(found, truth):
        return False
    f = sympy.nsimplify(found, rational=True)
    try:
        if sympy.simplify(f - truth) == 0:
            return True
        ratio = sympy.simplify(f / truth)
        if not ratio.free_symbols and abs(complex(ratio.evalf()) - 1) < 1e-3:
            return True
    except Exception as e:  # a simplification failure is a failed check, not a crash
        print("  simplify failed:", e)
    return False


def write_csv(path, law, rows=1000, seed=0):
    _, target, truth, feats = law
    rng = random.Random(seed)
    env = {"pi": math.pi, "exp": math.exp, "sqrt": math.sqrt}
    with open(path, "w") as f:
        f.write(",".join([n for n, _, _ in feats] + [target]) + "\n")
        for _ in range(rows):
            vals = {n: rng.uniform(lo, hi) for n, lo, hi in feats}
            y = eval(truth, env, dict(vals))
            f.write(",".join(repr(vals[n]) for n, _, _ in feats) + "," + repr(y) + "\n")


def run(args):
    return subprocess.run([BIN, "symreg"] + args, capture_output=True, text=True, timeout=300)


def main():
    if not os.access(BIN, os.X_OK):
        check(False, f"lssar binary {BIN} exists (build it, or set LSSAR_BIN)")
        print(f"test_symreg_sympy: {passed} passed, {failed} failed")
        return 1
    # The comparison itself: equal forms with rounded constants pass, a different law fails.
    g = sympy.sympify("exp(-theta**2/2)/sqrt(2*pi)")
    check(equivalent(sympy.sympify("0.3989422804/exp((0.5*(theta**2)))"), g), "comparison accepts an equal form")
    check(not equivalent(sympy.sympify("0.3989422804/exp((0.5*(theta**3)))"), g), "comparison rejects a different law")
    check(not equivalent(sympy.sympify("0.3999/exp((0.5*(theta**2)))"), g), "comparison rejects a constant off by 2.5e-3")
    tmp = tempfile.mkdtemp(prefix="lssar_sr_py")
    for law in LAWS:
        name, target, truth_s, _ = law
        csv, js = os.path.join(tmp, name + ".csv"), os.path.join(tmp, name + ".json")
        write_csv(csv, law)
        p = run(["--csv", csv, "--target", target, "--threads", "2", "--seed", "0", "--quiet", "--json", js])
        check(p.returncode == 0, f"{name}: lssar symreg exits 0 ({p.stderr.strip()[-200:]})")
        if p.returncode:
            continue
        out = json.load(open(js))
        check("selected" in out and "pareto" in out and len(out["pareto"]) > 0, f"{name}: JSON has selected and pareto")
        ok_parse = True
        for item in out["pareto"]:
            ok_parse &= all(k in item for k in ("complexity", "loss", "score", "equation"))
            try:
                sympy.sympify(item["equation"])
            except Exception as e:
                ok_parse = False
                print("  cannot sympify", item["equation"], e)
        check(ok_parse, f"{name}: every Pareto equation parses with sympify unchanged")
        eq = out["selected"]["equation"]
        found = sympy.sympify(eq)
        check(equivalent(found, sympy.sympify(truth_s)), f"{name}: selected '{eq}' == {truth_s} symbolically")

    # Bad input: clear message, exit 2, never a crash.
    cases = [("empty", "", "empty"), ("ragged", "x,y\n1,2\n3\n", "fields"),
             ("nonnumber", "x,y\n1,2\n3,abc\n", "not a finite number"), ("notarget", "x,z\n1,2\n3,4\n", "not in the CSV")]
    for name, text, expect in cases:
        path = os.path.join(tmp, name + ".csv")
        open(path, "w").write(text)
        p = run(["--csv", path, "--target", "y", "--quiet"])
        check(p.returncode == 2 and expect in p.stderr, f"bad csv '{name}': exit 2 and '{expect}' ({p.returncode}: {p.stderr.strip()})")
    p = run(["--csv", os.path.join(tmp, "missing.csv"), "--target", "y"])
    check(p.returncode == 2 and "cannot open" in p.stderr, f"missing file: {p.stderr.strip()}")
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"test_symreg_sympy: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
