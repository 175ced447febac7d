"""``InformationBottleneckAttribution``: IBA as a Captum layer attribution method.

The mathematics is in :mod:`captum_iba.attr.bottleneck`, the noise priors in
:mod:`captum_iba.attr.priors`, the batched optimisation loop in
:mod:`captum_iba.attr._loop`, the seam that puts the bottleneck output in a
layer's place in :mod:`captum_iba.attr._seam`, the options in
:mod:`captum_iba.attr.options`. This module follows Captum's conventions for
arguments and return values, splits the batch into chunks and, per chunk and
site, reads the layer's output, prepares the prior's statistics and calls
the loop.
"""

from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    Dict,
    FrozenSet,
    List,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import torch
from captum.attr import GradientAttribution, LayerAttribution
from captum.log import log_usage
from torch import Tensor
from torch.nn import Module
from tqdm.auto import tqdm

from captum_iba._utils.captum_compat import (
    ModuleOrModuleList,
    TargetType,
    _format_additional_forward_args,
    _format_tensor_into_tuples,
    _run_forward,
)
from captum_iba._utils.common import format_target, logits_of, model_device
from captum_iba._utils.hooks import LayerRecord, evaluation_mode, recorded
from captum_iba.attr import _inputs, _loop, _ranking, _seam, _speed, _tokens
from captum_iba.attr._precision import resolve_precision
from captum_iba.attr.objectives import Objective
from captum_iba.attr.options import ConfigLike, IBAOptions, options_doc

__all__ = ["IBAOptions", "InformationBottleneckAttribution"]


class InformationBottleneckAttribution(LayerAttribution, GradientAttribution):
    r"""Information Bottleneck Attribution (IBA) for a layer of a model.

    Inserts the per-sample information bottleneck of Jiang et al. (2020) after
    ``layer``: the layer output :math:`X` is replaced by
    :math:`T = \lambda X + (1-\lambda)\epsilon` (Eq. 2), and :math:`\alpha`
    (:math:`\lambda = \sigma(\alpha)`, one per instance, token and feature) is
    optimised with Adam to keep the task loss low - the target's
    cross-entropy for class logits, as in the paper, or what the ``objective``
    option says for scores, probabilities and log-probabilities - while letting
    as little information through as possible (Eq. 5). The attribution is the
    capacity :math:`D_{KL}[P(T|X)\|Q(T)]` of the final bottleneck, per element,
    in **nats** - how much of each token's features the prediction needed.

    The model is never changed: it is run in ``eval()`` mode (flags restored
    afterwards), parameters get no ``.grad`` (``torch.autograd.grad`` on
    :math:`\alpha` only), and no hook or stub outlives a call.

    When ``layer`` is an element of a ``ModuleList``/``Sequential`` that the
    model runs in order (e.g. ``model.bert.encoder.layer``), the layers below
    the bottleneck run once per batch and each optimisation step re-runs only
    the layers above it (checked against the model's own output once per
    batch; on any mismatch, Captum-style forward hooks are used instead).

    Args:
        forward_func (Callable): The model (e.g. a Hugging Face
            ``...ForSequenceClassification``) or any function returning a
            Tensor (or an object with ``.logits``): class logits,
            probabilities, or one score per instance (see ``objective``).
            Generative LLMs: :mod:`captum_iba.attr.llm`.
        layer (torch.nn.Module or list(torch.nn.Module)): The layer after
            which the bottleneck is inserted. A list of layers runs one
            independent bottleneck per layer (the paper's layer sweep) and
            ``attribute`` returns a list.
        device_ids (list[int], optional): Device ids, needed when
            ``forward_func`` applies ``DataParallel`` to the model, as in
            Captum's layer methods.
        layer_stack (bool or torch.nn.Module, optional): ``True`` (default)
            finds the ``ModuleList``/``Sequential`` holding ``layer`` inside
            ``forward_func`` (when it is a Module) to skip the lower layers;
            a container can be given for wrapped forward functions; ``False``
            always uses forward hooks.
        precision (str, optional): ``"float32"`` (default), ``"bf16"`` or
            ``"auto"``. ``"bf16"``: the optimisation's forward and backward
            under bfloat16 autocast with eager attention (``alpha``,
            statistics, noise and capacity stay float32); see
            :mod:`captum_iba.attr._speed`. On a CPU without native bfloat16,
            where it is many times slower, float32 runs instead, with a
            warning (:mod:`captum_iba.attr._precision`). ``"auto"``: bf16 on
            a GPU that supports it and on a CPU with native bfloat16
            (AVX512-BF16 or AMX), float32 elsewhere. ``last_run`` records the
            precision used.
        cuts (bool, optional): The exact cuts (frozen weights, embeddings
            once, the last layer's [CLS] row when the head reads only it,
            ``config="deletion"``'s two terms in one pass, rows chunked per
            pass), each checked against or equal to the full computation (up
            to rounding). Default True.
        pad_token_id (int, optional): The padding id, for priors that build
            their baselines from the token ids (``config="faithful"``'s:
            every real token that is not special replaced by it). Default:
            the model's ``config.pad_token_id``.
        special_token_ids (Sequence[int], optional): Ids kept in those
            baselines (e.g. ``tokenizer.all_special_ids``, as the evaluation
            harness passes). Default: the model config's ``bos``, ``eos``,
            ``sep`` and ``cls`` ids where it has them.

    Examples::

        >>> model = AutoModelForSequenceClassification.from_pretrained(path).eval()
        >>> iba = InformationBottleneckAttribution(model, model.bert.encoder.layer[8])
        >>> attr = iba.attribute(input_ids, target=labels,
        ...                      additional_forward_args=(attention_mask,))
        >>> attr.shape            # (B, L, H), capacity in nats
        >>> token_scores = attr.sum(-1)
        >>> # the most faithful configuration measured (docs/faithfulness.rst)
        >>> iba = InformationBottleneckAttribution(
        ...     model, model.bert.encoder.layer[4],
        ...     special_token_ids=tokenizer.all_special_ids)
        >>> attr = iba.attribute(input_ids, target=labels,
        ...                      additional_forward_args=(attention_mask,),
        ...                      config="faithful")
    """

    def __init__(
        self,
        forward_func: Callable[..., Any],
        layer: ModuleOrModuleList,
        device_ids: Union[None, List[int]] = None,
        layer_stack: Union[bool, Module] = True,
        precision: str = "float32",
        cuts: bool = True,
        pad_token_id: Optional[int] = None,
        special_token_ids: Optional[Sequence[int]] = None,
    ) -> None:
        if precision not in _speed.PRECISIONS:
            raise ValueError(f"precision must be one of {_speed.PRECISIONS}.")
        self.precision, self.cuts = precision, bool(cuts)
        self.pad_token_id = pad_token_id
        self.special_token_ids = (
            None if special_token_ids is None else [int(i) for i in special_token_ids]
        )
        LayerAttribution.__init__(self, forward_func, layer, device_ids)
        GradientAttribution.__init__(self, forward_func)
        layers = layer if isinstance(layer, list) else [layer]
        if not layers or not all(isinstance(m, Module) for m in layers):
            raise TypeError("layer must be a torch.nn.Module or a list of them.")
        self._layers: List[Module] = layers
        self.layer_stack = layer_stack
        #: Positions in ``additional_forward_args`` that are constants, never
        #: sliced nor repeated with the noise copies even when their first
        #: dimension equals the batch size (tensors whose first dimension is
        #: not the batch size always are).
        self.unbatched_args: FrozenSet[int] = frozenset()
        #: How ``T`` replaces each site, chosen (by the replay check, one
        #: forward pass) on the first call and kept (:func:`_seam.path_key`).
        self._paths: Dict[Tuple[Any, ...], _seam.Path] = {}
        #: The objective and output shape the clean outputs showed, so that
        #: later calls may skip the clean output (:class:`_speed.CleanForms`).
        self._forms = _speed.CleanForms()
        #: Diagnostics of the last ``attribute`` call (per layer): the path
        #: used ("stack" or "hooks"), whether the exact cuts of the stack
        #: path were used, beta, final task loss and mean capacity; and
        #: where the result ranks nothing: ``no_ranking`` (why the layer
        #: ranks no token, "" when it does) and ``flat_instances`` (the
        #: instances whose scores are flat, see
        #: :func:`~captum_iba._utils.ranking.flat_rows`), both also warned.
        self.last_run: List[Dict[str, Any]] = []

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
        config: ConfigLike = "paper",
        token_mask: Optional[Tensor] = None,
        baselines: Union[None, Tensor, Tuple[Tensor, ...]] = None,
        show_progress: bool = False,
        feature_mask: Optional[Tensor] = None,
        **options: Any,
    ) -> Union[Tensor, Tuple[Tensor, ...], List[Union[Tensor, Tuple[Tensor, ...]]]]:
        r"""Optimise one bottleneck per instance and return its attribution.

        Args:
            inputs (Tensor or tuple[Tensor, ...]): Inputs of ``forward_func``;
                dim 0 is the batch (e.g. ``input_ids`` of shape (B, L)).
            target (int, tuple, Tensor, list, optional): Captum's
                ``TargetType``: the output index (class) whose loss the
                bottleneck keeps low - one for all instances or one per
                instance. ``None`` explains the predicted class of ``(B, C)``
                scores, column 0 of a ``(B, 1)`` output and the score itself
                of a ``(B,)`` output.
            additional_forward_args (Any, optional): Further positional
                arguments of ``forward_func`` after ``inputs`` (e.g. the
                attention mask). Tensors whose first dimension is the batch
                are repeated with the noise copies; others (e.g. target token
                ids) pass through untouched.
            config (str or IBAOptions, optional): A named configuration of
                :data:`~captum_iba.attr.options.CONFIGS` -
                ``"faithful"`` (the most faithful configuration measured,
                docs/faithfulness.rst: use it to explain a model) or
                ``"paper"`` (the paper's, the default: use it to reproduce the
                paper) - or an :class:`~captum_iba.attr.options.IBAOptions`.
                Keyword ``options`` override its fields.
            token_mask (Tensor, optional): (B, L) with 1 at real tokens and 0
                at padding. Padding gets zero capacity and takes no part in
                the loss or the statistics. When omitted, it is found among the
                forward's arguments (a parameter named ``attention_mask`` or
                ``mask``..., through ``torch.compile``, ``DataParallel``,
                bound methods and ``functools.partial``); when none is found
                and the inputs hold the model's pad token id, a warning says
                so. Otherwise every position counts.
            baselines (Tensor or tuple[Tensor, ...], optional): Inputs of the
                shape of ``inputs`` whose layer output is the noise mean of
                ``prior="baseline"`` (``config="faithful"``'s). Default: built
                from the token ids by the prior - what deletion leaves, every
                real token that is not special replaced by the padding id
                (see ``pad_token_id`` and ``special_token_ids``). Only that
                prior uses them.
            show_progress (bool, optional): Show a tqdm progress bar over
                instance chunks. Default: False.
            feature_mask (Tensor, optional): ``(B, L)`` integer, as Captum's
                perturbation methods group features: tokens with the same
                value >= 0 share one mask weight (e.g. the sentences or
                passages of a context, for context attribution), optimised
                as one (its gradient is the sum of its tokens'); -1: a
                weight of its own. Default: None (every token its own).
            **options: Fields of :class:`~captum_iba.attr.options.IBAOptions`,
                overriding those of ``config``:

                {options}

        Returns:
            Tensor, tuple or list: The capacity (or ``readout``) per element of
            the layer output (or input), shape (B, L, H) for a transformer
            layer, in nats, zero at padding. A layer returning a tuple with
            several batch tensors gets one bottleneck per tensor, optimised
            one after the other with the others passing unchanged, and a
            tuple of attributions (as Captum's layer methods return one per
            output tensor); a list when ``layer`` is a list. Reduce to tokens
            with ``attr.sum(-1)`` or :func:`captum_iba.token_attributions`.

        Raises:
            TypeError: For a keyword that is no IBA option.
            ValueError: For a bad option value or input, naming it.
        """
        inputs_t = _format_tensor_into_tuples(inputs)
        extra = _format_additional_forward_args(additional_forward_args) or ()
        opts = IBAOptions.from_config(config, **options)
        reasons = _ranking.nothing_above_layers(
            self.forward_func, self.layer, opts, self.layer_stack, self.device_ids
        )
        _inputs.check_token_inputs(self.forward_func, inputs_t)
        batch, _ = _inputs.check_batch(inputs_t, extra)
        target_t = format_target(target, batch)
        token_mask, mask_explicit = _tokens.token_mask_of(
            self.forward_func, token_mask, inputs_t, extra
        )
        _inputs.check_token_mask(token_mask, batch)
        _inputs.check_feature_mask(feature_mask, batch, opts.mask)
        base_t = _tokens.prior_baselines(
            self.forward_func, opts.prior, baselines, inputs_t, token_mask,
            (self.pad_token_id, self.special_token_ids),
        )  # fmt: skip
        seed = opts.seed
        run_seed = (
            int(torch.randint(0, 2**31 - 1, (1,)).item()) if seed is None else seed
        )
        per_chunk = _speed.instances_per_chunk(
            batch, opts.n_samples, inputs_t[0], opts.internal_batch_size, self.cuts
        )
        chunks: List[List[Any]] = []
        self.last_run = [{} for _ in self._layers]
        device = model_device(self.forward_func, inputs_t[0].device)
        run = _AttributeCall(
            opts, run_seed, mask_explicit, resolve_precision(self.precision, device)
        )
        starts = range(0, batch, per_chunk)
        frozen = _speed.frozen_parameters(self.forward_func if self.cuts else None)
        with (
            torch.enable_grad(),
            evaluation_mode(self.forward_func, self._layers),
            frozen,
        ):
            flats: List[List[int]] = [[] for _ in self._layers]
            for start in tqdm(starts, disable=not show_progress, desc="IBA"):
                rows = slice(start, start + per_chunk)
                chunks.append(
                    self._attribute_chunk(
                        tuple(t[rows] for t in inputs_t),
                        None if base_t is None else tuple(t[rows] for t in base_t),
                        _inputs.slice_rows(extra, rows, batch, self.unbatched_args),
                        None if target_t is None else target_t[rows],
                        None if token_mask is None else token_mask[rows],
                        run,
                        None if feature_mask is None else feature_mask[rows],
                    )
                )
                for k, info in enumerate(self.last_run):
                    flats[k] += [start + i for i in info.pop("flat_rows", [])]
                    reasons[k] = reasons[k] or info.get("no_ranking", "")
        _ranking.record(self.forward_func, self._layers, self.last_run, reasons,
                        flats, batch)  # fmt: skip
        results = [_concat(parts) for parts in zip(*chunks)]
        return results if isinstance(self.layer, list) else results[0]

    # ------------------------------------------------------------------ #
    def _attribute_chunk(
        self,
        inputs: Tuple[Tensor, ...],
        baselines: Optional[Tuple[Tensor, ...]],
        extra: Tuple[Any, ...],
        target: Optional[Tensor],
        token_mask: Optional[Tensor],
        run: "_AttributeCall",
        groups: Optional[Tensor] = None,
    ) -> List[Any]:
        options = run.options
        records, clean, task = self._clean_pass(inputs, extra, target, run)
        base_records = None
        if baselines is not None:  # their output is never read
            with torch.no_grad(), recorded(self._layers, self._stops()) as base_records:
                _run_forward(self.forward_func, baselines, None, extra)
        removable = None
        if options.removal == "attention":
            removable = _tokens.removable_tokens(
                inputs[0], token_mask, self._special_ids()
            )
        n = options.n_samples
        rows = (
            tuple(t.repeat_interleave(n, dim=0) for t in inputs),
            _inputs.expand_rows(extra, inputs[0].shape[0], n, self.unbatched_args),
        )
        results: List[Any] = []
        for k, layer in enumerate(self._layers):
            attrs, infos = [], []
            record = records[layer]
            on_input = options.attribute_to_layer_input
            for site in _seam.sites_of(self.forward_func, layer, record, on_input):
                base = None
                if base_records is not None:
                    base_record = base_records[layer]
                    base = _seam.read_site(site, base_record, self._device_ids())[0]
                attr, info = self._attribute_site(
                    site, record, (clean, inputs, extra, rows), token_mask, task, run,
                    base, (removable, groups),
                )  # fmt: skip
                attrs.append(attr)
                infos.append(info)
            info = dict(infos[0], objective=task.objective.name)
            if len(infos) > 1:
                info["per_output"] = infos
            self.last_run[k] = info
            results.append(attrs[0] if len(attrs) == 1 else tuple(attrs))
        if clean is not None and run.objective is not None:
            self._forms.remember(options.objective, run.objective, clean)
        return results

    def _clean_pass(
        self,
        inputs: Tuple[Tensor, ...],
        extra: Tuple[Any, ...],
        target: Optional[Tensor],
        run: "_AttributeCall",
    ) -> Tuple[Dict[Module, LayerRecord], Optional[Tensor], "_loop.Task"]:
        """The layers' records on the clean inputs, the clean output and the
        task; the output is None where a later call needs only the records
        (:class:`_speed.CleanForms`: the forward stops at the layers)."""
        given = run.options.objective
        later = None
        if self._stops():
            later = self._forms.later(given, target, inputs[0].shape[0])
        if later is not None:
            with torch.no_grad(), recorded(self._layers, stop=True) as records:
                _run_forward(self.forward_func, inputs, None, extra)
            if self._paths_known(records, run.options.attribute_to_layer_input):
                return records, None, _loop.Task(*later)
        with torch.no_grad(), recorded(self._layers) as records:
            clean = logits_of(_run_forward(self.forward_func, inputs, None, extra))
        if run.objective is None:  # "auto" resolved once, on the first chunk
            run.objective = given.for_output(clean)
        return (
            records,
            clean,
            _loop.Task(run.objective, run.objective.targets(target, clean)),
        )

    def _stops(self) -> bool:
        """Whether a forward that needs only the layers' records stops there."""
        return self.cuts and self._device_ids() is None

    def _paths_known(self, records: Dict[Module, LayerRecord], on_input: bool) -> bool:
        """Whether every layer ran and every site's path is kept."""
        return all(
            records[layer].calls
            and all(
                self._site_path(site)[1] in self._paths
                for site in _seam.sites_of(
                    self.forward_func, layer, records[layer], on_input
                )
            )
            for layer in self._layers
        )

    def _site_path(self, site: _seam.Site) -> Tuple[Any, Tuple[Any, ...]]:
        """The stack holding ``site`` and its path's key (:func:`_seam.path_key`)."""
        stack = _seam.stack_for(
            self.forward_func, site.layer, self.layer_stack, self.device_ids
        )
        return stack, _seam.path_key(site, stack, self._device_ids(), self.cuts)

    def _attribute_site(
        self,
        site: _seam.Site,
        record: LayerRecord,
        call: Tuple[Tensor, Tuple[Tensor, ...], Tuple[Any, ...], Any],
        token_mask: Optional[Tensor],
        task: "_loop.Task",
        run: "_AttributeCall",
        baseline: Optional[Tensor] = None,
        tokens: Tuple[Optional[Tensor], Optional[Tensor]] = (None, None),
    ) -> Tuple[Tensor, Dict[str, Any]]:
        """Optimise the bottleneck at one site (a tensor of the layer's output,
        or its input): read ``X`` and the prior's statistics, build the seam
        that puts ``T`` in its place, and run the loop."""
        clean, inputs, extra, rows = call
        x, x_in, template = _seam.read_site(site, record, self._device_ids())
        if clean is not None:  # else checked as the loss (_loop._check_finite)
            _inputs.check_finite_output(clean, site.name)
        mask = _seam.site_mask(token_mask, x, run.mask_explicit)
        options = run.options
        removable, groups = tokens  # which tokens removal may take, which share
        if removable is not None:
            removable = removable.to(mask.device).bool()
        layer = _loop.Layer.from_prior(
            options.prior, x, mask, x_in, baseline, removable
        )
        layer.groups = _seam.site_groups(groups, x, site.name)
        stack, key = self._site_path(site)
        seam = _seam.Seam(
            self.forward_func, site, _seam.CleanRun(inputs, extra, clean, x, template),
            rows, options.n_samples, stack, self._device_ids(), self.cuts,
            path=self._paths.get(key), attention=options.removal == "attention",
            precision=run.precision, constant=self.unbatched_args,
        )  # fmt: skip
        self._paths[key] = seam.path
        unread = ""
        if stack is not None and stack[1] == len(stack[0]) - 1 and not site.on_input:
            if _ranking.reads_first_token_only(
                self.forward_func, site.layer, site.position, inputs, extra, x
            ):
                unread = _ranking.first_token_reason(site.name, stack)
        per_pass = _speed.rows_per_pass(
            inputs[0], options.internal_batch_size, self.cuts
        )
        with seam:
            attr, info = _loop.optimise(
                layer, seam, task, options, run.seed, rows_per_pass=per_pass,
                pair_terms=self.cuts,
            )  # fmt: skip
        info = dict(info, path=seam.path.route, cuts=seam.path.cuts, no_ranking=unread)
        known = _tokens.known_removable(
            self.forward_func, self.special_token_ids, inputs[0], token_mask
        )
        info["flat_rows"] = _ranking.token_flat_rows(attr, mask, known)
        info.update(prior=options.prior.name, precision=run.precision)
        return attr.to(x.device), info

    def _special_ids(self) -> List[int]:
        return _tokens.special_ids(self.forward_func, self.special_token_ids)

    def _device_ids(self) -> Optional[List[int]]:
        """``device_ids``, or those of a ``DataParallel`` forward_func."""
        return self.device_ids or getattr(self.forward_func, "device_ids", None)


@dataclass
class _AttributeCall:
    """What stays fixed over one ``attribute`` call's chunks (the objective
    is resolved on the first chunk's output)."""

    options: IBAOptions
    seed: int
    mask_explicit: bool
    precision: str = "float32"
    objective: Optional[Objective] = None


def _concat(parts: Tuple[Any, ...]) -> Any:
    """Chunks joined along the batch (a tuple per layer output tensor)."""
    if isinstance(parts[0], tuple):
        return tuple(torch.cat(p) for p in zip(*parts))
    return torch.cat(parts)


InformationBottleneckAttribution.attribute.__doc__ = (
    InformationBottleneckAttribution.attribute.__doc__ or ""
).replace("{options}", options_doc(indent=16, bullets=True))
