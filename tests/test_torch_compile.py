#!/usr/bin/env python3
"""test_torch_compile.py - lssar.attention as a registered PyTorch op (torch.library.custom_op,
PyTorch 2.4 and later; python/lssar/functional.py), in .venv-torch2 (torch 2.13;
tests/torch2_env.py), on the CPU:
  - torch.library.opcheck passes for the forward op (schema, fake implementation, autograd
    registration, AOT dispatch with dynamic shapes) for lssar, ssmax (with its scales) and sigmoid;
  - the op gives bit for bit what the autograd.Function of older PyTorch gives (the same C calls),
    forward and gradients;
  - torch.compile(fullgraph=True) of a model that calls lssar.attention (two CausalSelfAttention
    layers) traces it as one graph with the op inside (torch._dynamo.explain: no graph break), and
    forward and gradients equal eager: bit for bit with the aot_eager backend (the same
    operations), and within 1e-4 relative with inductor, the spec's float32 bound (inductor
    fuses and reorders the float32 products and sums around the op - RoPE, the projections,
    GELU - so values differ by float32 rounding, about 1e-7 relative, which lssar's p = 15
    re-weighting amplifies up to p-fold, and a parameter's gradient, a sum over positions with
    cancellations, more);
  - dynamic shapes: one compiled function (dynamic=True) at two lengths matches eager;
  - a kind the library refuses fails while tracing with the library's message.
Runs in the default build only (tests/torch2_env.py says why).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch2_env  # noqa: E402

C = torch2_env.Checks("test_torch_compile")


def inner(c):
    import torch
    import lssar
    from lssar import functional as F
    print("# torch %s, lssar %s (%s)" % (torch.__version__, lssar.__version__, lssar.library))
    if not c.check(F.CUSTOM_OP and hasattr(torch.ops.lssar, "attention_fwd"),
                   "torch %s: lssar.attention is the custom op torch.ops.lssar.attention_fwd" % torch.__version__):
        return

    def rel(a, b):
        return float((a - b).norm() / b.norm())

    g = torch.Generator().manual_seed(37)
    B, H, T, D = 2, 2, 19, 16
    q, k, v = (torch.randn(B, T, H, D, generator=g, requires_grad=True) for _ in range(3))   # the op's layout
    s = torch.tensor([0.43, 0.7], requires_grad=True)
    for kind, sv, ln in (("lssar", None, "train"), ("ssmax", s, "train"), ("sigmoid", None, "row")):
        r = torch.library.opcheck(F._op_fwd, (q, k, v, sv, kind, 15.0, ln, T, 0))
        c.check(all(x == "SUCCESS" for x in r.values()), "torch.library.opcheck of lssar::attention_fwd (%s)" % kind, str(r))

    # the custom op and the autograd.Function: the same C calls, the same bits
    dy = torch.randn(B, T, H, D, generator=g)
    for kind, sv in (("lssar", None), ("ssmax", s)):
        outs = []
        for fn in (lambda *a: F._op_fwd(*a)[0], F._Attention.apply):
            leaves = [t.detach().clone().requires_grad_() for t in (q, k, v) + ((sv,) if sv is not None else ())]
            y = fn(*leaves[:3], leaves[3] if sv is not None else None, kind, 15.0, "train", T, 0)
            (y * dy).sum().backward()
            outs.append([y.detach()] + [t.grad for t in leaves])
        c.check(all(torch.equal(a, b) for a, b in zip(*outs)),
                "%s: the custom op's forward and gradients equal the autograd.Function's bit for bit" % kind)

    # a model with the op inside, compiled whole
    class Net(torch.nn.Module):
        def __init__(self, kind):
            super().__init__()
            self.a1 = lssar.CausalSelfAttention(32, 2, kind=kind)
            self.a2 = lssar.CausalSelfAttention(32, 2, kind=kind)
            self.out = torch.nn.Linear(32, 8)

        def forward(self, x):
            x = x + self.a1(x)
            x = x + self.a2(torch.nn.functional.gelu(x))
            return self.out(x)

    def run(model, x):
        for p in model.parameters():
            p.grad = None
        xx = x.detach().clone().requires_grad_()
        y = model(xx)
        y.square().sum().backward()
        return [y.detach(), xx.grad] + [p.grad.clone() for p in model.parameters()]

    torch.manual_seed(3)
    x = torch.randn(2, 24, 32)
    for kind in ("lssar", "ssmax"):
        net = Net(kind)
        torch._dynamo.reset()
        ex = torch._dynamo.explain(net)(x)
        ops = [str(n.target) for gm in ex.graphs for n in gm.graph.nodes if n.op == "call_function"]
        n_op = sum("lssar.attention_fwd" in o for o in ops)
        c.check(ex.graph_count == 1 and ex.graph_break_count == 0 and n_op == 2,
                "%s model: torch._dynamo traces one graph, no break, with the op twice in it (graphs %d, breaks %d, op %d)"
                % (kind, ex.graph_count, ex.graph_break_count, n_op), str(ex.break_reasons)[:500])
        eager = run(net, x)
        for backend, bound in (("aot_eager", 0.0), ("inductor", 1e-4)):
            torch._dynamo.reset()
            try:
                got = run(torch.compile(net, fullgraph=True, backend=backend), x)
            except Exception as err:   # noqa: BLE001 - the failure is the result
                c.check(False, "%s model: torch.compile(fullgraph=True, backend=%s)" % (kind, backend), repr(err)[:1500])
                continue
            errs = [rel(a, b) for a, b in zip(got, eager)]
            c.check(max(errs) <= bound, "%s model: torch.compile(fullgraph=True, backend=%s): forward and every gradient "
                    "%s eager (worst rel. %.1e; output %.1e)" % (kind, backend, "equal" if bound == 0 else "within %g of" % bound,
                                                                 max(errs), errs[0]))

    # dynamic shapes: one compiled function at two lengths
    torch._dynamo.reset()
    fn = torch.compile(lambda a, b, cc: lssar.attention(a, b, cc, kind="lssar"), fullgraph=True, dynamic=True,
                       backend="aot_eager")
    ok, worst = True, 0.0
    for TT in (20, 33):
        a, b, cc = (torch.randn(1, 2, TT, 16, generator=g, requires_grad=True) for _ in range(3))
        y = fn(a, b, cc)
        gy = torch.autograd.grad(y.sum(), (a, b, cc))
        y0 = lssar.attention(a, b, cc, kind="lssar")
        g0 = torch.autograd.grad(y0.sum(), (a, b, cc))
        worst = max([worst, rel(y.detach(), y0.detach())] + [rel(u, w) for u, w in zip(gy, g0)])
    c.check(worst == 0.0, "dynamic=True: one compiled function at T = 20 and 33, forward and gradients equal eager (%.1e)"
            % worst)

    # a refused kind fails while tracing, with the library's message
    torch._dynamo.reset()
    try:
        bad = torch.compile(lambda a: lssar.attention(a, a, a, kind="flash"), fullgraph=True, backend="aot_eager")
        bad(torch.randn(1, 2, 8, 16))
        c.check(False, "kind 'flash' under torch.compile: refused", "nothing raised")
    except Exception as err:   # noqa: BLE001 - the message is what is checked
        c.check("use softmax" in str(err), "kind 'flash' under torch.compile: refused with the library's message",
                str(err)[:500])


if __name__ == "__main__":
    torch2_env.main(C, __file__, inner)
