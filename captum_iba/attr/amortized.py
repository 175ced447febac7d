r"""Amortized IBA: a bottleneck learned once per model, then one forward pass.

* :class:`AmortizedExplainer` - fit once over a corpus
  (:meth:`AmortizedExplainer.fit`, a progress bar with the ETA), keep with
  :meth:`~AmortizedExplainer.save` / :meth:`~AmortizedExplainer.load`
  (safetensors, checked: :mod:`~captum_iba.attr.amortized_store`);
* :class:`AmortizedInformationBottleneckAttribution` - the Captum layer
  method: the explainer's mask :math:`\lambda_t` after one forward pass, or,
  with ``refine_steps > 0``, a few per-sample steps of ``iba-faithful``'s
  optimisation started from it (the cost-faithfulness knob).

The network and its equations: :mod:`~captum_iba.attr.explainer`; the
objective it is trained with: :mod:`~captum_iba.attr.amortized_fit`.
"""

import warnings
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import torch
from captum.attr import LayerAttribution
from captum.log import log_usage
from torch import Tensor
from torch.nn import Module

from captum_iba._utils import common
from captum_iba._utils.captum_compat import (
    TargetType,
    _format_additional_forward_args,
    _format_tensor_into_tuples,
)
from captum_iba._utils.hooks import evaluation_mode, find_in_stack
from captum_iba._utils.modules import layer_stack
from captum_iba.attr import _loop, _speed
from captum_iba.attr import amortized_store as store
from captum_iba.attr._amortized_pass import Batch, Clean, Passes, module_name
from captum_iba.attr._tokens import infer_token_mask
from captum_iba.attr.amortized_fit import fit_network, specials_kept, summary_of
from captum_iba.attr.amortized_store import explainer_key
from captum_iba.attr.explainer import ExplainerSettings, MaskExplainer
from captum_iba.attr.options import DELETION, IBAOptions

__all__ = ["AmortizedExplainer", "AmortizedInformationBottleneckAttribution"]

PathLike = Union[str, "Path"]


def default_readout(model: Module, layer: Module) -> List[Module]:
    """The bottlenecked layer and the last layer of the stack holding it; for
    a layer outside every stack (the embeddings, where ``iba-deletion``'s
    bottleneck sits), the last block of the model's layer stack, so that the
    explainer reads the tokens in context, not only their embeddings."""
    found = find_in_stack(model, layer)
    if found is not None:
        stack = found[0]
        return list(dict.fromkeys([layer, stack[len(stack) - 1]]))
    try:
        return list(dict.fromkeys([layer, layer_stack(model)[-1]]))
    except ValueError:  # no layer stack in the model
        return [layer]


class AmortizedExplainer:
    """A fitted explainer: the network, its settings and what it was fitted for.

    Build it with :meth:`fit` or :meth:`load`, not directly.

    Attributes:
        network (MaskExplainer): The trained network.
        settings (ExplainerSettings): How it was fitted.
        key (dict): The model's weights digest, the layer's name, the
            settings, the tokenizer's digest (when fitted with one) and, for a
            causal LM, ``max_tokens``: the longest input (prompt and answer)
            it was fitted on (a longer one is explained with a warning,
            :meth:`length_warning`).
        stats (dict): The fit's statistics (steps, instances, CPU-seconds...).
    """

    def __init__(
        self,
        network: MaskExplainer,
        settings: ExplainerSettings,
        key: Dict[str, Any],
        stats: Dict[str, Any],
    ) -> None:
        self.network, self.settings, self.key, self.stats = (
            network,
            settings,
            key,
            stats,
        )

    @classmethod
    def fit(
        cls,
        model: Module,
        layer: Module,
        data: Iterable[Any],
        settings: Optional[ExplainerSettings] = None,
        readout: Optional[Sequence[Module]] = None,
        tokenizer: Any = None,
        folder: Optional[PathLike] = None,
        show_progress: bool = True,
        checkpoint_seconds: float = 60.0,
        **options: Any,
    ) -> "AmortizedExplainer":
        """Fit an explainer for ``model`` 's ``layer`` over ``data``.

        Args:
            model (Module): The model, called as ``model(input_ids,
                attention_mask[, token_type_ids])``; frozen and left unchanged.
            layer (Module): The layer after which the bottleneck goes.
            data (Iterable): Batches: dicts with ``input_ids``,
                ``attention_mask`` and optionally ``token_type_ids`` and
                ``labels``, or tuples in that order (e.g. a ``DataLoader``),
                or :class:`~captum_iba.attr._amortized_pass.Batch` es laid
                out for another forward (the lab's causal LMs:
                ``captum_iba_lab.amortized_lm``).
            settings (ExplainerSettings, optional): The fit's settings; its
                fields may also be given as keywords (``options``).
            readout (sequence of Module, optional): The layers the explainer
                reads. Default: ``layer`` and the last layer of its stack.
            tokenizer (optional): Gives ``pad_token_id`` and the special ids
                (kept out of the deletion-like prior) when not in ``settings``;
                its digest is part of the key (another tokenizer is refused).
            folder (str or Path, optional): Where to save the explainer (and
                checkpoints while fitting; an interrupted fit resumes from
                them). A finished explainer with the same key there is loaded
                instead of fitted again.
            show_progress (bool, optional): A progress bar with the ETA.
            checkpoint_seconds (float, optional): How often a checkpoint is
                written to ``folder`` while fitting (and on Ctrl-C).
            **options: :class:`ExplainerSettings` fields, or version 0.2's
                flat names (``beta``, ``prior``, ``complement``,
                ``n_samples``, ``seed``: fields of ``options``; ``lr``:
                ``network_lr``).

        Returns:
            AmortizedExplainer: The fitted explainer.

        Raises:
            ValueError: For bad settings, a folder holding an explainer or a
                checkpoint of another model, layer or settings, or no data.
        """
        readout = (
            list(readout) if readout is not None else default_readout(model, layer)
        )
        base = (settings or ExplainerSettings()).to_dict()
        if tokenizer is not None:  # its ids, unless the keywords name them
            options.setdefault("pad_token_id", common.pad_token_id(tokenizer))
            options.setdefault("special_token_ids", common.special_token_ids(tokenizer))
        options["readout"] = [module_name(model, m) for m in readout]
        settings = ExplainerSettings.from_dict({**base, **options})
        key = explainer_key(model, layer, settings, tokenizer)
        if folder is not None and (Path(folder) / store.RECORD).is_file():
            return cls.load(folder, model, layer, settings, tokenizer)
        network, stats = fit_network(
            model, layer, readout, data, settings, key, folder, show_progress,
            checkpoint_seconds,
        )  # fmt: skip
        if summary_of(model) == "last":  # a causal LM: the longest input known
            key = dict(key, max_tokens=stats["longest"])
        explainer = cls(network, settings, key, stats)
        if folder is not None:
            explainer.save(folder)
        return explainer

    def save(self, folder: PathLike) -> Path:
        """Save to ``folder`` (safetensors and a checked record; atomic).

        Args:
            folder (str or Path): The folder (created if needed).

        Returns:
            Path: The folder.
        """
        shape = {
            "widths": list(self.network.widths),
            "n_classes": self.network.n_classes,
            "summary": self.network.summary,
        }
        return store.write_explainer(
            folder, self.network.state_dict(), self.key, shape, self.stats
        )

    @classmethod
    def load(
        cls,
        folder: PathLike,
        model: Module,
        layer: Module,
        settings: Optional[ExplainerSettings] = None,
        tokenizer: Any = None,
    ) -> "AmortizedExplainer":
        """Load an explainer saved by :meth:`save`, refusing a stale one.

        Args:
            folder (str or Path): The folder.
            model (Module): The model it must have been fitted for (its
                weights digest is compared).
            layer (Module): The layer it must have been fitted for.
            settings (ExplainerSettings, optional): When given, the settings
                it must have been fitted with.
            tokenizer (optional): When given, the tokenizer it must have been
                fitted with (when it was fitted with one).

        Returns:
            AmortizedExplainer: The explainer.

        Raises:
            FileNotFoundError: When ``folder`` holds no finished explainer.
            ValueError: Naming the file or the difference, when a file is
                damaged or truncated, or the explainer was fitted for other
                weights, another layer, another tokenizer or other settings.
        """
        record = store.read_record(folder)
        expected = explainer_key(model, layer, settings, tokenizer)
        try:  # settings added since it was saved take their defaults
            saved = ExplainerSettings.from_dict(record["key"]["settings"])
        except (TypeError, ValueError) as err:
            raise ValueError(f"{folder}: unusable explainer settings ({err})") from None
        found = dict(record["key"], settings=saved.to_dict())
        problem = store.key_problem(found, expected)
        if problem:
            raise ValueError(f"{folder}: stale explainer, not used: {problem}.")
        shape = record.get("shape") or {}
        network = MaskExplainer(
            shape["widths"], shape["n_classes"], saved.hidden,
            summary=shape.get("summary", "first"),
        )  # fmt: skip
        state = store.read_weights(folder, record)
        try:
            network.load_state_dict(state)
        except RuntimeError as err:
            raise ValueError(
                f"{folder}: the weights do not fit the record ({err})"
            ) from None
        network.to(common.model_device(model)).eval()
        return cls(network, saved, found, record.get("stats") or {})

    def check(self, model: Module, layer: Module, tokenizer: Any = None) -> None:
        """Raise ValueError when this explainer was not fitted for ``model`` 's
        current weights and ``layer`` (and ``tokenizer``, when given)."""
        expected = explainer_key(model, layer, None, tokenizer)
        problem = store.key_problem(self.key, expected)
        if problem:
            raise ValueError(f"stale explainer, not used: {problem}.")

    def length_warning(self, length: int) -> Optional[str]:
        """The warning for an input of ``length`` tokens longer than the
        longest this explainer (of a causal LM) was fitted on, else None.

        Such an input is explained all the same: the network reads each
        token's states and the last position's, never a position index
        (:class:`~captum_iba.attr.explainer.MaskExplainer`), so it applies to
        any length the model takes; its masks there are an extrapolation
        (measured on the copy model: ``tests/evaluation/test_amortized_llm.py``).
        """
        limit = self.key.get("max_tokens")
        if limit is None or length <= int(limit):
            return None
        return (
            f"an input holds more than the {limit} tokens (prompt and answer) of "
            "the longest this explainer was fitted on: it is explained all the "
            "same (the explainer reads no position), an extrapolation; fit the "
            "explainer on prompts as long to be sure of it"
        )

    def readout_layers(self, model: Module) -> List[Module]:
        """The readout layers, found by name in ``model``."""
        modules = dict(model.named_modules())
        missing = [n for n in self.settings.readout if n not in modules]
        if missing:
            raise ValueError(f"the model has no readout layer(s) {missing}.")
        return [modules[n] for n in self.settings.readout]


class AmortizedInformationBottleneckAttribution(LayerAttribution):
    r"""Amortized IBA for a layer of a text classifier.

    A fitted :class:`AmortizedExplainer` predicts the bottleneck's signal
    weight :math:`\lambda_t = \sigma(\alpha_t)` of every token from the
    model's hidden states: an attribution costs one forward pass of the model
    and of the explainer. With ``refine_steps > 0`` the per-sample bottleneck
    (``iba-faithful``'s normalised gradient descent, the mask averaged over
    the steps) starts from the amortized :math:`\alpha` for a few steps.

    The model is never changed (eval mode, flags restored; no hook outlives a
    call); an explainer fitted for other weights or another layer is refused.

    Args:
        forward_func (Module): The model, called as ``forward_func(inputs,
            *additional_forward_args)`` (a Hugging Face classifier:
            ``(input_ids, attention_mask[, token_type_ids])``).
        layer (Module): The bottlenecked layer (the explainer's).
        explainer (AmortizedExplainer): The fitted explainer.
        device_ids (list[int], optional): Kept for Captum's signature;
            ``DataParallel`` is not supported.

    Examples::

        >>> explainer = AmortizedExplainer.fit(model, layer, loader,
        ...                                    keep=0.3, tokenizer=tok)
        >>> aiba = AmortizedInformationBottleneckAttribution(model, layer, explainer)
        >>> attr = aiba.attribute(input_ids, target=labels,
        ...                       additional_forward_args=(attention_mask,))
        >>> attr.shape        # (B, L, H): lambda_t of every token, per feature
    """

    def __init__(
        self,
        forward_func: Module,
        layer: Module,
        explainer: AmortizedExplainer,
        device_ids: Union[None, List[int]] = None,
    ) -> None:
        if not isinstance(forward_func, Module):
            raise TypeError("forward_func must be the model (a torch.nn.Module).")
        if not isinstance(explainer, AmortizedExplainer):
            raise TypeError(
                "explainer must be an AmortizedExplainer (fit or load one)."
            )
        LayerAttribution.__init__(self, forward_func, layer, device_ids)
        explainer.check(forward_func, layer)
        self.explainer = explainer
        self._passes = Passes(
            forward_func, layer, explainer.readout_layers(forward_func)
        )
        #: Diagnostics of the last call (refinement steps, path of T).
        self.last_run: Dict[str, Any] = {}

    @property
    def multiplies_by_inputs(self) -> bool:
        return False

    def has_convergence_delta(self) -> bool:
        return False

    @log_usage()
    def attribute(
        self,
        inputs: Union[Tensor, Tuple[Tensor, ...]],
        target: TargetType = None,
        additional_forward_args: Optional[object] = None,
        token_mask: Optional[Tensor] = None,
        refine_steps: int = 0,
        n_samples: Optional[int] = None,
        lr: Optional[float] = None,
        beta: Optional[float] = None,
        seed: Optional[int] = None,
        baselines: Optional[Tensor] = None,
    ) -> Tensor:
        r"""The amortized bottleneck's mask, optionally refined per sample.

        Args:
            inputs (Tensor or tuple[Tensor]): ``(B, L)`` token ids (one tensor).
            target (int, tuple, Tensor, list, optional): The class explained
                per instance (Captum's ``TargetType``); None: the predicted.
            additional_forward_args (Any, optional): Further positional
                arguments of the model (the attention mask, segment ids).
            token_mask (Tensor, optional): ``(B, L)``, 1 at real tokens; found
                among the forward's arguments when omitted.
            refine_steps (int, optional): Per-sample steps started from the
                amortized :math:`\alpha` (0: none, one forward pass):
                ``iba-faithful``'s (the noise bottleneck), or ``iba-deletion``'s
                for an explainer that learned deletion (its objective or its
                teacher ``removal="attention"``; then only ``lr`` applies).
            n_samples (int, optional): Noise draws per refinement step.
                Default 5.
            lr (float, optional): Step size of the refinement. Default 3.0
                (``iba-deletion``'s 4.0 for deletion).
            beta (float, optional): :math:`\beta` of the refinement's Eq. (5).
                Default 1e-5.
            seed (int, optional): Seed of the refinement's noise. Default 0.
            baselines (Tensor, optional): ``(B, L)`` ids whose layer output is
                the refinement's noise mean (``"baseline"`` prior); default
                the inputs with the removable tokens replaced by [PAD].

        The refinement's options (``n_samples``, ``lr``, ``beta``, ``seed``,
        ``baselines``) act only with ``refine_steps > 0``: given with
        ``refine_steps=0`` they are refused, never ignored.

        Returns:
            Tensor: ``(B, L, H)`` (the layer output's shape): the signal weight
            :math:`\lambda` in (0, 1) of every token, the same for its
            features (averaged over the steps when refined), zero at padding.
            Reduce to tokens with :func:`~captum_iba.token_attributions`.
        """
        ids, extra, mask = self._inputs(inputs, additional_forward_args, token_mask)
        real = extra[0] if extra and isinstance(extra[0], Tensor) else None
        longest = ids.shape[1] if real is None or real.dim() != 2 else real.sum(1).max()
        beyond = self.explainer.length_warning(int(longest))
        if beyond is not None:
            # one message per explainer (shown once per caller), at the caller
            # of attribute (under Captum's log_usage wrapper)
            warnings.warn(beyond, UserWarning, stacklevel=3)
        if (
            isinstance(refine_steps, bool)
            or not isinstance(refine_steps, int)
            or refine_steps < 0
        ):
            raise ValueError(f"refine_steps must be an int >= 0, got {refine_steps!r}.")
        refinement = dict(n_samples=n_samples, lr=lr, beta=beta, seed=seed)
        given = [k for k, v in refinement.items() if v is not None]
        given += ["baselines"] if baselines is not None else []
        if not refine_steps and given:
            raise ValueError(
                f"{', '.join(given)}: the refinement's options act only with "
                "refine_steps > 0; with refine_steps=0 the attribution is the "
                "explainer's mask after one forward pass. Give refine_steps, or "
                "leave them out."
            )
        settings = self.explainer.settings
        deletion = "attention" in (
            settings.options.removal,
            getattr(settings.teacher, "removal", None),
        )
        noise_only = [k for k in ("n_samples", "beta", "baselines") if k in given]
        if refine_steps and deletion and noise_only:
            raise ValueError(
                f"{', '.join(noise_only)}: this explainer learned deletion "
                "(iba-deletion's objective or masks), and so does its refinement "
                "(iba-deletion's steps from its mask): no noise, no beta, no "
                "baselines; give refine_steps and lr only."
            )
        batch = Batch(ids, extra, mask)
        model = self.forward_func
        with evaluation_mode(model, [self.layer]), _speed.frozen_parameters(model):
            clean = self._passes.clean(batch)
            objective = settings.options.objective.for_output(clean.logits)
            formatted = common.format_target(target, ids.shape[0])
            targets = objective.targets(formatted, clean.logits)
            with torch.no_grad():
                alpha = self.explainer.network.alpha(clean.states, targets)
            shape = alpha.shape + (1,) * (clean.x.dim() - 2)
            alpha = alpha.reshape(shape).expand_as(clean.x).float()
            self.last_run = {"refine_steps": refine_steps}
            if refine_steps == 0:
                keep = mask.to(alpha.dtype).reshape(shape)
                return (torch.sigmoid(alpha) * keep).contiguous()
            defaults = dict(n_samples=5, lr=3.0, beta=1e-5, seed=0)
            chosen = {k: defaults[k] if v is None else v for k, v in refinement.items()}
            seed = chosen.pop("seed")
            options = IBAOptions(
                steps=refine_steps, optimizer="normalized_gd", readout="mask_mean",
                **chosen,
            )  # fmt: skip
            if deletion:  # iba-deletion's steps from the amortized mask
                options = DELETION.replace(steps=refine_steps, lr=lr or DELETION.lr)
            task = _loop.Task(objective, targets)
            return self._refine(batch, clean, alpha, task, baselines, options, seed)

    def _refine(
        self,
        batch: Batch,
        clean: Clean,
        alpha: Tensor,
        task: "_loop.Task",
        baselines: Optional[Tensor],
        options: IBAOptions,
        seed: int,
    ) -> Tensor:
        """A few per-sample steps (the loop of per-sample IBA) from ``alpha``."""
        settings = self.explainer.settings
        prior = settings.options.prior
        layer = self._passes.layer_of(batch, clean, prior, settings, baselines)
        attention = options.removal == "attention"
        if attention:
            layer = specials_kept(layer, batch, settings)
        seam = self._passes.seam(batch, clean, options.n_samples, attention)
        with torch.enable_grad(), seam:
            attr, info = _loop.optimise(
                layer, seam, task, options, seed, init=alpha, pair_terms=True
            )
        self.last_run.update(info, path=self._passes.path)
        return attr

    def _inputs(
        self, inputs: Any, additional_forward_args: Any, token_mask: Optional[Tensor]
    ) -> Tuple[Tensor, Tuple[Any, ...], Tensor]:
        inputs_t = _format_tensor_into_tuples(inputs)
        if (
            len(inputs_t) != 1
            or not isinstance(inputs_t[0], Tensor)
            or inputs_t[0].dim() != 2
        ):
            raise ValueError("inputs must be one (B, L) tensor of token ids.")
        ids = inputs_t[0]
        extra = tuple(_format_additional_forward_args(additional_forward_args) or ())
        if token_mask is None:
            pad = self.explainer.settings.pad_token_id
            token_mask = infer_token_mask(self.forward_func, (ids, *extra), pad)
        if token_mask is None:
            warnings.warn(
                "no token_mask given or found: every position counts as a real token.",
                stacklevel=3,
            )
            token_mask = torch.ones_like(ids)
        if tuple(token_mask.shape) != tuple(ids.shape):
            raise ValueError(
                f"token_mask must have the shape of the inputs {tuple(ids.shape)}, "
                f"got {tuple(token_mask.shape)}."
            )
        return ids, extra, token_mask.to(ids.device).bool()
