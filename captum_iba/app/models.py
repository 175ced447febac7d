"""Loading classifiers with Hugging Face ``from_pretrained``, with clear errors.

A model is named by a folder or a Hugging Face hub id. :func:`model_config`
reads only its configuration (cheap: arguments can be checked against it
before the weights load); :func:`load_classifier` loads tokenizer and model.
A hub id is looked up in the local Hugging Face cache first; the hub is asked
only when it can be reached, so a wrong name fails at once instead of after
a minute of retries. Every failure is a :class:`ModelLoadError` naming the
model and what to do.
"""

import json
import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, List, Optional, Tuple, Union

import torch

from captum_iba.app.checks import check_against_config, layer_kind, n_encoder_layers
from captum_iba.app.errors import CLIError
from captum_iba.app.hub import TIMEOUT, hub_reachable
from captum_iba.request import MethodRequest

__all__ = [
    "ModelLoadError",
    "check_no_missing_weights",
    "check_last_layer",
    "check_request_layers",
    "load_classifier",
    "load_label_names",
    "looks_like_hub_id",
    "model_config",
]

PathLike = Union[str, Path]

# owner/name, or a legacy one-part id such as "gpt2" or "roberta-base".
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}")
_LEGACY_ID = re.compile(r"[a-z0-9][a-z0-9._-]{1,95}")


class ModelLoadError(OSError):
    """A model or tokenizer that cannot be loaded (the message says why)."""


def looks_like_hub_id(name: str) -> bool:
    """Whether ``name`` could be a Hugging Face hub model id.

    Args:
        name (str): A ``--model`` value that is not an existing path.

    Returns:
        bool: True for ``owner/name`` and for lower-case one-part legacy ids
        with a digit or a hyphen (``gpt2``, ``bert-base-uncased``); False for
        anything else (``PATH``, ``./x``, ``~/m``, ``a/b/c``).
    """
    if name.startswith((".", "~", "/")) or "\\" in name or ".." in name:
        return False
    if _HUB_ID.fullmatch(name):
        return True
    return bool(_LEGACY_ID.fullmatch(name)) and bool(re.search(r"[-\d]", name))


def _hub_reachable(timeout: float = TIMEOUT) -> bool:
    """Whether the hub's host answers (:func:`captum_iba.app.hub.hub_reachable`)."""
    return hub_reachable(timeout)


def _source(path: PathLike) -> Tuple[str, bool]:
    """The name to load and whether only local files may be used.

    Raises:
        ModelLoadError: For a path that does not exist and is no hub id, a
            folder without ``config.json``, or a hub id that is neither in the
            local cache nor reachable.
    """
    name = str(path)
    folder = Path(name).expanduser()
    if folder.exists():
        if not (folder / "config.json").is_file():
            raise ModelLoadError(
                f"model folder {folder} has no config.json (not a Hugging Face "
                "model folder, or an incomplete one)"
            )
        return str(folder), True
    if not looks_like_hub_id(name):
        raise ModelLoadError(
            f"model {name!r} not found: no such folder, and not a Hugging Face "
            "hub id (owner/name)"
        )
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(name, local_files_only=True)
        return name, True
    except (OSError, ValueError):
        pass
    if not _hub_reachable():
        raise ModelLoadError(
            f"model {name!r} is not a folder, not in the local Hugging Face cache, "
            "and the hub cannot be reached (offline?): pass a model folder, or "
            "run once online"
        )
    return name, False


def check_finite_weights(model: Any, name: str) -> None:
    """Refuses a loaded model (classifier or causal LM) with NaN or infinite
    weights (a damaged file), before anything is explained.

    Raises:
        ModelLoadError: Naming the model, a damaged tensor and their count.
    """
    bad = [n for n, p in model.named_parameters() if not torch.isfinite(p).all()]
    if bad:
        raise ModelLoadError(
            f"model {name!r} has non-finite (NaN or inf) weights, e.g. in {bad[0]} "
            f"({len(bad)} tensors)"
        )


def check_no_missing_weights(
    info: Any, name: str, what: str, likely: str, remedy: str
) -> None:
    """Refuses a model whose folder lacks weights of its head (transformers
    initialises them at random and loads without an error): what the
    configuration could not say (a folder saved without ``architectures``
    from a model of another head, a base model) is caught here.

    Args:
        info (dict): ``from_pretrained``'s loading info
            (``output_loading_info=True``).
        name (str): The model, as the message names it.
        what (str): What it was loaded as (``"trained classifier"``).
        likely (str): What such a folder likely is.
        remedy (str): What to give instead.

    Raises:
        ModelLoadError: Naming the model and its missing weights.
    """
    missing = sorted(info.get("missing_keys") or ())
    if missing:
        raise ModelLoadError(
            f"model {name!r} is no {what}: its weights "
            f"{', '.join(missing[:4])}{' ...' if len(missing) > 4 else ''} are "
            "missing, so transformers initialised them at random and every "
            f"output would be noise ({likely}); {remedy}"
        )


def _first_line(err: BaseException) -> str:
    text = str(err).strip() or type(err).__name__
    return text.splitlines()[0]


@contextmanager
def quiet_transformers(warnings: bool = True) -> Iterator[None]:
    """No per-tensor loading bars while loading (restored afterwards).

    Args:
        warnings (bool): Keep transformers' warnings. False: errors only
            (for a load whose report the caller says in its own words).
    """
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    level = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    if not warnings:
        hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if enabled:
            hf_logging.enable_progress_bar()


def model_config(path: PathLike) -> Any:
    """The configuration of a model, read before any weights.

    Args:
        path (str or Path): A model folder or hub id.

    Returns:
        transformers.PretrainedConfig: Its configuration.

    Raises:
        ModelLoadError: Naming the model, when it cannot be found or read.
    """
    from transformers import AutoConfig

    name, local = _source(path)
    try:
        return AutoConfig.from_pretrained(name, local_files_only=local)
    except (OSError, ValueError, json.JSONDecodeError) as err:
        raise ModelLoadError(
            f"cannot read the configuration of model {name!r}: {_first_line(err)}"
        ) from None


def load_classifier(
    path: PathLike, device: Optional[Union[str, torch.device]] = None
) -> Tuple[Any, Any]:
    """A sequence classifier and its tokenizer, from a folder or hub name.

    Args:
        path (str or Path): A model folder or hub id (see :func:`model_config`).
        device (str or torch.device, optional): Where to put the model.

    Returns:
        (model, tokenizer): The model in ``eval()`` mode.

    Raises:
        ModelLoadError: Naming the model (and for a folder, what to do), when
            the tokenizer or the weights cannot be loaded, hold non-finite
            values, or miss weights (a classification head transformers
            would initialise at random).
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    name, local = _source(path)
    try:  # (missing weights are said below, in our words)
        with quiet_transformers(warnings=False):
            tokenizer = AutoTokenizer.from_pretrained(name, local_files_only=local)
            model, info = AutoModelForSequenceClassification.from_pretrained(
                name, local_files_only=local, output_loading_info=True
            )
    except Exception as err:  # transformers raises many kinds on damaged files
        raise ModelLoadError(
            f"cannot load model {name!r}: {_first_line(err)}"
            + (" (the folder is damaged or incomplete)" if local else "")
        ) from None
    check_no_missing_weights(
        info,
        name,
        "trained classifier",
        "a base model, or a causal LM's folder saved without its architectures",
        "give a model fine-tuned for classification",
    )
    check_finite_weights(model, name)
    if device is not None:
        model = model.to(device)
    return model.eval(), tokenizer


def load_label_names(dataset: str) -> List[str]:
    """The class names of a corpus (without reading it, where they are known)."""
    from captum_iba.app.data.corpora import LABEL_NAMES

    return list(LABEL_NAMES.get(dataset, ["0", "1"]))


def _layers_given(request: MethodRequest, cli: bool) -> Iterator[Tuple[str, Any]]:
    """Every layer a request names, with how it was given (for messages)."""
    if "layer" in request.options:
        yield "--layer" if cli else "layer", request.options["layer"]
    for method, options in request.method_options.items():
        if "layer" in options:
            label = f"--set {method.lower()}:layer" if cli else f"{method} layer"
            yield label, options["layer"]


#: Model types whose sequence classifier reads only the first token ([CLS])
#: of the last layer's output.
FIRST_TOKEN_HEADS = frozenset(
    {
        "albert", "bert", "camembert", "deberta", "deberta-v2", "distilbert",
        "electra", "mpnet", "roberta", "xlm-roberta",
    }
)  # fmt: skip


def check_request_layers(request: MethodRequest, config: Any, cli: bool = True) -> None:
    """The request's layer indices checked against the model's configuration
    (before any weights load; the message gives the valid range and names
    the option as the command line, or as Python code, gave it), and an IBA
    method refused at the last layer where its result can rank nothing
    (:func:`check_last_layer`)."""
    for option, layer in _layers_given(request, cli):
        check_against_config(config, layer=layer, layer_option=option)
    check_last_layer(request, config, cli)


def check_last_layer(request: MethodRequest, config: Any, cli: bool = True) -> None:
    """Refuses an IBA method at the model's last encoder layer where its
    scores are provably no ranking: ``iba-deletion`` (no layer above reads
    the tokens), and the noise methods (``IBA``, ``iba-faithful``,
    ``iba-amortized``) in a classifier that reads only the first token there
    (:data:`FIRST_TOKEN_HEADS`). A list of layers (a sweep) is not refused:
    IBA marks its rows.

    Raises:
        ~captum_iba.app.errors.CLIError: Naming the option, the method and
            the layers to choose from.
    """
    from captum_iba.registry import METHODS
    from captum_iba.request import options_of

    n = n_encoder_layers(config)
    model_type = getattr(config, "model_type", None)
    for method in request.methods if n else ():
        layer = request.values(method).get("layer")
        if "layer" not in options_of(method) or layer != n - 1:
            continue
        if isinstance(layer, bool) or not isinstance(layer, int):
            continue
        deletion = METHODS.entry(method).defaults.get("config") == "deletion"
        if not deletion and model_type not in FIRST_TOKEN_HEADS:
            continue  # a head that reads every token: IBA checks it itself
        own = (
            method in request.method_options
            and "layer" in request.method_options[method]
        )
        if cli:
            option = f"--set {method.lower()}:layer" if own else "--layer"
        else:
            option = f"{method} layer" if own else "layer"
        why = (
            "no layer above it reads the tokens, so every token gets the same score"
            if deletion
            else "its classifier reads only the first token ([CLS]) there, so no "
            "other token can change the prediction: their scores differ by noise "
            "alone"
        )
        raise CLIError(
            f"{option} {layer} is the last {layer_kind(config)} layer of this "
            f"{model_type} model "
            f"(0..{n - 1}): {method} there ranks nothing ({why}); choose "
            + ("'embeddings'" if n < 2 else f"'embeddings' or a layer in 0..{n - 2}")
        )
