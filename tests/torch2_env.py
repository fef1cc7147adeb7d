"""torch2_env.py - what the tests that need a modern PyTorch share (test_torch_compile.py,
test_lm_eval.py, test_flex_attention.py): their checks run in the second virtual environment
.venv-torch2 (scripts/requirements-torch2.txt: torch 2.13, lm-evaluation-harness, transformers;
`bash scripts/deps.sh --torch2` makes it), with the lssar package from python/ and this build's
liblssar.so. Each test file runs itself there with --inner and counts the "inner: P,F" line.

They run in the default (portable) build only, and print one skip line in the others: what they
check is above the C kernels (the op's registration with torch.library, lm-evaluation-harness's
conventions against lssar downstream, FlexAttention's formulation), while the kernels under them
are checked in every build (test_python_package.py, test_downstream.sh, test_attention). A
sanitizer build's liblssar.so does not load into Python at all.
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("BUILD", "build")
VENV = os.environ.get("LSSAR_VENV_TORCH2", os.path.join(ROOT, ".venv-torch2"))
PYTHON = os.path.join(VENV, "bin", "python")


class Checks:
    def __init__(self, name):
        self.name, self.passed, self.failed = name, 0, 0

    def check(self, cond, what, detail=""):
        if cond:
            self.passed += 1
            print("ok - " + what)
        else:
            self.failed += 1
            print("not ok - %s %s" % (what, detail))
        sys.stdout.flush()
        return cond

    def finish(self):
        print("%s: %d passed, %d failed" % (self.name, self.passed, self.failed))
        sys.exit(1 if self.failed else 0)

    def inner_done(self):
        print("inner: %d,%d" % (self.passed, self.failed))


def skip_reason():
    """Why this build does not run the torch2 tests, or None."""
    path = os.path.join(ROOT, BUILD, "build-flags")
    flags = open(path).read() if os.path.exists(path) else ""
    if "-fsanitize=" in flags:
        return "a sanitizer build's liblssar.so does not load into Python; the default build runs these checks"
    if "-march=native" in flags:
        return "the NATIVE=1 build: these checks are above the C kernels, and the default build runs them"
    return None


def outer(checks, script, env=None, needs_lib=True):
    """Skip, or make the environment and run `script --inner` in it; then finish."""
    why = skip_reason()
    if why:
        print("skip - " + why)
        checks.finish()
    r = subprocess.run(["bash", os.path.join(ROOT, "scripts", "deps.sh"), "--torch2"], capture_output=True, text=True)
    if not checks.check(r.returncode == 0, "the environment %s (scripts/deps.sh --torch2)" % VENV, (r.stdout + r.stderr)[-1500:]):
        checks.finish()
    lib = os.path.join(ROOT, BUILD, "liblssar.so")
    if needs_lib and not checks.check(os.path.exists(lib), "%s is built" % lib):
        checks.finish()
    home = tempfile.mkdtemp(prefix="lssar_torch2_")
    e = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"), LSSAR_LIB=lib, BUILD=BUILD,
             LSSAR_BIN=os.path.abspath(os.environ.get("LSSAR_BIN", os.path.join(ROOT, BUILD, "lssar"))),
             # nothing from the network: Hugging Face offline, caches in a fresh folder
             HF_HOME=os.path.join(home, "hf"), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
             TORCHINDUCTOR_CACHE_DIR=os.path.join(home, "inductor"), TMPDIR=home, PYTHONWARNINGS="ignore", TQDM_DISABLE="1")
    e.update(env or {})
    r = subprocess.run([PYTHON, os.path.abspath(script), "--inner"], cwd=home, capture_output=True, text=True, env=e)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr[-3000:])
    for line in r.stdout.splitlines():
        if line.startswith("inner: "):
            p, f = line[7:].split(",")
            checks.passed += int(p)
            checks.failed += int(f)
            break
    else:
        checks.check(False, "the checks in %s ran to their end" % VENV, "exit %d" % r.returncode)
    subprocess.run(["rm", "-rf", home])
    checks.finish()


def main(checks, script, inner, **kw):
    if "--inner" in sys.argv:
        try:
            inner(checks)
        except Exception:   # noqa: BLE001 - reported as a failure by the outer run
            import traceback
            traceback.print_exc()
            checks.failed += 1
        checks.inner_done()
    else:
        outer(checks, script, **kw)
