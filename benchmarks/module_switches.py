"""How often one default ``captum_iba.explain`` moves between the package's
modules, and through how many (issue 50, item 6: the IBA core in fewer,
clearer rooms).

Builds a tiny random BERT classifier from its config and a WordPiece
tokenizer over a handful of words (no download, no fine-tune), runs one
``captum_iba.explain`` untraced (imports and caches), then traces a second one
with :func:`sys.setprofile`: every Python call or return event whose frame
belongs to a ``captum_iba`` module is compared with the last such frame, and
counts as a switch when their modules differ (frames outside the package -
torch, transformers, Captum - are skipped). Prints the switches and the
distinct modules of the package the call ran code in, for the traced call and
for the first one (which imports the modules it uses).

The figures count calls, not time: they do not depend on the CPU. Run it
against another checkout with ``PYTHONPATH``::

    PYTHONPATH=$PWD python benchmarks/module_switches.py
    PYTHONPATH=/path/to/other/checkout python benchmarks/module_switches.py
    PYTHONPATH=$PWD python benchmarks/module_switches.py --list   # per module
"""

import argparse
import collections
import sys
import warnings
from typing import Any, Callable, Counter, Dict, Tuple

PACKAGE = "captum_iba"
WORDS = "[PAD] [UNK] [CLS] [SEP] [MASK] the film was a fine and dull plot".split()
TEXT = "the film was a fine plot"


def tiny_classifier() -> Tuple[Any, Any]:
    """A tiny random BERT classifier (2 layers, hidden 16) and its tokenizer."""
    import torch
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        BertTokenizerFast,
    )

    torch.manual_seed(0)
    tok = BertTokenizerFast(vocab={w: i for i, w in enumerate(WORDS)})
    cfg = BertConfig(
        vocab_size=len(WORDS), hidden_size=16, num_hidden_layers=2,
        num_attention_heads=2, intermediate_size=32, num_labels=2,
    )  # fmt: skip
    return BertForSequenceClassification(cfg).eval(), tok


def traced(call: Callable[[], Any]) -> Dict[str, Any]:
    """Runs ``call`` under :func:`sys.setprofile`; the switches between the
    package's modules and the modules it ran code in (with their calls)."""
    state: Dict[str, Any] = {"last": None, "switches": 0}
    calls: Counter[str] = collections.Counter()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        name = frame.f_globals.get("__name__", "")
        if name != PACKAGE and not name.startswith(PACKAGE + "."):
            return
        if event == "call":
            calls[name] += 1
        if state["last"] is not None and state["last"] != name:
            state["switches"] += 1
        state["last"] = name

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return {"switches": state["switches"], "modules": calls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="calls per module")
    args = parser.parse_args()
    import captum_iba

    model, tok = tiny_classifier()

    def explain() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return captum_iba.explain(TEXT, model, tokenizer=tok, model_name="tiny")

    print(f"captum_iba from {captum_iba.__file__}")
    first = traced(explain)  # imports the modules it uses
    for label, found in (("first call", first), ("one call", traced(explain))):
        modules = found["modules"]
        print(
            f"{label}: {found['switches']} switches between {PACKAGE} modules, "
            f"{len(modules)} modules touched"
        )
        if args.list:
            for name, count in sorted(modules.items()):
                print(f"  {count:6d}  {name}")


if __name__ == "__main__":
    main()
