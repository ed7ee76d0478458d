#!/usr/bin/env python3
"""The CUDA engine against Hugging Face transformers at a real size (GPU machine only).

Builds a random checkpoint with the exact config of a Qwen3 size (default Qwen3-8B) with transformers, saves it with
save_pretrained (bf16 safetensors shards, the layout users download), then computes with transformers in bf16 on the
GPU and with `qwen3 --backend cuda` on the same files:
  * last-position logits for prompts of several lengths: max|diff| / max|ref| and the argmax agreement per position;
  * a greedy continuation: tokens until the first divergence, with both engines' top-2 logits at that step.
Weights follow tests/gen_golden.py's recipe (unit-variance linear outputs, norm weights in [0.5, 1.5)), so logits
spread over several units as in a trained model instead of the near-uniform output of the default init.

    python3 tests/e2e/e2e_transformers.py --qwen3 build/bin/qwen3 --workdir /tmp/qwen3-8b-random --out $OUT
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import torch

SIZES = {
    "qwen3-8b": dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
                     num_key_value_heads=8, tie_word_embeddings=False),
    "qwen3-0.6b": dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                       num_key_value_heads=8, tie_word_embeddings=True),
}


def build_checkpoint(size, workdir, seed):
    from transformers import Qwen3Config, Qwen3ForCausalLM
    config = Qwen3Config(vocab_size=151936, head_dim=128, max_position_embeddings=40960, rms_norm_eps=1e-6,
                         rope_parameters={"rope_type": "default", "rope_theta": 1e6}, attention_bias=False,
                         bos_token_id=151643, eos_token_id=151645, **SIZES[size])
    torch.manual_seed(seed)
    with torch.device("cuda"):
        model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    g = torch.Generator(device="cuda").manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g, device="cuda"))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=g, device="cuda"))
            elif "lm_head" in name:
                p.copy_(torch.randn(p.shape, generator=g, device="cuda") * (2.5 / math.sqrt(p.shape[1])))
            else:
                p.copy_(torch.randn(p.shape, generator=g, device="cuda") / math.sqrt(p.shape[1]))
    model.generation_config.eos_token_id = None
    model.save_pretrained(workdir, safe_serialization=True)
    return model


def top2(logits):
    v, i = torch.topk(logits.float(), 2)
    return [[int(i[0]), float(v[0])], [int(i[1]), float(v[1])]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--qwen3", required=True)
    ap.add_argument("--workdir", default="/tmp/qwen3-random")
    ap.add_argument("--size", default="qwen3-8b", choices=sorted(SIZES))
    ap.add_argument("--lengths", default="16,128,512,2048")
    ap.add_argument("--greedy", type=int, default=64)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    model = build_checkpoint(args.size, args.workdir, args.seed)
    print(f"checkpoint saved in {time.time() - t0:.1f}s", flush=True)
    model.eval()
    gen = torch.Generator().manual_seed(args.seed)
    lengths = [int(x) for x in args.lengths.split(",")]
    prompts = [torch.randint(0, 151936, (n,), generator=gen).tolist() for n in lengths]
    ref = []
    with torch.no_grad():
        for ids in prompts:
            logits = model(torch.tensor([ids], device="cuda")).logits[0]
            ref.append({"last": logits[-1].float().cpu(), "argmax": logits.argmax(-1).cpu().tolist()})
        greedy_prompt = prompts[0]
        out = model.generate(torch.tensor([greedy_prompt], device="cuda"), max_new_tokens=args.greedy,
                             do_sample=False, output_scores=True, return_dict_in_generate=True, eos_token_id=None,
                             pad_token_id=0)
        hf_tokens = out.sequences[0, len(greedy_prompt):].tolist()
        hf_scores = [s[0].float().cpu() for s in out.scores]
    del model
    torch.cuda.empty_cache()
    print(f"transformers done at {time.time() - t0:.1f}s", flush=True)

    prompts_path = os.path.join(args.out, "e2e_prompts.json")
    with open(prompts_path, "w") as f:
        json.dump(prompts, f)
    ours = json.loads(subprocess.run([args.qwen3, "logits", "--backend", "cuda", "--model", args.workdir,
                                      "--prompts-json", prompts_path, "--json"], check=True, capture_output=True,
                                     text=True).stdout)
    run = subprocess.run([args.qwen3, "run", "--backend", "cuda", "--model", args.workdir, "--prompt-ids",
                          ",".join(map(str, greedy_prompt)), "--max-tokens", str(args.greedy), "--temperature", "0",
                          "--ignore-eos", "--print-ids"], check=True, capture_output=True, text=True)
    our_tokens = [int(x) for x in run.stdout.split()]
    print(f"engine done at {time.time() - t0:.1f}s ({run.stderr.strip()})", flush=True)

    report = {"size": args.size, "lengths": lengths, "prompts": []}
    for n, r, o in zip(lengths, ref, ours):
        mine = torch.tensor([float("nan") if v is None else v for v in o["logits"]])
        rel = float((mine - r["last"]).abs().max() / r["last"].abs().max())
        agree = sum(int(a == b) for a, b in zip(o["argmax"], r["argmax"])) / n
        report["prompts"].append({"T": n, "rel_max_diff": rel, "argmax_agreement": agree,
                                  "last_argmax_ours": int(mine.argmax()), "last_argmax_hf": int(r["last"].argmax())})
    first_divergence = next((i for i, (a, b) in enumerate(zip(our_tokens, hf_tokens)) if a != b), None)
    greedy = {"steps": args.greedy, "identical": our_tokens == hf_tokens, "first_divergence": first_divergence}
    if first_divergence is not None:
        i = first_divergence
        greedy["hf_top2"] = top2(hf_scores[i])
        ctx = greedy_prompt + hf_tokens[:i]
        with open(prompts_path, "w") as f:
            json.dump([ctx], f)
        o = json.loads(subprocess.run([args.qwen3, "logits", "--backend", "cuda", "--model", args.workdir,
                                       "--prompts-json", prompts_path, "--json"], check=True, capture_output=True,
                                      text=True).stdout)[0]
        greedy["ours_top2_on_hf_context"] = top2(torch.tensor(o["logits"]))
        greedy["ours_token"], greedy["hf_token"] = our_tokens[i], hf_tokens[i]
    report["greedy"] = greedy
    with open(os.path.join(args.out, "e2e_report.json"), "w") as f:
        json.dump(report, f, indent=1)
    print("e2e vs transformers (bf16, GPU):")
    for p in report["prompts"]:
        print(f"  T={p['T']:5d}  logits max|diff|/max|ref| {p['rel_max_diff']:.3e}  argmax agreement "
              f"{100 * p['argmax_agreement']:.1f}%  last argmax ours/hf {p['last_argmax_ours']}/{p['last_argmax_hf']}")
    print(f"  greedy {args.greedy} tokens: identical={greedy['identical']} first divergence={first_divergence}")
    if first_divergence is not None:
        print(f"    hf top2 {greedy['hf_top2']}  ours on hf context {greedy['ours_top2_on_hf_context']}")


if __name__ == "__main__":
    sys.exit(main())
