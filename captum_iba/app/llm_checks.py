"""A causal LM's request checked before its weights load.

De-quantising a GGUF model takes half a minute and more; every refusal that
does not need the weights comes before them:

* :func:`lm_config` - the model's layer count and positions, from its
  ``config.json`` or a GGUF file's header (:func:`gguf_header`: its
  key-value pairs only, never a tensor);
* :func:`check_lm_request` - the request's layers against that (out of
  range, ``iba-deletion`` at the last layer), ``attnlrp`` without
  ``lxt``, a prior fitted on data (a causal LM's route has no corpus to fit
  it on), a method that needs a fitted explainer where the caller has none
  (a user's method declaring the ``explainer`` resource);
* :func:`answer_budget` - a prompt and its answer against the positions,
  from the tokenizer alone (loaded before the model): the longest answer
  the positions leave room for, or a refusal.
"""

import struct
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any, BinaryIO, Dict, Optional, Sequence, Tuple, Union

from captum_iba.app.errors import CLIError
from captum_iba.attr.kinds import CAUSAL_LM
from captum_iba.request import MethodRequest

__all__ = [
    "answer_budget",
    "check_lm_request",
    "gguf_header",
    "lm_config",
    "prompt_lengths",
]

#: GGUF value types: struct format of the fixed-size ones (8: a string,
#: 9: an array).
_SCALARS = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
    10: "<Q", 11: "<q", 12: "<d",
}  # fmt: skip


def _read(f: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize(fmt)
    data = f.read(size)
    if len(data) != size:
        raise ValueError("the file ends inside its header")
    return struct.unpack(fmt, data)[0]


def _value(f: BinaryIO, value_type: int) -> Any:
    """One value of GGUF type ``value_type`` (an array's items are skipped: None)."""
    if value_type in _SCALARS:
        return _read(f, _SCALARS[value_type])
    if value_type == 8:
        return f.read(_read(f, "<Q")).decode("utf-8", "replace")
    if value_type != 9:
        raise ValueError(f"unknown value type {value_type}")
    item, n = _read(f, "<I"), _read(f, "<Q")
    if item in _SCALARS:
        f.seek(n * struct.calcsize(_SCALARS[item]), 1)
    else:
        for _ in range(n):
            _value(f, item)
    return None


def gguf_header(path: Union[str, Path]) -> Dict[str, Any]:
    """The scalar key-value pairs of a GGUF file's header (``general.*``,
    ``<arch>.block_count``, ``<arch>.context_length``, ...), read without
    touching a tensor: a fraction of a second where the ``gguf`` package's
    reader indexes every tensor and array item first.

    Raises:
        ~captum_iba.app.models.ModelLoadError: For a file that is no GGUF
            file or whose header is damaged.
    """
    from captum_iba.app.models import ModelLoadError

    out: Dict[str, Any] = {}
    try:
        with open(Path(path).expanduser(), "rb") as f:
            if f.read(4) != b"GGUF":
                raise ValueError("it does not start with 'GGUF'")
            _read(f, "<I")  # version
            _read(f, "<Q")  # tensors
            for _ in range(_read(f, "<Q")):
                key = f.read(_read(f, "<Q")).decode("utf-8", "replace")
                out[key] = _value(f, _read(f, "<I"))
    except (OSError, ValueError, struct.error, MemoryError) as err:
        raise ModelLoadError(f"cannot read the GGUF file {path}: {err}") from None
    return out


def lm_config(path: Union[str, Path]) -> Any:
    """A causal LM's configuration before any weights: a folder's or hub
    id's ``config.json``, or for a GGUF file a configuration made of its
    header (``model_type``, ``num_hidden_layers``,
    ``max_position_embeddings`` and, for a model with sliding layers,
    ``sliding_window``).

    Raises:
        ~captum_iba.app.models.ModelLoadError: Naming the model, when it
            cannot be found or read.
    """
    from captum_iba.app.causal_lm import causal_lm_source
    from captum_iba.app.models import model_config

    name, keywords = causal_lm_source(path)
    if "gguf_file" not in keywords:
        return model_config(name)
    header = gguf_header(Path(name) / keywords["gguf_file"])
    arch = header.get("general.architecture")
    window = header.get(f"{arch}.attention.sliding_window")
    return SimpleNamespace(
        model_type=arch,
        architectures=None,
        quantization_config={"quant_method": "gguf"},  # (as transformers says)
        num_hidden_layers=header.get(f"{arch}.block_count"),
        max_position_embeddings=header.get(f"{arch}.context_length"),
        # a header gives the window of a model with sliding layers, not which
        sliding_window=window,
        layer_types=("sliding_attention",) if window else None,
    )


def check_lm_request(
    request: MethodRequest, config: Any, cli: bool = True, explainer: bool = False
) -> None:
    """The request's layers against the configuration
    (:func:`~captum_iba.app.models.check_request_layers`: the range, and
    ``iba-deletion`` at the last layer), ``attnlrp`` where ``lxt``
    does not import, a method whose optional package (its registry entry's
    ``package``: at2, context_cite) is not installed, a prior fitted on data
    (there is no corpus to fit it on) and, unless the caller gives one
    (``explainer``: a prompt task's corpus run, or ``explain`` from the
    cache), a method that needs a fitted explainer - all before any weights
    load.

    Raises:
        ~captum_iba.app.errors.CLIError: Naming the option or the method.
    """
    from captum_iba._utils.common import import_problem
    from captum_iba.app.command_parts import _priors_named
    from captum_iba.app.models import check_request_layers
    from captum_iba.registry import PRIORS, method_entry

    check_request_layers(request, config, cli)
    for method in request.methods:
        entry = method_entry(method, CAUSAL_LM)
        if "explainer" in entry.facts.get("uses", ()) and not explainer:
            raise CLIError(
                f"{method} needs a fitted explainer (the resource 'explainer'), "
                "which the commands give a classifier's methods only: give it in "
                f"Python (method_options={{{method!r}: {{'explainer': ...}}}})"
            )
        package, install = entry.facts.get("package", (None, ""))
        problem = None if package is None else import_problem(package)
        if problem:  # issue 90, item 15: a broken import too, before the weights
            raise CLIError(
                f"{method} needs its package {package}, which is {problem}: {install}"
            )
        module = str(entry.target).partition(":")[0]
        if module.endswith(".attnlrp"):
            from captum_iba.evaluation.attnlrp import attnlrp_available

            ok, why = attnlrp_available()
            if not ok:
                raise CLIError(f"{method}: {why}")
    fitted = [p for p in _priors_named(request) if isinstance(p, str) and p in PRIORS]
    fitted = [p for p in fitted if PRIORS.load(p).needs_data]
    if fitted:
        label = "--prior" if cli else "prior="
        others = [p for p in PRIORS.names() if not PRIORS.load(p).needs_data]
        raise CLIError(
            f"{label} {fitted[0]}: a prior fitted on data needs the model's "
            "training corpus, which a causal LM's route does not have; choose "
            f"another prior ({', '.join(others)})"
        )


def answer_budget(
    prompts: Sequence[int],
    positions: Optional[int],
    max_new_tokens: int,
    target: Optional[int] = None,
    option: str = "--max-new-tokens",
) -> int:
    """The longest answer to generate for prompts of ``prompts`` tokens,
    checked before any weights load: ``max_new_tokens``, or less where the
    model's ``positions`` leave less room (said in a warning); an answer's
    last token is never read, so a prompt of ``n`` tokens leaves room for
    ``positions - n + 1``.

    Args:
        prompts (Sequence[int]): Each prompt's length in tokens (chat
            template included).
        positions (int, optional): The model's positions (None: unknown).
        max_new_tokens (int): The longest answer asked for.
        target (int, optional): The given answer's length in tokens.
        option (str): How ``max_new_tokens`` was given, for the messages.

    Raises:
        ~captum_iba.app.errors.CLIError: For a prompt that leaves no room
            for an answer, or a given answer that does not fit.
    """
    if not positions:
        return max_new_tokens
    longest = max(prompts)
    room = positions - longest + 1
    if target is not None and target > room:
        raise CLIError(
            f"the prompt ({longest} tokens) and the answer given ({target} "
            f"tokens) need {longest + target - 1} positions, more than the "
            f"model's {positions}: shorten them"
        )
    if room < 1:
        raise CLIError(
            f"the prompt has {longest} tokens, more than the model's {positions} "
            "positions: shorten it"
        )
    if target is None and max_new_tokens > room:
        warnings.warn(
            f"{option} {max_new_tokens}: the prompt ({longest} tokens) leaves "
            f"room for {room} answer tokens in the model's {positions} "
            f"positions; the answer stops there",
            UserWarning,
            stacklevel=3,
        )
        return room
    return max_new_tokens


def prompt_lengths(
    tokenizer: Any, prompts: Sequence[str], chat: bool
) -> Tuple[int, ...]:
    """Each prompt's length in tokens as the batch encodes it."""
    from captum_iba.attr.llm_batch import encode_prompt

    return tuple(len(encode_prompt(tokenizer, p, chat)[0]) for p in prompts)
