"""IBA as an `inseq <https://inseq.org>`_ attribution method (optional extra).

Importing this module registers the method ``"information_bottleneck"`` with
inseq. inseq 0.7 declares CUDA 11 libraries as dependencies on Linux; next to
an installed torch, install it without them:
``pip install --no-deps inseq jaxtyping "typeguard<=2.13.3" treescope
wadler_lindig``. ::

    import inseq
    import captum_iba.attr.inseq_method  # noqa: F401  (registers the method)

    model = inseq.load_model(hf_model, "information_bottleneck", tokenizer=tok,
                             target_layer="transformer.h.2")
    out = model.attribute("The cat", "The cat sat on the mat", steps=10, seed=0)
    out.show()

inseq attributes one generation step at a time: its forward returns one score
per sequence (by default the probability of the step's target token), which
IBA keeps high (objective ``"score"`` by default; pass ``objective=`` among the
attribution arguments to change it). The step's attention mask is passed to
IBA as ``token_mask``, so left padding gets no capacity. The bottleneck sits
after ``target_layer`` (default: inseq's choice, the embedding layer).
"""

from typing import Any, Dict

from inseq.attr.feat.gradient_attribution import GradientAttributionRegistry

from captum_iba.attr.iba import InformationBottleneckAttribution

__all__ = ["InformationBottleneckInseqAttribution"]

#: Position of the attention mask among inseq's additional forward arguments
#: (input ids, target ids, attributed function, attention mask, ...).
_MASK_POSITION = 3


class InformationBottleneckInseqAttribution(GradientAttributionRegistry):
    """inseq's wrapper of :class:`~captum_iba.InformationBottleneckAttribution`.

    Args:
        attribution_model: inseq's attribution model (built by
            ``inseq.load_model``).
        **kwargs: ``target_layer`` (a module or its dotted name in the model).
    """

    method_name = "information_bottleneck"

    def __init__(self, attribution_model: Any, **kwargs: Any) -> None:
        super().__init__(attribution_model, hook_to_model=False)
        self.attribute_batch_ids = True
        self.forward_batch_embeds = False
        self.use_baselines = False
        self.hook(**kwargs)
        self.method = InformationBottleneckAttribution(
            self.attribution_model, self.target_layer
        )

    def attribute_step(
        self,
        attribute_fn_main_args: Dict[str, Any],
        attribution_args: Dict[str, Any] = {},  # noqa: B006 (inseq's signature)
    ) -> Any:
        """One generation step: IBA with the step's attention mask."""
        args = dict(attribution_args)
        extra = attribute_fn_main_args.get("additional_forward_args", ())
        if "token_mask" not in args and len(extra) > _MASK_POSITION:
            args["token_mask"] = extra[_MASK_POSITION]
        return super().attribute_step(attribute_fn_main_args, args)
