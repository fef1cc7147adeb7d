#!/usr/bin/env python3
"""test_hf.py - `lssar export/import --format hf` against Hugging Face transformers itself (pinned
in scripts/requirements.txt, run from the project's .venv): a GPT-2-shaped lssar model exported
as a folder loads with GPT2LMHeadModel.from_pretrained and gives `lssar eval`'s per-position
losses on the same windows (the logits, through the loss); import gives back every tensor bit for
bit, also from the Hub's layout (no "transformer." prefix, attention-mask buffers); configs and
models lssar cannot represent are refused with the reason. Binary: $LSSAR_BIN, else build/lssar.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.environ.get("LSSAR_VENV", os.path.join(ROOT, ".venv"))
LSSAR = os.path.abspath(os.environ.get("LSSAR_BIN", os.path.join(ROOT, "build", "lssar")))
passed = failed = 0


def check(cond, name, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print("ok - " + name)
    else:
        failed += 1
        print("not ok - %s %s" % (name, detail))


def run(*args):
    r = subprocess.run([LSSAR] + list(args), capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items() if k != "__metadata__"}, h


def inner():
    import numpy as np
    import torch
    import transformers
    print("# transformers %s, torch %s" % (transformers.__version__, torch.__version__))
    tmp = tempfile.mkdtemp(prefix="lssar_hf_")
    shard = os.path.join(tmp, "s.bin")
    # byte-level text (this project's docs): a model learns its byte statistics in a few steps
    text = os.path.join(tmp, "text.txt")
    with open(text, "w") as f:
        for name in ("README.md", "docs/attention.md", "docs/RESULTS.md"):
            f.write(open(os.path.join(ROOT, name), encoding="utf-8").read())
    run("tokenize", "--tokenizer", "byte", "--in", text, "--out", shard)
    M = ["--data", shard, "--layers", "2", "--heads", "2", "--dim", "32", "--seq", "32", "--batch", "8", "--steps", "100",
         "--lr", "1e-2", "--threads", "1", "--quiet", "--no-plot"]
    rc1, _ = run("train", *M, "--pos", "learned", "--attn", "softmax", "--out", os.path.join(tmp, "gpt2"))
    rc2, _ = run("train", *M, "--attn", "softmax", "--rope-base", "500", "--out", os.path.join(tmp, "rope"))
    rc3, _ = run("train", *M, "--attn", "lssar", "--out", os.path.join(tmp, "lssar"))
    rc4, _ = run("train", *M, "--attn", "ssmax", "--pos", "learned", "--untied", "--out", os.path.join(tmp, "ssmax"))
    check(rc1 == 0 and rc2 == 0 and rc3 == 0 and rc4 == 0,
          "four tiny models trained (softmax learned, softmax RoPE base 500, lssar RoPE, ssmax learned untied)")
    hf = os.path.join(tmp, "hf")
    rc, out = run("export", "--format", "hf", "--model", os.path.join(tmp, "gpt2"), "--out", hf)
    check(rc == 0 and os.path.exists(os.path.join(hf, "config.json")), "export --format hf", out)

    def same_losses(cls, folder, run_dir, T, what):
        """transformers' model from folder against `lssar eval` of run_dir, per position, at T."""
        model = cls.from_pretrained(folder).eval()
        W = 8
        rc, out = run("eval", "--model", run_dir, "--data", shard, "--seq", str(T), "--batches", "1", "--batch", str(W),
                      "--per-position", "--json", os.path.join(tmp, "ev.json"), "--threads", "1")
        ev = json.load(open(os.path.join(tmp, "ev.json")))["results"][0]
        tok = np.fromfile(shard, dtype="<u2", offset=1024).astype(np.int64)
        win = torch.tensor(np.stack([tok[k * T:k * T + T + 1] for k in range(W)]))
        with torch.no_grad():
            logits = model(win[:, :-1]).logits.double()
        per = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), win[:, 1:].reshape(-1),
                                                reduction="none").view(W, T).mean(0)
        ours = torch.tensor(ev["per_position"], dtype=torch.float64)
        err = float((per - ours).abs().max() / ours.abs().max())
        # (a model still near uniform, ln 257 = 5.55, would hide a weight in the wrong layout)
        check(rc == 0 and err < 1e-4 and ev["loss"] < 4.5, "%s.from_pretrained gives lssar eval's per-position losses %s (max rel. "
              "diff %.1e; loss %.3f, far from uniform)" % (cls.__name__, what, err, ev["loss"]), out)

    # transformers loads it, and its losses are lssar's on the same windows
    same_losses(transformers.GPT2LMHeadModel, hf, os.path.join(tmp, "gpt2"), 32, "at T = 32")

    # import: back to the same tensors, from our layout and from the Hub's
    rc, out = run("import", "--format", "hf", "--in", hf, "--out", os.path.join(tmp, "back"))
    a, _ = tensors(os.path.join(tmp, "gpt2", "model.safetensors"))
    b, _ = tensors(os.path.join(tmp, "back", "model.safetensors")) if rc == 0 else ({}, None)
    check(rc == 0 and a == b, "import --format hf: every tensor bit-identical", out)
    hub = os.path.join(tmp, "hub")
    os.makedirs(hub)
    x, _ = tensors(os.path.join(hf, "model.safetensors"))
    named = {k[len("transformer."):]: v for k, v in x.items()}
    named["h.0.attn.bias"] = struct.pack("<4f", 1, 0, 1, 1)   # an old file's causal-mask buffer
    hdr, off = {}, 0
    for k, v in named.items():
        shape = [2, 2] if k == "h.0.attn.bias" else None
        hdr[k] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(v)]}
        off += len(v)
    _, xh = tensors(os.path.join(hf, "model.safetensors"))
    for k in named:
        if k != "h.0.attn.bias":
            hdr[k]["shape"] = xh["transformer." + k]["shape"]
    hj = json.dumps(hdr).encode()
    hj += b" " * (-len(hj) % 8)
    with open(os.path.join(hub, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"".join(named.values()))
    cfg = json.load(open(os.path.join(hf, "config.json")))
    json.dump(cfg, open(os.path.join(hub, "config.json"), "w"))
    rc, out = run("import", "--format", "hf", "--in", hub, "--out", os.path.join(tmp, "back2"))
    c, _ = tensors(os.path.join(tmp, "back2", "model.safetensors")) if rc == 0 else ({}, None)
    check(rc == 0 and a == c, "import of the Hub's layout (no prefix, a mask buffer): the same tensors", out)

    # RoPE: GPT-NeoX, also beyond the training length
    nx = os.path.join(tmp, "neox")
    rc, out = run("export", "--format", "hf", "--model", os.path.join(tmp, "rope"), "--out", nx)
    check(rc == 0 and json.load(open(os.path.join(nx, "config.json")))["model_type"] == "gpt_neox", "export of a RoPE model: a GPT-NeoX folder", out)
    same_losses(transformers.GPTNeoXForCausalLM, nx, os.path.join(tmp, "rope"), 32, "at T = 32")
    same_losses(transformers.GPTNeoXForCausalLM, nx, os.path.join(tmp, "rope"), 64, "at T = 64 (2x)")
    rc, out = run("import", "--format", "hf", "--in", nx, "--out", os.path.join(tmp, "back3"))
    a3, _ = tensors(os.path.join(tmp, "rope", "model.safetensors"))
    b3, _ = tensors(os.path.join(tmp, "back3", "model.safetensors")) if rc == 0 else ({}, None)
    check(rc == 0 and a3 == b3, "import of the GPT-NeoX folder: every tensor bit-identical", out)

    # the other kinds: lssar's own model over lssar.attention (modeling_lssar.py, trust_remote_code)
    for name in ("lssar", "ssmax"):
        d = os.path.join(tmp, "hf-" + name)
        rc, out = run("export", "--format", "hf", "--model", os.path.join(tmp, name), "--out", d)
        cfg_l = json.load(open(os.path.join(d, "config.json"))) if rc == 0 else {}
        check(rc == 0 and cfg_l.get("model_type") == "lssar" and os.path.exists(os.path.join(d, "modeling_lssar.py")),
              "export of the %s model: config.json with auto_map and modeling_lssar.py" % name, out)
        auto = lambda folder: transformers.AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)   # noqa: E731
        auto.from_pretrained = auto
        auto.__name__ = "AutoModelForCausalLM(trust_remote_code=True)"
        same_losses(auto, d, os.path.join(tmp, name), 32, "for %s at T = 32" % name)
        if name == "lssar":
            same_losses(auto, d, os.path.join(tmp, name), 128, "for %s at T = 128 (4x)" % name)
        rc, out = run("import", "--format", "hf", "--in", d, "--out", os.path.join(tmp, "back-" + name))
        a4, _ = tensors(os.path.join(tmp, name, "model.safetensors"))
        b4, _ = tensors(os.path.join(tmp, "back-" + name, "model.safetensors")) if rc == 0 else ({}, None)
        check(rc == 0 and a4 == b4, "import of the %s folder: every tensor bit-identical" % name, out)

    # refusals
    cfg["activation_function"] = "gelu"
    json.dump(cfg, open(os.path.join(hub, "config.json"), "w"))
    rc, out = run("import", "--format", "hf", "--in", hub, "--out", os.path.join(tmp, "y"))
    check(rc == 1 and "gelu_new" in out, "a config with exact GELU is refused, naming it", out)
    rc, out = run("import", "--format", "hf", "--in", os.path.join(tmp, "nowhere"), "--out", os.path.join(tmp, "y"))
    check(rc == 1 and "config.json" in out, "a folder without config.json is refused", out)
    print("inner: %d,%d" % (passed, failed))


def outer():
    r = subprocess.run([os.path.join(VENV, "bin", "python"), "-c", "import transformers"], capture_output=True, text=True)
    check(r.returncode == 0, "transformers imports in %s (scripts/deps.sh installs it)" % VENV, r.stderr[-500:])
    flags = os.path.join(ROOT, os.environ.get("BUILD", "build"), "build-flags")
    if r.returncode == 0 and "-fsanitize=" in (open(flags).read() if os.path.exists(flags) else ""):
        print("skip - a sanitizer build's liblssar.so does not load into Python (the lssar package's models)")
    elif r.returncode == 0:
        # the lssar package (modeling_lssar.py's attention) from its install command
        m = subprocess.run(["make", "-s", "--no-print-directory", "BUILD=" + os.environ.get("BUILD", "build"), "python"], cwd=ROOT,
                           capture_output=True, text=True)
        check(m.returncode == 0, "make python (modeling_lssar.py runs on the lssar package)", (m.stdout + m.stderr)[-1500:])
        home = tempfile.mkdtemp(prefix="lssar_hf_home_")   # transformers' module cache for trust_remote_code
        r = subprocess.run([os.path.join(VENV, "bin", "python"), os.path.abspath(__file__), "--inner"], capture_output=True, text=True,
                           env=dict(os.environ, LSSAR_BIN=LSSAR, TRANSFORMERS_OFFLINE="1", HF_HUB_OFFLINE="1", HF_HOME=home))
        sys.stdout.write(r.stdout)
        sys.stderr.write(r.stderr[-3000:])
        global passed, failed
        for line in r.stdout.splitlines():
            if line.startswith("inner: "):
                p, f = line[7:].split(",")
                passed, failed = passed + int(p), failed + int(f)
                break
        else:
            check(False, "the transformers checks ran to their end", "exit %d" % r.returncode)
    print("test_hf: %d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    if "--inner" in sys.argv:
        try:
            inner()
        except Exception:   # noqa: BLE001 - reported as a failure by the outer run
            import traceback
            traceback.print_exc()
            print("inner: %d,%d" % (passed, failed + 1))
    else:
        outer()
