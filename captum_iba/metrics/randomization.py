r"""The model-randomisation sanity check (Adebayo et al., NeurIPS 2018).

An attribution that does not change when the model's learned weights are
destroyed does not explain the model. The *cascading* randomisation of
Adebayo et al. (Section 3) re-initialises the model's weights stage by stage
from the top - the classification head, then the transformer blocks top-down,
then the embeddings - and compares, after each stage, the attributions of the
randomised model with those of the trained model by Spearman's rank
correlation (signed, and of the absolute values). A method *passes* when the
correlation falls towards 0 as the model is destroyed; one that ignores the
model keeps a correlation of 1.

* :func:`cascade_stages` - the stages of a Hugging Face-style model (the
  modules before the block stack are the embeddings, those after it the head);
* :func:`reinitialize` - one stage's re-initialisation, seeded, the way the
  model's own initialisation does it;
* :func:`cascading_randomization` - the check, on a deep copy of the model:
  the caller's model is never modified.

The attribution method is a callable (as Captum's ``infidelity`` takes a
``perturb_func``), so that this module needs no attribution code:
``explanation_func(model, input_ids, attention_mask, target) -> (B, L)``;
:func:`captum_iba.evaluation.method_explainer` builds one from a registered
method name.
"""

import copy
import itertools
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from captum.log import log_usage
from torch import Tensor, nn

from captum_iba._utils.common import (
    check_target_range,
    format_target,
    hf_call,
    model_device,
)
from captum_iba._utils.common import (
    special_token_ids as resolve_special_ids,
)
from captum_iba._utils.modules import layer_stack
from captum_iba.metrics._compat import randomization_options
from captum_iba.metrics.options import RandomizationOptions
from captum_iba.metrics.randomization_result import (
    RandomizationResult,
    rank_correlation,
)

__all__ = [
    "ExplanationFunc",
    "Stage",
    "cascade_stages",
    "cascading_randomization",
    "reinitialize",
]

#: ``explanation_func(model, input_ids, attention_mask, target) -> (B, L)`` per-token
#: scores (``token_type_ids=`` is added as a keyword when given).
ExplanationFunc = Callable[..., Tensor]
#: A stage of the cascade: its name and the qualified names of its modules.
Stage = Tuple[str, List[str]]


def _owners(model: nn.Module, skip: set) -> List[Tuple[str, nn.Module]]:
    """Modules holding parameters directly, outside the modules in ``skip``."""
    return [
        (name, m)
        for name, m in model.named_modules()
        if id(m) not in skip and next(m.parameters(recurse=False), None) is not None
    ]


def cascade_stages(
    model: nn.Module,
    input_ids: Tensor,
    attention_mask: Optional[Tensor] = None,
    token_type_ids: Optional[Tensor] = None,
) -> List[Stage]:
    """The stages of the cascade, top first: head, blocks top-down, embeddings.

    The blocks are the model's longest ``ModuleList`` (``bert.encoder.layer``,
    ...). Every other module holding parameters is placed by one forward pass
    on ``input_ids`` (forward pre-hooks, removed afterwards): modules that
    start before the first block are the ``"embeddings"`` stage, those that
    start after the last block the ``"head"`` (pooler, classifier, final
    norm). Empty stages are left out.

    Args:
        model (nn.Module): A classifier called as ``model(input_ids,
            attention_mask[, token_type_ids])``.
        input_ids (Tensor): ``(B, L)`` token ids for the forward pass (one
            instance is enough).
        attention_mask (Tensor, optional): ``(B, L)``.
        token_type_ids (Tensor, optional): ``(B, L)``.

    Returns:
        list[tuple[str, list[str]]]: ``(stage name, module names)`` per stage:
        ``("head", [...])``, ``("layer N-1", [...])`` ... ``("layer 0",
        [...])``, ``("embeddings", [...])``.

    Raises:
        ValueError: When the forward does not run the block stack, or a
            module with parameters runs between two blocks (pass ``stages=``
            to :func:`cascading_randomization` then).
    """
    blocks = layer_stack(model)
    names = {id(m): n for n, m in model.named_modules()}
    inside = {id(sub) for block in blocks for sub in block.modules()}
    owners = _owners(model, inside)
    order: Dict[int, int] = {}
    counter = itertools.count()

    def seen(module: nn.Module, args: Any) -> None:
        order.setdefault(id(module), next(counter))

    handles = [m.register_forward_pre_hook(seen) for _, m in owners]
    handles += [b.register_forward_pre_hook(seen) for b in blocks]
    try:
        with torch.no_grad():
            hf_call(model, input_ids, attention_mask, token_type_ids)
    finally:
        for handle in handles:
            handle.remove()
    if id(blocks[0]) not in order or id(blocks[-1]) not in order:
        raise ValueError("the forward pass did not run the model's block stack")
    first, last = order[id(blocks[0])], order[id(blocks[-1])]
    head, embeddings, unused = [], [], []
    for name, module in owners:
        at = order.get(id(module))
        if at is None:
            unused.append(name)
        elif at < first:
            embeddings.append(name)
        elif at > last:
            head.append(name)
        else:
            raise ValueError(
                f"module {name!r} runs between the blocks: give the stages "
                "explicitly (stages=)"
            )
    if unused:
        warnings.warn(
            f"modules {unused} did not run in the forward pass; they are not "
            "randomised",
            stacklevel=2,
        )
    stages: List[Stage] = [("head", head)]
    stages += [
        (f"layer {i}", [names[id(blocks[i])]]) for i in reversed(range(len(blocks)))
    ]
    stages.append(("embeddings", embeddings))
    return [(name, mods) for name, mods in stages if mods]


def _default_reinit(model: nn.Module) -> Callable[[nn.Module], None]:
    """The model's own initialisation of one module (non-recursive)."""
    init_weights = getattr(model, "_init_weights", None)

    def reinit(module: nn.Module) -> None:
        if callable(init_weights):  # Hugging Face: what from_config does
            for p in module.parameters(recurse=False):
                # transformers 5 skips tensors flagged as loaded from a checkpoint
                if getattr(p, "_is_hf_initialized", False):
                    p._is_hf_initialized = False  # type: ignore[attr-defined]
            init_weights(module)
        elif callable(getattr(module, "reset_parameters", None)):
            module.reset_parameters()

    return reinit


@torch.no_grad()
def reinitialize(
    model: nn.Module,
    modules: Sequence[str],
    seed: int = 0,
    reinit: Optional[Callable[[nn.Module], None]] = None,
) -> List[str]:
    """Re-initialise the named modules of ``model`` in place, reproducibly.

    The default is the model's own initialisation: ``model._init_weights`` on
    every submodule for a Hugging Face model (what ``from_config`` does, e.g.
    normal(0, ``initializer_range``) weights, zero biases, unit LayerNorm),
    otherwise each submodule's ``reset_parameters()``. The global random
    state is seeded with ``seed`` inside :func:`torch.random.fork_rng`, so
    the caller's random state is left as it was.

    Args:
        model (nn.Module): The model to change (pass a copy to keep yours).
        modules (Sequence[str]): Qualified module names (``"classifier"``,
            ``"bert.encoder.layer.5"``).
        seed (int): Seed of the new weights. Default 0.
        reinit (Callable, optional): ``reinit(module)`` re-initialising one
            module's own parameters (it is called on every submodule).

    Returns:
        list[str]: The names of the parameters whose values changed.

    Raises:
        ValueError: For a module name that ``model`` does not have.
    """
    targets = []
    for name in modules:
        try:
            targets.append((name, model.get_submodule(name)))
        except AttributeError:
            raise ValueError(f"the model has no module named {name!r}") from None
    params = {
        f"{name}.{p_name}" if name else p_name: p
        for name, module in targets
        for p_name, p in module.named_parameters()
    }
    before = {n: p.detach().clone() for n, p in params.items()}
    fn = reinit or _default_reinit(model)
    devices = [p.device for p in params.values() if p.device.type == "cuda"]
    with torch.random.fork_rng(devices=sorted(set(devices), key=str)):
        torch.manual_seed(seed)
        for _, module in targets:
            for sub in module.modules():
                fn(sub)
    return [n for n, p in params.items() if not torch.equal(before[n], p.detach())]


def _explain(
    explanation_func: ExplanationFunc,
    model: nn.Module,
    batch: Tuple[Tensor, Tensor, Optional[Tensor], Tensor],
    chunk: int,
    stage: str,
) -> Tensor:
    """``(B, L)`` float64 CPU scores of every instance, ``chunk`` at a time."""
    ids, mask, tt, target = batch
    parts = []
    for s in range(0, ids.shape[0], chunk):
        sl = slice(s, s + chunk)
        extra = {} if tt is None else {"token_type_ids": tt[sl]}
        out = explanation_func(model, ids[sl], mask[sl], target[sl], **extra)
        if not isinstance(out, Tensor):
            raise TypeError(
                f"explanation_func returned {type(out).__name__}, expected a Tensor"
            )
        out = out.detach()
        if out.dim() == 3 and out.shape[:2] == ids[sl].shape:
            out = out.sum(-1)
        if out.shape != ids[sl].shape:
            raise ValueError(
                f"explanation_func returned shape {tuple(out.shape)} at stage "
                f"{stage!r}; expected {tuple(ids[sl].shape)} (B, L)"
            )
        parts.append(out.to("cpu", torch.float64))
    scores = torch.cat(parts)
    if not torch.isfinite(scores).all():
        raise ValueError(f"explanation_func returned non-finite scores at {stage!r}")
    return scores


def _predict(model: nn.Module, batch: Tuple[Any, ...], chunk: int) -> Tensor:
    ids, mask, tt = batch[:3]
    with torch.no_grad():
        return torch.cat(
            [
                hf_call(
                    model,
                    ids[s : s + chunk],
                    mask[s : s + chunk],
                    None if tt is None else tt[s : s + chunk],
                ).float()
                for s in range(0, ids.shape[0], chunk)
            ]
        ).cpu()


def _check_stages(model: nn.Module, stages: Sequence[Stage]) -> List[Stage]:
    out, seen = [], {}
    for item in stages:
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise ValueError("stages must be (name, [module names]) pairs")
        name, modules = str(item[0]), [str(m) for m in item[1]]
        for module in modules:
            try:
                model.get_submodule(module)
            except AttributeError:
                raise ValueError(f"the model has no module named {module!r}") from None
            if module in seen:
                raise ValueError(f"module {module!r} is in two stages")
            seen[module] = name
        out.append((name, modules))
    if not out:
        raise ValueError("stages is empty: nothing to randomise")
    return out


def _inputs(
    model: nn.Module,
    inputs: Tensor,
    attention_mask: Optional[Tensor],
    token_type_ids: Optional[Tensor],
) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
    if not isinstance(inputs, Tensor) or inputs.dim() != 2 or inputs.shape[0] == 0:
        raise ValueError("inputs must be a (B, L) tensor of token ids, B >= 1")
    if inputs.is_floating_point():
        raise TypeError("inputs must hold integer token ids")
    mask = torch.ones_like(inputs) if attention_mask is None else attention_mask
    for name, t in (("attention_mask", mask), ("token_type_ids", token_type_ids)):
        if t is not None and tuple(t.shape) != tuple(inputs.shape):
            raise ValueError(
                f"{name} has shape {tuple(t.shape)}, inputs {tuple(inputs.shape)}"
            )
    dev = model_device(model)
    return (
        inputs.to(dev),
        mask.to(dev),
        None if token_type_ids is None else token_type_ids.to(dev),
    )


@log_usage()
def cascading_randomization(
    explanation_func: ExplanationFunc,
    model: nn.Module,
    inputs: Tensor,
    target: Any = None,
    attention_mask: Optional[Tensor] = None,
    token_type_ids: Optional[Tensor] = None,
    tokenizer: Any = None,
    options: Optional[RandomizationOptions] = None,
    method: str = "",
    **kwargs: Any,
) -> RandomizationResult:
    r"""Cascading model-randomisation check of an attribution method (Adebayo
    et al., 2018, Section 3.1).

    On a deep copy of ``model`` (in eval mode, parameters frozen; ``model``
    itself is never modified), the attributions of the trained model are
    computed, then the stages of the cascade are re-initialised one after
    the other, top first (:func:`cascade_stages`: the head, the blocks
    top-down, the embeddings; each seeded with ``seed + stage index`` by
    :func:`reinitialize`), and after each stage the attributions are computed
    again and compared with the trained model's: Spearman's rho per instance
    over its real (attention mask 1), non-special tokens, on the signed scores
    and on their absolute values (:func:`rank_correlation`).

    The class explained is **the same class index at every stage**: ``target``
    or, when None, the trained model's predicted class - not the randomised
    model's prediction, which would change the question asked.

    Args:
        explanation_func (Callable): ``explanation_func(model, input_ids,
            attention_mask, target) -> (B, L)`` per-token scores (or ``(B, L,
            H)``, summed over ``H``); called with ``token_type_ids=`` as a
            keyword when they are given. It must not keep state between calls
            that depends on the model (it gets a different model per stage).
        model (nn.Module): The trained classifier, called as ``model(ids,
            mask[, token_type_ids])``.
        inputs (Tensor): ``(B, L)`` token ids.
        target (int, list, Tensor, optional): The class explained per instance.
            Default None: the trained model's prediction.
        attention_mask (Tensor, optional): ``(B, L)``, 0 at padding. Default
            all ones.
        token_type_ids (Tensor, optional): ``(B, L)`` segment ids.
        tokenizer (optional): Gives the special token ids left out of the
            correlation.
        options (RandomizationOptions, optional): The special token ids (over
            the tokenizer's), the stages, the re-initialisation, the seed,
            the batching and the progress bar
            (:class:`~captum_iba.metrics.options.RandomizationOptions`).
            Default: ``RandomizationOptions()``.
        method (str): The method's name, recorded in the result.
        **kwargs: The keyword arguments of earlier releases that are now
            fields of ``options`` (``special_token_ids=``, ``stages=``,
            ``reinit=``, ``seed=``, ``max_examples_per_batch=``,
            ``show_progress=``): still taken, with a DeprecationWarning.

    Returns:
        RandomizationResult: Per stage and instance, both correlations, with
        the predictions and target probabilities of every stage.

    Raises:
        ValueError: On inputs of the wrong shape, an out-of-range target, bad
            stages, or an explanation of the wrong shape or non-finite.
        TypeError: On a keyword argument that is neither a parameter nor an
            old one, or old ones given with ``options``.

    Examples::

        >>> from captum_iba.evaluation import method_explainer
        >>> explain = method_explainer("IG", tokenizer=tokenizer)
        >>> result = cascading_randomization(explain, model, ids, labels,
        ...                                  attention_mask=mask,
        ...                                  tokenizer=tokenizer)
        >>> result.mean("spearman_abs")  # towards 0 for a method that passes
    """
    options = randomization_options(options, kwargs)
    stages, reinit, seed = options.stages, options.reinit, options.seed
    ids, mask, tt = _inputs(model, inputs, attention_mask, token_type_ids)
    chunk = options.max_examples_per_batch or ids.shape[0]
    special = resolve_special_ids(tokenizer, options.special_token_ids)
    compared = mask.bool().cpu() & ~torch.isin(
        ids.cpu(), torch.tensor(special, dtype=ids.dtype)
    )
    work = copy.deepcopy(model).eval()
    for p in work.parameters():
        p.requires_grad_(False)
    logits = _predict(work, (ids, mask, tt), chunk)
    tgt = _resolve_target(target, logits)
    plan = (
        cascade_stages(work, ids[:1], mask[:1], None if tt is None else tt[:1])
        if stages is None
        else _check_stages(work, stages)
    )
    batch = (ids, mask, tt, tgt.to(ids.device))
    t0 = time.process_time()
    reference = _explain(explanation_func, work, batch, chunk, "trained")
    cpu = [time.process_time() - t0]
    preds, probs = [logits.argmax(-1)], [_prob(logits, tgt)]
    rho: Dict[str, List[Tensor]] = {"spearman": [], "spearman_abs": []}
    changed: List[List[str]] = []
    steps = list(enumerate(plan))
    if options.show_progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, desc=method or "randomisation")
    for k, (name, modules) in steps:
        changed.append(reinitialize(work, modules, seed + k, reinit))
        t0 = time.process_time()
        scores = _explain(explanation_func, work, batch, chunk, name)
        cpu.append(time.process_time() - t0)
        for variant, absolute in (("spearman", False), ("spearman_abs", True)):
            rho[variant].append(rank_correlation(reference, scores, compared, absolute))
        out = _predict(work, (ids, mask, tt), chunk)
        preds.append(out.argmax(-1))
        probs.append(_prob(out, tgt))
    unchanged = [name for (name, _), c in zip(plan, changed) if not c]
    if unchanged:
        warnings.warn(
            f"stages {unchanged} changed no parameter: their re-initialisation "
            "did nothing (give RandomizationOptions(reinit=...))",
            stacklevel=2,
        )
    return RandomizationResult(
        stages=[name for name, _ in plan],
        spearman=torch.stack(rho["spearman"]),
        spearman_abs=torch.stack(rho["spearman_abs"]),
        target=tgt.cpu(),
        n_tokens=compared.sum(dim=1),
        predictions=torch.stack(preds),
        target_probs=torch.stack(probs),
        randomized=changed,
        method=method,
        settings={
            "seed": seed,
            "stages": {name: modules for name, modules in plan},
            "special_token_ids": special,
            "target": "given" if target is not None else "trained prediction",
            "reinit": _reinit_name(model, reinit),
            "cpu_seconds": cpu,
        },
    )


def _resolve_target(target: Any, logits: Tensor) -> Tensor:
    """One class index per instance: ``target``, or the trained prediction."""
    tgt = format_target(target, logits.shape[0])
    tgt = logits.argmax(-1) if tgt is None else tgt
    if tgt.dim() != 1:
        raise ValueError("target must be one class index per instance")
    check_target_range(tgt, logits.shape)
    return tgt


def _reinit_name(model: nn.Module, reinit: Optional[Callable[..., Any]]) -> str:
    if reinit is not None:
        return "custom"
    if callable(getattr(model, "_init_weights", None)):
        return "model._init_weights"
    return "reset_parameters"


def _prob(logits: Tensor, target: Tensor) -> Tensor:
    return logits.double().softmax(-1).gather(1, target[:, None].cpu())[:, 0]
