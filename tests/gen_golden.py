#!/usr/bin/env python3
"""Builds small random Qwen3 checkpoints and records Hugging Face transformers' outputs for them.

Run on a machine with torch and transformers (the GPU machine has transformers 5.17):
    python3 tests/gen_golden.py --out tests/data/golden

Each case directory gets what save_pretrained writes (config.json, generation_config.json, model.safetensors, bf16)
and expected.json: transformers' float32 forward on those same bf16 weights (weights upcast exactly):
  prompts: [{ids, last_logits, argmax, min_top2_gap}]  for prompts of 1, 7, 64 and 300 tokens
  greedy:  {prompt, tokens, min_top2_gap}               a 48-token greedy continuation (generate, do_sample=False)
Prompts whose top-2 logit gap falls under MIN_GAP anywhere are redrawn, so an argmax comparison never hinges on
float rounding. With --text-case the real-vocabulary checkpoint for the tokenizer end-to-end test is built too.
"""
import argparse
import json
import math
import os
import random
import shutil
import sys

import torch

MIN_GAP = 2e-4  # fp32 engines agree to ~1e-6 of the logit scale; a gap this large cannot flip


def make_config(c):
    from transformers import Qwen3Config
    extra = {}
    if c.get("rope_scaling"):
        extra["rope_parameters"] = dict(c["rope_scaling"], rope_theta=c["rope_theta"])
    else:
        extra["rope_parameters"] = {"rope_type": "default", "rope_theta": c["rope_theta"]}
    return Qwen3Config(
        vocab_size=c["vocab"], hidden_size=c["hidden"], intermediate_size=c["inter"],
        num_hidden_layers=c["layers"], num_attention_heads=c["heads"], num_key_value_heads=c["kv_heads"],
        head_dim=c["head_dim"], max_position_embeddings=c["max_pos"], rms_norm_eps=1e-6,
        tie_word_embeddings=c["tied"], bos_token_id=None, eos_token_id=None, pad_token_id=None,
        attention_bias=False, use_sliding_window=False, **extra)


def randomize(model, seed):
    """Weights large enough that logits spread over several units (so argmax is well separated) and norm weights
    that are not all ones."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            elif "lm_head" in name:
                p.copy_(torch.randn(p.shape, generator=g) * (2.5 / math.sqrt(p.shape[1])))
            else:  # linear layers: unit-variance outputs for unit-variance inputs
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))


def top2_gap(logits):
    top = torch.topk(logits.double(), 2, dim=-1).values
    return (top[..., 0] - top[..., 1]).min().item()


def build_case(out_dir, name, c, seed, device):
    from transformers import Qwen3ForCausalLM
    torch.manual_seed(seed)
    case_dir = os.path.join(out_dir, name)
    shutil.rmtree(case_dir, ignore_errors=True)
    model = Qwen3ForCausalLM(make_config(c))
    randomize(model, seed)
    model = model.to(torch.bfloat16)
    model.generation_config.eos_token_id = None
    model.save_pretrained(case_dir, safe_serialization=True)

    # Reload from disk: exactly the bf16 weights our engine will read, upcast to fp32.
    model = Qwen3ForCausalLM.from_pretrained(case_dir, dtype=torch.float32, attn_implementation="eager").to(device)
    model.eval()
    rng = random.Random(seed)
    expected = {"case": name, "config": c, "transformers": __import__("transformers").__version__,
                "torch": torch.__version__, "device": str(device), "prompts": []}
    with torch.no_grad():
        for length in (1, 7, 64, 300):
            for attempt in range(50):
                ids = [rng.randrange(c["vocab"]) for _ in range(length)]
                logits = model(torch.tensor([ids], device=device)).logits[0].float().cpu()
                gap = top2_gap(logits)
                if gap >= MIN_GAP:
                    break
            else:
                sys.exit(f"{name}: no prompt of length {length} with a clear argmax")
            expected["prompts"].append({"ids": ids, "last_logits": logits[-1].tolist(),
                                        "argmax": logits.argmax(-1).tolist(), "min_top2_gap": gap})
        for attempt in range(50):
            prompt = [rng.randrange(c["vocab"]) for _ in range(7)]
            out = model.generate(torch.tensor([prompt], device=device), max_new_tokens=48, do_sample=False,
                                 output_scores=True, return_dict_in_generate=True, eos_token_id=None,
                                 pad_token_id=0)
            tokens = out.sequences[0, len(prompt):].tolist()
            gap = min(top2_gap(s[0].float().cpu()) for s in out.scores)
            if len(tokens) == 48 and gap >= MIN_GAP:
                break
        else:
            sys.exit(f"{name}: no greedy prompt with clear argmaxes")
        expected["greedy"] = {"prompt": prompt, "tokens": tokens, "min_top2_gap": gap}
    with open(os.path.join(case_dir, "expected.json"), "w") as f:
        json.dump(expected, f)
    print(f"{name}: ok, min gaps {[round(p['min_top2_gap'], 4) for p in expected['prompts']]}, greedy {gap:.4f}")


CASES = {
    # tied embeddings, GQA ratio 1, head_dim 64, heads x head_dim == hidden
    "tied_gqa1_hd64": dict(vocab=1024, hidden=256, inter=384, layers=2, heads=4, kv_heads=4, head_dim=64,
                           max_pos=512, tied=True, rope_theta=1e6),
    # untied, GQA 2, head_dim 128, heads x head_dim (512) != hidden (256)
    "untied_gqa2_hd128": dict(vocab=1024, hidden=256, inter=384, layers=2, heads=4, kv_heads=2, head_dim=128,
                              max_pos=512, tied=False, rope_theta=1e6),
    # tied, GQA 4, head_dim 64, 8 x 64 = 512 != hidden 192, three layers
    "tied_gqa4_hd64_wide_q": dict(vocab=1024, hidden=192, inter=320, layers=3, heads=8, kv_heads=2, head_dim=64,
                                  max_pos=512, tied=True, rope_theta=1e6),
    # untied, GQA 4, head_dim 128, YaRN rope scaling (original context 128, so 300-token prompts use it)
    "untied_gqa4_hd128_yarn": dict(vocab=1024, hidden=128, inter=256, layers=2, heads=4, kv_heads=1, head_dim=128,
                                   max_pos=512, tied=False, rope_theta=10000.0,
                                   rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                                 "original_max_position_embeddings": 128}),
}


def build_text_case(out_dir, tokenizer_dir, device, seed=2024):
    """Real vocabulary (151936) and the real tokenizer: the expectation for `qwen3 run --prompt ... --temperature 0
    --max-tokens 40 --ignore-eos` (chat template applied, thinking on and off), decoded by HF tokenizers."""
    from transformers import AutoTokenizer, Qwen3ForCausalLM
    c = dict(vocab=151936, hidden=32, inter=64, layers=2, heads=2, kv_heads=1, head_dim=64, max_pos=4096,
             tied=True, rope_theta=1e6)
    name = "text_real_vocab"
    case_dir = os.path.join(out_dir, name)
    shutil.rmtree(case_dir, ignore_errors=True)
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(make_config(c))
    randomize(model, seed)
    model = model.to(torch.bfloat16)
    model.generation_config.eos_token_id = None
    model.save_pretrained(case_dir, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tokenizer_dir, f), case_dir)
    tok = AutoTokenizer.from_pretrained(case_dir)
    model = Qwen3ForCausalLM.from_pretrained(case_dir, dtype=torch.float32, attn_implementation="eager").to(device)
    runs = []
    prompts = ["Explain rotary position embeddings", "Write a haiku about GPUs. 日本語も少し。",
               "What is 17 * 23? Answer briefly 🙂"]
    with torch.no_grad():
        for text in prompts:
            for thinking in (True, False):
                rendered = tok.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                   add_generation_prompt=True, enable_thinking=thinking)
                ids = tok(rendered, add_special_tokens=False)["input_ids"]
                out = model.generate(torch.tensor([ids], device=device), max_new_tokens=40, do_sample=False,
                                     output_scores=True, return_dict_in_generate=True, eos_token_id=None,
                                     pad_token_id=0)
                gen = out.sequences[0, len(ids):].tolist()
                gap = min(top2_gap(s[0].float().cpu()) for s in out.scores)
                runs.append({"prompt": text, "enable_thinking": thinking, "rendered": rendered, "prompt_ids": ids,
                             "generated_ids": gen, "min_top2_gap": gap,
                             "text": tok.decode(gen, skip_special_tokens=False),
                             "text_skip_special": tok.decode(gen, skip_special_tokens=True)})
            # the raw (no template) form
            ids = tok(text, add_special_tokens=False)["input_ids"]
            out = model.generate(torch.tensor([ids], device=device), max_new_tokens=40, do_sample=False,
                                 output_scores=True, return_dict_in_generate=True, eos_token_id=None, pad_token_id=0)
            gen = out.sequences[0, len(ids):].tolist()
            runs.append({"prompt": text, "raw": True, "prompt_ids": ids, "generated_ids": gen,
                         "min_top2_gap": min(top2_gap(s[0].float().cpu()) for s in out.scores),
                         "text": tok.decode(gen, skip_special_tokens=False),
                         "text_skip_special": tok.decode(gen, skip_special_tokens=True)})
    with open(os.path.join(case_dir, "expected.json"), "w") as f:
        json.dump({"case": name, "config": c, "runs": runs}, f, ensure_ascii=False, indent=1)
    # The tokenizer files are the shared fixture: keep one copy in the repo (tests/data/tokenizer).
    for f in ("tokenizer.json", "tokenizer_config.json"):
        os.remove(os.path.join(case_dir, f))
    print(f"{name}: ok, gaps {[round(r['min_top2_gap'], 4) for r in runs]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/golden")
    ap.add_argument("--device", default="cpu", help="cpu keeps fp32 exact (no TF32 anywhere)")
    ap.add_argument("--text-case", default=None, help="directory with tokenizer.json: also build text_real_vocab")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    os.makedirs(args.out, exist_ok=True)
    for i, (name, c) in enumerate(CASES.items()):
        build_case(args.out, name, c, seed=1000 + i, device=torch.device(args.device))
    if args.text_case:
        build_text_case(os.path.dirname(args.out.rstrip("/")) or ".", args.text_case, torch.device(args.device))


if __name__ == "__main__":
    main()
