#!/usr/bin/env python3
"""downstream_torch_check.py - check `lssar downstream --requests-out FILE` against PyTorch.

    /usr/bin/python3 tests/downstream_torch_check.py MODEL REQUESTS.jsonl [--tol 1e-4]
                     [--encoder data/gpt2/encoder.json]

For every scored request (one JSON line: ids, nscore, ll, greedy, context, continuation) it runs
scripts/torch_load.py's reference model in float64 on ids[:-1] and sums the log-softmax of the last
nscore targets. Passes when |ll_lssar - ll_torch| <= tol * max(1, |ll_torch|) for every request:
absolute below 1 nat and relative above, because lssar computes the model in float32 and a
log-likelihood is a sum over tokens of values near 10 nats, so its float32 rounding grows with
its size. Also checks the greedy flag (every scored target is the float64 argmax) and, with
--encoder, the tokenization convention: the scored tokens decode to the continuation (when it was
not truncated) and the rest decode to a suffix of the context (or to <|endoftext|> for an empty
one). Prints the worst errors; exit 0 on success, 1 on a mismatch.
(Not named test_*.py: tests/run.sh runs those on their own; tests/test_downstream.sh calls this.)
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))


def byte_decoder():
    """GPT-2's byte <-> unicode table, inverted (as in OpenAI's encoder.py)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("requests")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--encoder", default=None)
    a = ap.parse_args()
    import torch
    import torch.nn.functional as F
    from torch_load import load_model
    model = load_model(a.model)          # float64
    dec = None
    if a.encoder:
        enc = json.load(open(a.encoder, encoding="utf-8"))
        inv = {v: k for k, v in enc.items()}
        bd = byte_decoder()
        dec = lambda ids: bytes(bd[ch] for i in ids for ch in inv[i]).decode("utf-8", errors="replace")
    worst_abs = worst_rel = 0.0
    n = bad = bad_greedy = bad_tok = 0
    with open(a.requests, encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            ids, k = r["ids"], r["nscore"]
            x = torch.tensor(ids[:-1], dtype=torch.int64).view(1, -1, 1)
            with torch.no_grad():
                lp = F.log_softmax(model(x)[0][0], dim=-1)      # (T, V) float64
            T = len(ids) - 1
            tgt = torch.tensor(ids[T - k + 1:], dtype=torch.int64)
            rows = lp[T - k:T]
            ll = float(rows.gather(1, tgt.view(-1, 1)).sum())
            greedy = bool((rows.argmax(dim=1) == tgt).all())
            err = abs(r["ll"] - ll)
            worst_abs = max(worst_abs, err)
            worst_rel = max(worst_rel, err / max(1.0, abs(ll)))
            n += 1
            if err > a.tol * max(1.0, abs(ll)):
                bad += 1
                if bad <= 5:
                    print("mismatch %s doc %s idx %s: lssar %.10g torch %.10g" % (r["task"], r["doc_id"], r["idx"], r["ll"], ll))
            if greedy != r["greedy"]:
                bad_greedy += 1
                if bad_greedy <= 5:
                    print("greedy flag differs %s doc %s idx %s: lssar %s torch %s" % (r["task"], r["doc_id"], r["idx"], r["greedy"], greedy))
            if dec:
                ctx = r["context"] if r["context"] else "<|endoftext|>"
                head, tail = dec(ids[:len(ids) - k]), dec(ids[len(ids) - k:])
                whole_ok = (ctx + r["continuation"]).endswith(head + tail)
                cont_ok = tail == r["continuation"] if k == r["tokens"] and len(ids) - k > 0 and ctx.endswith(head) else True
                if not (whole_ok and cont_ok):
                    bad_tok += 1
                    if bad_tok <= 5:
                        print("tokenization %s doc %s idx %s: %r + %r" % (r["task"], r["doc_id"], r["idx"], head[-40:], tail[:40]))
    print("torch float64 check: %d requests, worst |ll error| %.3g nats, worst relative %.3g (tolerance %g), "
          "%d mismatches, %d greedy-flag differences, %d tokenization differences" % (n, worst_abs, worst_rel, a.tol, bad, bad_greedy, bad_tok))
    sys.exit(0 if n > 0 and bad == 0 and bad_greedy == 0 and bad_tok == 0 else 1)


if __name__ == "__main__":
    main()
