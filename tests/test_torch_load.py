#!/usr/bin/env python3
"""test_torch_load.py - models trained by `lssar train` load in PyTorch (scripts/torch_load.py)
and give the same per-position losses as `lssar eval`, for every attention kind and position
scheme, 2 token channels, and a length beyond training. Skips (0 passed, 0 failed) without torch.
Binary: $LSSAR_BIN, else build/lssar."""
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
LSSAR = os.environ.get("LSSAR_BIN", os.path.join(ROOT, "build", "lssar"))
passed = failed = 0


def check(cond, name, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok - " + name)
    else:
        failed += 1
        print("not ok - %s %s" % (name, detail))


def write_shard(path, n, channels, vocab, seed):
    r = random.Random(seed)
    toks = [r.randrange(vocab) for _ in range(n * channels)]
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", 20240520, 1, n, channels, *([0] * 252)))
        f.write(struct.pack("<%dH" % len(toks), *toks))


def run(*args):
    p = subprocess.run([LSSAR, *args, "--threads", "1"], capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError("lssar %s failed (%d): %s" % (args[0], p.returncode, p.stderr[-500:]))
    return p.stdout


def main():
    try:
        import numpy  # noqa: F401
        import torch  # noqa: F401
    except ImportError as e:
        print("test_torch_load: skipped (%s)" % e)
        print("test_torch_load: 0 passed, 0 failed")
        return 0
    import torch_load
    if not os.access(LSSAR, os.X_OK):
        print("test_torch_load: %s is not built" % LSSAR)
        print("test_torch_load: 0 passed, 1 failed")
        return 1
    tmp = tempfile.mkdtemp(prefix="lssar_torch_")
    try:
        write_shard(os.path.join(tmp, "c1.bin"), 2000, 1, 24, 1)
        write_shard(os.path.join(tmp, "c2.bin"), 2000, 2, 24, 2)
        cases = [  # name, train flags, eval length
            ("lssar rope", ["--attn", "lssar", "--p", "15"], 32),
            ("lssar rope beyond training length", ["--attn", "lssar", "--p", "15"], 64),
            ("lssa none", ["--attn", "lssa", "--pos", "none"], 32),
            ("softmax learned", ["--attn", "softmax", "--pos", "learned"], 32),
            ("ssmax rope untied", ["--attn", "ssmax", "--untied"], 32),
            ("lssar p 4, 2 channels, untied", ["--attn", "lssar", "--p", "4", "--untied"], 32),
        ]
        for i, (name, flags, T) in enumerate(cases):
            data = os.path.join(tmp, "c2.bin" if "channels" in name else "c1.bin")
            out = os.path.join(tmp, "run%d" % i)
            run("train", "--data", data, "--out", out, "--layers", "2", "--heads", "2", "--dim", "32",
                "--vocab", "24", "--seq", "32", "--batch", "4", "--steps", "3", "--lr", "1e-2", "--quiet", *flags)
            js = os.path.join(tmp, "e%d.json" % i)
            run("eval", "--model", out, "--data", data, "--seq", str(T), "--batches", "1", "--batch", "6",
                "--per-position", "--json", js)
            ref = json.load(open(js))["results"][0]
            model = torch_load.load_model(out)
            loss, per, nw = torch_load.eval_windows(model, data, T, 6)
            worst = max(abs(a - b) for a, b in zip(per, ref["per_position"]))
            check(nw == ref["windows"] and abs(loss - ref["loss"]) < 1e-4 * max(1, abs(loss)) and worst < 5e-4,
                  name, "torch %.6f lssar %.6f, worst position diff %.2e" % (loss, ref["loss"], worst))
        # the plain reader and the metadata
        tensors, meta = torch_load.load_safetensors(os.path.join(tmp, "run4", "model.safetensors"))
        cfg = torch_load.config_from_metadata(meta)
        check(cfg["attn"] == "ssmax" and cfg["tied"] == 0 and cfg["step"] == 3 and "h.1.attn.ssmax_s" in tensors
              and tensors["wte.0"].shape == (24, 32) and tensors["lm_head.0"].shape == (24, 32),
              "metadata and tensor names", str(cfg))
        try:
            import safetensors  # noqa: F401
            t2, m2 = torch_load.load_safetensors_any(os.path.join(tmp, "run4", "model.safetensors"))
            check(m2 == meta and all((t2[k] == tensors[k]).all() for k in tensors), "safetensors package agrees")
        except ImportError:
            print("(safetensors package not installed: plain reader only)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("test_torch_load: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
