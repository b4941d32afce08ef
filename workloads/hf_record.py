"""Hugging Face Llama programs, unmodified, for `tracelens record` (issue #26): a training loop and a
`generate()` loop, built from a small `LlamaConfig` with random weights (nothing downloaded).

    PYTHONPATH=. python3 -m tracelens record -o OUT --name hf_llama_train -- python3 workloads/hf_record.py train
    PYTHONPATH=. python3 -m tracelens record -o OUT --name hf_llama_generate --step-on forward \
        -- python3 workloads/hf_record.py generate

`train`: AdamW (fused on CUDA) steps on random token batches, bf16 weights on CUDA, loss from `labels`
(one optimizer step = one step). `generate`: greedy `model.generate()` of `--new-tokens` tokens after a
`--prompt`-token prompt (each forward call, the prefill and then one per token, is one step with
`--step-on forward`); `min_new_tokens` keeps random weights from stopping early at an EOS token.
`--small` (or HF_RECORD_SMALL=1) shrinks everything for a CPU smoke run. `--model gpt2`: a GPT2LMHeadModel
(12 layers, hidden 768, 12 heads, vocab 50257, SDPA attention) instead of Llama; `--compile`: the model wrapped in
`torch.compile` (default mode), as a user would compile it. The script knows nothing of the profiler.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM


def build(small: bool, device: torch.device, model_name: str = "llama") -> torch.nn.Module:
    if model_name == "gpt2":
        return _gpt2(small, device)
    config = LlamaConfig(
        vocab_size=1024 if small else 32000,
        hidden_size=128 if small else 2048,
        intermediate_size=256 if small else 5632,
        num_hidden_layers=2 if small else 8,
        num_attention_heads=4 if small else 16,
        num_key_value_heads=2 if small else 8,
        max_position_embeddings=4096,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    return model.to(device=device, dtype=dtype)


def _gpt2(small: bool, device: torch.device) -> torch.nn.Module:
    config = GPT2Config(
        vocab_size=1024 if small else 50257,
        n_positions=1024,
        n_embd=128 if small else 768,
        n_layer=2 if small else 12,
        n_head=4 if small else 12,
    )
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    return model.to(device=device, dtype=dtype)


def train(args: argparse.Namespace, device: torch.device) -> None:
    model = build(args.small, device, args.model).train()
    cuda = device.type == "cuda"
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)
    forward = torch.compile(model) if args.compile else model
    batch, seq = (2, 64) if args.small else (args.batch, args.seq)
    vocab = model.config.vocab_size
    tokens = torch.randint(3, vocab, (args.steps, batch, seq), device=device)
    start = time.perf_counter()
    for step in range(args.steps):
        out = forward(input_ids=tokens[step], labels=tokens[step])
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    if cuda:
        torch.cuda.synchronize()
    print(f"hf_record train: {args.steps} steps of {batch}x{seq} tokens, {time.perf_counter() - start:.2f} s")


def generate(args: argparse.Namespace, device: torch.device) -> None:
    model = build(args.small, device, args.model).eval()
    batch, prompt, new = (2, 16, 24) if args.small else (args.batch, args.prompt, args.new_tokens)
    vocab = model.config.vocab_size
    torch.manual_seed(1)
    input_ids = torch.randint(3, vocab, (batch, prompt), device=device)
    mask = torch.ones_like(input_ids)
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(
            input_ids=input_ids, attention_mask=mask, max_new_tokens=new, min_new_tokens=new, do_sample=False
        )
    if device.type == "cuda":
        torch.cuda.synchronize()
    print(f"hf_record generate: {tuple(out.shape)} tokens, {time.perf_counter() - start:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=("train", "generate"))
    parser.add_argument(
        "--small",
        action="store_true",
        default=os.environ.get("HF_RECORD_SMALL") == "1",
        help="tiny sizes for a CPU smoke run (also HF_RECORD_SMALL=1)",
    )
    parser.add_argument("--model", choices=("llama", "gpt2"), default="llama")
    parser.add_argument("--compile", action="store_true", help="train: the model wrapped in torch.compile")
    parser.add_argument("--steps", type=int, default=20, help="train: optimizer steps")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=1024, help="train: tokens per sequence")
    parser.add_argument("--prompt", type=int, default=128, help="generate: prompt tokens")
    parser.add_argument("--new-tokens", type=int, default=48, help="generate: tokens generated")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    (train if args.mode == "train" else generate)(args, device)


if __name__ == "__main__":
    main()
