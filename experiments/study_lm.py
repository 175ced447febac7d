"""The causal LM a study explains, and the tokenizer a study may put in place
of the model's (the LLM studies' ``--tokenizer``).

AttnLRP runs under transformers 4.x (lxt 2.1 does not import under 5), whose
GGUF tokenizer adds a BOS token that transformers 5's does not; given the
tokenizer saved under transformers 5 (``tokenizer.save_pretrained``, its
``tokenizer_class`` set to ``PreTrainedTokenizerFast``) the prompts, answers
and random floor come out the same in both environments (docs/llm.rst).
"""

from typing import Any, Optional, Tuple

#: The help of a study's ``--tokenizer``.
TOKENIZER_HELP = (
    "a tokenizer folder replacing the model's (attnlrp runs under transformers "
    "4.x, whose GGUF tokenizer adds a BOS token: give it the tokenizer saved "
    "under transformers 5, with tokenizer_class PreTrainedTokenizerFast)"
)


def study_lm(model: str, tokenizer: Optional[str] = None) -> Tuple[Any, Any]:
    """The causal LM ``model`` (any name
    :func:`~captum_iba.app.causal_lm.load_causal_lm` takes) and its tokenizer,
    or the one saved in the folder ``tokenizer`` instead."""
    from captum_iba.app.causal_lm import load_causal_lm

    lm, tok = load_causal_lm(model)
    if tokenizer:  # the same tokens under another transformers (AttnLRP's)
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(tokenizer)
    return lm, tok
