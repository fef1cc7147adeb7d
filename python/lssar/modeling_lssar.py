"""modeling_lssar.py - lssar's GPT as a Hugging Face transformers model, for the attention kinds
transformers has no architecture for (ssmax, lssa, lssar, sigmoid, relu; and positions "none").

`lssar export --format hf` writes this file beside config.json and model.safetensors (lssar's own
tensor names, which the modules below reproduce), so that

    AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)

builds the model; its attention is lssar.attention (the C kernels, or the fused CUDA kernels on a
GPU), so the package `lssar` must be installed (`make python`). The blocks are lssar's
(src/model/gpt.h): pre-LayerNorm (eps 1e-5), GELU with the tanh approximation, learned positions,
RoPE or none, tied or untied head, one token channel.
"""
import torch
from transformers import PretrainedConfig, PreTrainedModel
from transformers.modeling_outputs import CausalLMOutput

import lssar


class LssarConfig(PretrainedConfig):
    model_type = "lssar"

    def __init__(self, vocab_size=257, n_embd=128, n_layer=2, n_head=2, max_seq=128, pos="rope", attn="lssar", p=15.0,
                 rope_base=10000.0, len_norm="train", temp_d=0, tied=True, **kwargs):
        self.vocab_size, self.n_embd, self.n_layer, self.n_head = vocab_size, n_embd, n_layer, n_head
        self.max_seq, self.pos, self.attn, self.p = max_seq, pos, attn, p
        self.rope_base, self.len_norm, self.temp_d, self.tied = rope_base, len_norm, temp_d, tied
        kwargs.setdefault("tie_word_embeddings", False)   # the tied head is wte itself (forward)
        super().__init__(**kwargs)


class _MLP(torch.nn.Module):
    def __init__(self, C):
        super().__init__()
        self.c_fc, self.c_proj = torch.nn.Linear(C, 4 * C), torch.nn.Linear(4 * C, C)

    def forward(self, x):
        return self.c_proj(torch.nn.functional.gelu(self.c_fc(x), approximate="tanh"))


class _Block(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg.n_embd
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(C, eps=1e-5), torch.nn.LayerNorm(C, eps=1e-5)
        self.attn = lssar.CausalSelfAttention(C, cfg.n_head, kind=cfg.attn, p=cfg.p,
                                              rope_base=cfg.rope_base if cfg.pos == "rope" else None,
                                              len_norm=cfg.len_norm, train_len=cfg.max_seq, temp_d=cfg.temp_d)
        self.mlp = _MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class LssarForCausalLM(PreTrainedModel):
    config_class = LssarConfig

    def __init__(self, config):
        super().__init__(config)
        C, V = config.n_embd, config.vocab_size
        self.wte = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(V, C))])     # "wte.0"
        if config.pos == "learned":
            self.wpe = torch.nn.Parameter(torch.zeros(config.max_seq, C))
        self.h = torch.nn.ModuleList([_Block(config) for _ in range(config.n_layer)])
        self.ln_f = torch.nn.LayerNorm(C, eps=1e-5)
        if not config.tied:
            self.lm_head = torch.nn.ParameterList([torch.nn.Parameter(torch.zeros(V, C))])   # "lm_head.0"
        self.post_init()

    def _init_weights(self, module):
        pass   # the weights come from the checkpoint

    def forward(self, input_ids, labels=None, **kwargs):
        B, T = input_ids.shape
        x = self.wte[0][input_ids]
        if self.config.pos == "learned":
            x = x + self.wpe[:T][None]
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        logits = x @ (self.wte[0] if self.config.tied else self.lm_head[0]).T
        loss = None
        if labels is not None:
            loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1))
        return CausalLMOutput(loss=loss, logits=logits)
