"""transformers_fajit.py - a Hugging Face transformers model running its attention on fajit's kernels.

    pip install ./python transformers      # then, on a machine with a CUDA GPU:
    python examples/transformers_fajit.py

A small randomly initialised Mistral (sliding-window attention) is built from its config class, so nothing is
downloaded; with a real checkpoint, pass attn_implementation="fajit" to from_pretrained the same way.
"""
import torch
from transformers import AutoModelForCausalLM, MistralConfig

import fajit.transformers

fajit.transformers.register()  # "fajit" joins transformers' AttentionInterface

config = MistralConfig(vocab_size=1000, hidden_size=512, intermediate_size=1024, num_hidden_layers=4,
                       num_attention_heads=8, num_key_value_heads=2, sliding_window=64)
model = AutoModelForCausalLM.from_config(config, attn_implementation="fajit").to("cuda", torch.bfloat16).eval()

ids = torch.randint(0, 1000, (2, 200), device="cuda")
mask = torch.ones_like(ids)
mask[1, :50] = 0  # the second row is left-padded: it runs as a varlen batch
with torch.no_grad():
    logits = model(input_ids=ids, attention_mask=mask).logits
    print("logits", tuple(logits.shape), "- kernel:", fajit.last_forward())
    out = model.generate(ids[:1, :20], max_new_tokens=10, do_sample=False)
    print("generated", out[0, 20:].tolist())
