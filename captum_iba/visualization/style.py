"""How a token heatmap chooses its tokens and colours its scores.

:class:`HeatmapStyle` holds the options that :func:`prepare_tokens`,
:func:`heatmap_records`, :func:`text_heatmap_html` and
:func:`layer_token_heatmap` share. Each of them takes ``style=`` and, as
before, the same options as keyword arguments (``merge_subwords=True``, ...),
which are applied over ``style`` and checked once by
:meth:`HeatmapStyle.resolve`.
"""

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Tuple

__all__ = ["DEFAULT_SKIP_TOKENS", "HeatmapStyle"]

#: The colour scales of the HTML heatmaps (see :func:`scale_scores`).
SCALES: Tuple[str, ...] = ("auto", "minmax", "max")
#: Padding tokens of the common Hugging Face tokenizers; never shown by default.
DEFAULT_SKIP_TOKENS: Tuple[str, ...] = ("[PAD]", "<pad>")


@dataclass(frozen=True)
class HeatmapStyle:
    """Which tokens a heatmap shows, and how their scores become colours.

    Attributes:
        skip_tokens (Iterable[str]): Tokens never shown (kept as a tuple).
            Default: :data:`DEFAULT_SKIP_TOKENS` (``"[PAD]"``, ``"<pad>"``).
            Add ``"[CLS]"``, ``"[SEP]"`` to hide the special tokens too.
        merge_subwords (bool): Merge ``"##"`` word pieces into words, summing
            their scores (:func:`merge_word_pieces`). Default: False.
        subword_prefix (str): The continuation marker. Default ``"##"``.
        scale (str): How scores become colours, per instance over the tokens
            shown (see :func:`scale_scores`): ``"auto"`` (the default: the
            paper's min-max scale when every score is >= 0, as IBA's
            capacities are, and a diverging scale, score / largest
            magnitude, when some are negative, as integrated gradients'
            are), ``"minmax"`` or ``"max"`` (score / largest magnitude). IBA's
            capacities are large and close together (e.g. 1,900-2,100 nats per
            token), so ``"max"`` colours every token alike. Used by the HTML
            heatmaps; :func:`layer_token_heatmap` has ``normalize`` instead.

    Examples::

        >>> style = HeatmapStyle(merge_subwords=True, skip_tokens=["[PAD]", "[CLS]"])
        >>> html = text_heatmap_html(tokens, scores, style=style)
        >>> # the same page, with the options as keywords:
        >>> html = text_heatmap_html(tokens, scores, merge_subwords=True,
        ...                          skip_tokens=["[PAD]", "[CLS]"])
    """

    skip_tokens: Iterable[str] = DEFAULT_SKIP_TOKENS
    merge_subwords: bool = False
    subword_prefix: str = "##"
    scale: str = "auto"

    def __post_init__(self) -> None:
        object.__setattr__(self, "skip_tokens", tuple(self.skip_tokens))
        if self.scale not in SCALES:
            raise ValueError(f"scale must be one of {SCALES}, got {self.scale!r}")

    @classmethod
    def resolve(
        cls,
        style: Optional["HeatmapStyle"],
        options: Mapping[str, Any],
        caller: str,
        allowed: Optional[Iterable[str]] = None,
    ) -> "HeatmapStyle":
        """The style of one call: ``style`` with the keyword ``options`` over it.

        Args:
            style (HeatmapStyle, optional): The base style. Default: the
                defaults.
            options (Mapping[str, Any]): Style options given as keywords.
            caller (str): The public function's name, for the error message.
            allowed (Iterable[str], optional): The option names the caller
                takes. Default: every field.

        Returns:
            HeatmapStyle: The style to use.

        Raises:
            TypeError: Naming the first keyword that is not a style option, or
                when ``style`` is not a :class:`HeatmapStyle`.
        """
        if style is None:
            style = cls()
        elif not isinstance(style, cls):
            raise TypeError(
                f"{caller}(): style must be a HeatmapStyle; got {type(style).__name__}"
            )
        names = [f.name for f in dataclasses.fields(cls)]
        allowed = names if allowed is None else list(allowed)
        for key in options:
            if key not in allowed:
                raise TypeError(
                    f"{caller}() got an unexpected keyword argument {key!r} (style "
                    f"options: {', '.join(allowed)})"
                )
        return dataclasses.replace(style, **options) if options else style


#: The style options of the functions that only select tokens (no colour scale).
TOKEN_OPTIONS: Tuple[str, ...] = ("skip_tokens", "merge_subwords", "subword_prefix")
