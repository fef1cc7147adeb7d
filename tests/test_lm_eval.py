#!/usr/bin/env python3
"""test_lm_eval.py - lm-evaluation-harness scores an lssar model through its transformers export,
and gets what `lssar downstream` computes for the same requests; in .venv-torch2
(lm_eval 0.4.13, transformers, torch 2.13; tests/torch2_env.py), offline:
  - a tiny GPT-2-tokenizer model with LSSAR attention (p = 15) is trained here in seconds and
    exported with `lssar export --format hf` (modeling_lssar.py over lssar.attention, loaded with
    trust_remote_code), with GPT-2's tokenizer files beside it (scripts/fetch-gpt2.sh's, as
    docs/DOWNSTREAM.md says to put them);
  - a local multiple-choice task: a task YAML and a JSONL file written here (the `json` dataset
    builder reads it; nothing comes from the Hub); one choice has a non-ASCII character, where
    characters and UTF-8 bytes differ for acc_norm;
  - lm_eval.simple_evaluate(model="hf", ...) scores it; `lssar downstream` scores the same
    requests (context, " " + choice), written in its request format;
  - every request's log-likelihood agrees, the greedy flags are equal, and so are acc and
    acc_norm.
Runs in the default build only (tests/torch2_env.py says why).
"""
import json
import os
import random
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch2_env  # noqa: E402

C = torch2_env.Checks("test_lm_eval")
WHO = ["The king", "The old man", "She", "He", "The boy", "The woman", "They", "The sailor"]
VERB = ["went to the", "looked at the", "walked along the", "thought about the", "opened the door of the"]
WHAT = ["sea", "city", "river", "house", "church", "ship", "garden", "market"]
TAIL = ["and the sun was warm.", "and saw her mother.", "because the day was long.", "and sang a song.",
        "with his wife and children."]


def run(*args):
    r = subprocess.run([os.environ["LSSAR_BIN"]] + list(args), capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def inner(c):
    import lm_eval
    import torch
    import transformers
    from lm_eval.tasks import TaskManager
    print("# lm_eval %s, transformers %s, torch %s" % (lm_eval.__version__ if hasattr(lm_eval, "__version__") else "?",
                                                     transformers.__version__, torch.__version__))
    tmp = os.getcwd()
    gpt2 = os.path.join(os.environ["LSSAR_DATA"], "gpt2")
    r = random.Random(7)
    with open("corpus.txt", "w") as f:
        for _ in range(1500):
            f.write("%s %s %s %s\n" % (r.choice(WHO), r.choice(VERB), r.choice(WHAT), r.choice(TAIL)))
    rc1, o1 = run("tokenize", "--in", "corpus.txt", "--out", "train.bin")
    rc2, o2 = run("train", "--data", "train.bin", "--vocab", "50257", "--layers", "1", "--heads", "2", "--dim", "32",
                  "--seq", "64", "--batch", "4", "--steps", "60", "--lr", "5e-3", "--attn", "lssar", "--p", "15",
                  "--out", "model", "--quiet", "--no-plot", "--threads", "1")
    if not c.check(rc1 == 0 and rc2 == 0, "a tiny GPT-2-tokenizer LSSAR model trained", o1 + o2):
        return
    rc, out = run("export", "--format", "hf", "--model", "model", "--out", "hf")
    if not c.check(rc == 0 and json.load(open("hf/config.json"))["model_type"] == "lssar", "export --format hf", out):
        return
    # GPT-2's tokenizer beside the model: encoder.json and vocab.bpe are transformers' vocab.json and merges.txt
    shutil.copy(os.path.join(gpt2, "encoder.json"), "hf/vocab.json")
    shutil.copy(os.path.join(gpt2, "vocab.bpe"), "hf/merges.txt")
    json.dump({"tokenizer_class": "GPT2Tokenizer", "model_max_length": 64}, open("hf/tokenizer_config.json", "w"))

    # the task: contexts from the training templates, four choices, one of them right
    docs = []
    for d in range(8):
        ctx = "%s %s" % (r.choice(WHO), r.choice(VERB))
        good = "%s %s" % (r.choice(WHAT), r.choice(TAIL))
        bad = [r.choice(WHAT), "%s %s" % (r.choice(TAIL), r.choice(WHAT)), "table of numbers"]
        choices = bad[:d % 4] + [good] + bad[d % 4:]
        docs.append({"context": ctx, "choices": choices, "label": d % 4})
    docs[3]["choices"][0] = "café by the sea."   # characters (acc_norm's divisor) differ from UTF-8 bytes
    with open("tiny.jsonl", "w") as f:
        for x in docs:
            f.write(json.dumps(x) + "\n")
    os.makedirs("tasks")
    with open("tasks/lssar_tiny.yaml", "w") as f:
        f.write("task: lssar_tiny\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: %s\n"
                "test_split: test\noutput_type: multiple_choice\ndoc_to_text: \"{{context}}\"\n"
                "doc_to_choice: \"{{choices}}\"\ndoc_to_target: label\nmetric_list:\n"
                "  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n"
                "  - metric: acc_norm\n    aggregation: mean\n    higher_is_better: true\n" % os.path.join(tmp, "tiny.jsonl"))

    args = "pretrained=%s,trust_remote_code=True,dtype=float32" % os.path.join(tmp, "hf")
    res = lm_eval.simple_evaluate(model="hf", model_args=args,
                                  tasks=["lssar_tiny"], task_manager=TaskManager(include_path=os.path.join(tmp, "tasks")),
                                  log_samples=True, batch_size=4, device="cpu")
    harness = {}
    for s in res["samples"]["lssar_tiny"]:
        for i, (ll, greedy) in enumerate(s["filtered_resps"]):
            harness[(s["doc_id"], i)] = (float(ll), bool(greedy))
    hr = res["results"]["lssar_tiny"]
    c.check(len(harness) == 32, "lm_eval.simple_evaluate scored the 32 requests of the local task (acc %.3f, acc_norm %.3f)"
            % (hr["acc,none"], hr["acc_norm,none"]))

    # the same requests, scored by lssar downstream
    with open("requests.jsonl", "w") as f:
        for d, x in enumerate(docs):
            for i, ch in enumerate(x["choices"]):
                f.write(json.dumps({"doc_id": d, "idx": i, "label": x["label"],
                                    "request": {"context": x["context"], "continuation": " " + ch}}) + "\n")
    rc, out = run("downstream", "--model", "model", "--tasks", "tiny=requests.jsonl", "--json", "ds.json",
                  "--requests-out", "ours.jsonl", "--threads", "1", "--quiet")
    if not c.check(rc == 0, "lssar downstream on the same requests", out):
        return
    ours = {}
    for line in open("ours.jsonl"):
        x = json.loads(line)
        ours[(x["doc_id"], x["idx"])] = (x["ll"], bool(x["greedy"]), x["tokens"])
    # Both sides run the model in float32 (lssar's C layers and OpenBLAS; PyTorch's layers around
    # the same attention kernel) and add m per-token log-probabilities ~ -log p of up to ~10 nats.
    # Each float32 side is within 1e-4 max(1, |ll|) of float64 (test_downstream.sh's bound: the
    # rounding of a sum grows with its size), so the two differ by at most twice that.
    worst, worst_rel, bad = 0.0, 0.0, []
    for key, (ll, greedy) in sorted(harness.items()):
        if key not in ours:
            bad.append("%s missing in lssar's" % (key,))
            continue
        d = abs(ll - ours[key][0])
        worst, worst_rel = max(worst, d), max(worst_rel, d / max(1.0, abs(ours[key][0])))
        if d > 2e-4 * max(1.0, abs(ours[key][0])) or greedy != ours[key][1]:
            bad.append("%s: harness %.6f %s, lssar %.6f %s" % (key, ll, greedy, ours[key][0], ours[key][1]))
    c.check(not bad and len(ours) == len(harness),
            "every request's log-likelihood within 2e-4 max(1, |ll|) of lssar downstream's (worst %.1e nats, relative %.1e; "
            "continuations of %d to %d tokens), greedy flags equal"
            % (worst, worst_rel, min(v[2] for v in ours.values()), max(v[2] for v in ours.values())), "; ".join(bad[:5]))
    ds = json.load(open("ds.json"))["results"][0]
    c.check(abs(ds["acc"] - hr["acc,none"]) < 1e-12 and abs(ds["acc_norm"] - hr["acc_norm,none"]) < 1e-12,
            "acc and acc_norm equal (harness %.4f / %.4f, lssar %.4f / %.4f)"
            % (hr["acc,none"], hr["acc_norm,none"], ds["acc"], ds["acc_norm"]))


def outer():
    r = subprocess.run(["bash", os.path.join(torch2_env.ROOT, "scripts", "fetch-gpt2.sh"), "--quiet"], cwd=torch2_env.ROOT,
                       capture_output=True, text=True)
    data = os.path.join(torch2_env.ROOT, os.environ.get("LSSAR_DATA", "data"))
    if torch2_env.skip_reason() is None and \
            not C.check(r.returncode == 0 and os.path.exists(os.path.join(data, "gpt2", "encoder.json")),
                        "the GPT-2 tokenizer files (scripts/fetch-gpt2.sh)", (r.stdout + r.stderr)[-800:]):
        C.finish()
    torch2_env.main(C, __file__, inner, env={"LSSAR_DATA": data})


if __name__ == "__main__":
    if "--inner" in sys.argv:
        torch2_env.main(C, __file__, inner)
    else:
        outer()
