r"""How the degradation test removes tokens: removal strategies.

A strategy is a small frozen object, given as
:attr:`DegradationOptions.removal <captum_iba.metrics.options.DegradationOptions>`:

* :class:`Deletion` (the paper's, the default): removed tokens leave the
  sequence, which is compacted; the attention mask, the segment ids and every
  per-token additional argument follow, and the freed tail is padding.
* :class:`Replacement`: removed tokens are replaced by one token id, positions
  unchanged; :meth:`Replacement.mask`, :meth:`Replacement.pad` and
  :meth:`Replacement.unk` take the id from a tokenizer, once.
* :class:`CustomRemoval`: any other substitution, as a function of the token
  ids and the positions to remove (what Captum's ``perturb_func`` is to
  :func:`captum.metrics.infidelity`).

:func:`as_removal` is the one conversion of the names earlier versions took
(``removal="delete"``, ``"mask"``, ``"pad"``, ``"unk"`` or a token id) into a
strategy.
"""

import numbers
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Dict, Optional, Union

import torch
from torch import Tensor

__all__ = [
    "CustomRemoval",
    "Deletion",
    "RemovalStrategy",
    "Replacement",
    "REMOVAL_NAMES",
    "as_removal",
]

#: The removal names :func:`as_removal` converts.
REMOVAL_NAMES = ("delete", "mask", "pad", "unk")

#: What :func:`as_removal` accepts.
RemovalLike = Union["RemovalStrategy", str, int, Callable[[Tensor, Tensor], Tensor]]


def _token_id(value: Any, what: str) -> int:
    """``value`` as a token id: a non-negative integer (not a bool)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Integral)
        or int(value) < 0
    ):
        raise ValueError(
            f"{what} must be a token id of the model's vocabulary (a non-negative "
            f"integer); got {value!r}"
        )
    return int(value)


class RemovalStrategy:
    """Base class of the removal strategies (use a subclass).

    :class:`Deletion` shortens the sequences; every other strategy changes the
    removed ids in place through :meth:`apply`. For a removal of your own, wrap
    a function in :class:`CustomRemoval`.

    Attributes:
        name (str): Recorded as ``settings["removal"]`` of the result.
    """

    name: str = ""

    def record(self) -> Dict[str, Any]:
        """dict: What the result records about the strategy (``removal``,
        ``replacement_id``, and any setting of its own)."""
        return {"removal": self.name, "replacement_id": None}

    def check_vocabulary(self, vocab_size: Optional[int]) -> None:
        """Raise ValueError when the strategy uses an id outside a vocabulary of
        ``vocab_size`` tokens (None: unknown, nothing checked)."""

    def apply(self, input_ids: Tensor, removed: Tensor) -> Tensor:
        """The ``(N, L)`` ids with the ``removed`` positions changed (in-place
        strategies; see :class:`CustomRemoval` for the contract).

        Raises:
            NotImplementedError: In a strategy that does not change ids in place.
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not change ids in place: wrap a function "
            "(input_ids, removed) -> input_ids in CustomRemoval"
        )


@dataclass(frozen=True)
class Deletion(RemovalStrategy):
    """Removed tokens leave the sequence (the paper's removal).

    Each degraded sequence is compacted to the left; the attention mask, the
    segment ids and every per-token additional argument (shape ``(B, L, ...)``)
    follow, and the freed tail is padding: ``pad_token_id``, mask 0, other
    tensors 0. Batches are trimmed to their longest remaining sequence (or, with
    ``DegradationOptions.group_by_length``, called per remaining length); an
    empty remainder is one padding token with mask 0.

    Args:
        pad_token_id (int, optional): The id of the freed tail. Default None: the
            options' ``pad_token_id``, else 0.
    """

    pad_token_id: Optional[int] = None
    name: ClassVar[str] = "delete"

    def __post_init__(self) -> None:
        if self.pad_token_id is not None:
            pad = _token_id(self.pad_token_id, "Deletion.pad_token_id")
            object.__setattr__(self, "pad_token_id", pad)

    def record(self) -> Dict[str, Any]:
        """dict: ``removal="delete"``, and the fill id when set here."""
        out = super().record()
        if self.pad_token_id is not None:
            out["fill_token_id"] = self.pad_token_id
        return out

    def check_vocabulary(self, vocab_size: Optional[int]) -> None:
        """See :meth:`RemovalStrategy.check_vocabulary`."""
        _check_in_vocabulary(self.pad_token_id, vocab_size, "deletion fill")


@dataclass(frozen=True)
class Replacement(RemovalStrategy):
    """Removed tokens are replaced by one token id; positions, attention mask
    and segment ids are unchanged.

    Args:
        token_id (int): The replacement id.
        name (str): Recorded as ``settings["removal"]``: ``"mask"``, ``"pad"``,
            ``"unk"`` for those tokens (:meth:`mask`, :meth:`pad`, :meth:`unk`),
            ``"replace"`` (the default) for any other id.

    Examples::

        >>> Replacement.mask(tokenizer)          # [MASK], id from the tokenizer
        >>> Replacement(0, name="pad")           # an explicit id
    """

    token_id: int
    name: str = "replace"

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "token_id", _token_id(self.token_id, "Replacement.token_id")
        )
        if not isinstance(self.name, str) or not self.name or self.name == "delete":
            raise ValueError(
                f"Replacement.name must be a non-empty name other than 'delete'; "
                f"got {self.name!r}"
            )

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, token: str) -> "Replacement":
        """The replacement by a tokenizer's ``token`` (``"mask"``, ``"pad"`` or
        ``"unk"``), named after it.

        Raises:
            ValueError: For another ``token``, or a tokenizer without that token.
        """
        if token not in REMOVAL_NAMES[1:]:
            raise ValueError(f"token must be one of {REMOVAL_NAMES[1:]}; got {token!r}")
        token_id = getattr(tokenizer, f"{token}_token_id", None)
        if token_id is None:
            raise ValueError(
                f"the tokenizer has no {token} token ({token}_token_id is None): "
                f"use Replacement(<id>, name={token!r}) with an id of your choice"
            )
        return cls(token_id, name=token)

    @classmethod
    def mask(cls, tokenizer: Any) -> "Replacement":
        """Replacement by the tokenizer's mask token (``[MASK]``)."""
        return cls.from_tokenizer(tokenizer, "mask")

    @classmethod
    def pad(cls, tokenizer: Any) -> "Replacement":
        """Replacement by the tokenizer's padding token (attention mask unchanged)."""
        return cls.from_tokenizer(tokenizer, "pad")

    @classmethod
    def unk(cls, tokenizer: Any) -> "Replacement":
        """Replacement by the tokenizer's unknown token."""
        return cls.from_tokenizer(tokenizer, "unk")

    def record(self) -> Dict[str, Any]:
        """dict: ``removal`` (the name) and ``replacement_id``."""
        return {"removal": self.name, "replacement_id": self.token_id}

    def check_vocabulary(self, vocab_size: Optional[int]) -> None:
        """See :meth:`RemovalStrategy.check_vocabulary`."""
        _check_in_vocabulary(self.token_id, vocab_size, "replacement")

    def apply(self, input_ids: Tensor, removed: Tensor) -> Tensor:
        """``input_ids`` with the ``removed`` positions set to :attr:`token_id`."""
        return input_ids.masked_fill(removed, self.token_id)


@dataclass(frozen=True)
class CustomRemoval(RemovalStrategy):
    """Removal by a function of yours; positions, attention mask and segment
    ids are unchanged.

    The function is called once per model call of the test, as
    ``func(input_ids, removed)``:

    * ``input_ids``: ``(N, L)`` long CPU tensor, the token ids of ``N`` jobs
      (an instance at one removal level, in any order; padding included);
    * ``removed``: ``(N, L)`` bool CPU tensor, True at the positions to remove
      (never at padding or, with ``keep_special_tokens``, a special token).

    It returns the degraded ids: an integer tensor of shape ``(N, L)``, of which
    only the ``removed`` positions are used (the others keep their ids). It must
    not modify its arguments in place, and should treat each row on its own
    (the test's batching is free to group the jobs in any way). For a random
    replacement, seed a generator from the row (e.g.
    :func:`~captum_iba._utils.common.instance_seed`) so that results do not
    depend on the batching.

    Args:
        func (Callable): ``(input_ids, removed) -> input_ids``.
        label (str, optional): Recorded as ``settings["removal_func"]``.
            Default the function's qualified name.

    Examples::

        >>> def substitute(ids, removed):  # a fixed stand-in id per token
        ...     return torch.where(removed, (ids * 31 + 7) % 30522, ids)
        >>> options = DegradationOptions(removal=CustomRemoval(substitute))
    """

    func: Callable[[Tensor, Tensor], Tensor]
    name: ClassVar[str] = "custom"
    label: Optional[str] = None

    def __post_init__(self) -> None:
        if not callable(self.func) or isinstance(self.func, type):
            raise ValueError(
                "CustomRemoval.func must be a function (input_ids, removed) -> "
                f"input_ids; got {self.func!r}"
            )
        if self.label is None:
            label = getattr(self.func, "__qualname__", type(self.func).__qualname__)
            object.__setattr__(self, "label", label)

    def record(self) -> Dict[str, Any]:
        """dict: ``removal="custom"`` and the function's name."""
        return dict(super().record(), removal_func=self.label)

    def apply(self, input_ids: Tensor, removed: Tensor) -> Tensor:
        """The function's output at the ``removed`` positions, ``input_ids``
        elsewhere: ``(N, L)`` long, on the CPU.

        Raises:
            ValueError: When the function returns something else.
        """
        out = self.func(input_ids, removed)
        if not isinstance(out, Tensor) or tuple(out.shape) != tuple(input_ids.shape):
            got = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
            raise ValueError(
                f"removal function {self.label} must return the token ids as a "
                f"tensor of shape {tuple(input_ids.shape)}; got {got}"
            )
        if out.is_floating_point() or out.is_complex() or out.dtype == torch.bool:
            raise ValueError(
                f"removal function {self.label} returned {out.dtype} values, not "
                "integer token ids"
            )
        return torch.where(removed, out.to("cpu", torch.long), input_ids)


def _check_in_vocabulary(
    token_id: Optional[int], vocab_size: Optional[int], what: str
) -> None:
    if token_id is not None and isinstance(vocab_size, int) and token_id >= vocab_size:
        raise ValueError(
            f"{what} token id {token_id} is not in the model's vocabulary "
            f"(0..{vocab_size - 1})"
        )


def as_removal(
    removal: RemovalLike,
    tokenizer: Any = None,
    *,
    pad_token_id: Optional[int] = None,
    mask_token_id: Optional[int] = None,
    unk_token_id: Optional[int] = None,
) -> RemovalStrategy:
    """The removal strategy named by ``removal`` (the forms earlier versions took).

    * a :class:`RemovalStrategy`: itself;
    * ``"delete"``: ``Deletion()``;
    * ``"mask"``, ``"pad"``, ``"unk"``: ``Replacement(id, name=...)``, the id
      given here (``mask_token_id`` ...) or else the tokenizer's;
    * an ``int``: ``Replacement(id)`` (recorded as ``"replace"``);
    * a function: ``CustomRemoval(func)``.

    Args:
        removal (RemovalStrategy, str, int or Callable): See above.
        tokenizer (optional): A Hugging Face tokenizer, for the named tokens.
        pad_token_id (int, optional): The ``"pad"`` id (wins over the tokenizer's).
        mask_token_id (int, optional): The ``"mask"`` id (wins over the tokenizer's).
        unk_token_id (int, optional): The ``"unk"`` id (wins over the tokenizer's).

    Returns:
        RemovalStrategy: The strategy.

    Raises:
        ValueError: On an unknown name, or a named token whose id is unknown.
    """
    if isinstance(removal, RemovalStrategy):
        return removal
    if isinstance(removal, numbers.Integral) and not isinstance(removal, bool):
        return Replacement(removal)
    if isinstance(removal, str):
        if removal not in REMOVAL_NAMES:
            raise ValueError(
                f"unknown removal mode {removal!r}: use one of {REMOVAL_NAMES}, a "
                "token id or a RemovalStrategy (Deletion, Replacement, CustomRemoval)"
            )
        if removal == "delete":
            return Deletion()
        explicit = {"pad": pad_token_id, "mask": mask_token_id, "unk": unk_token_id}
        token_id = explicit[removal]
        if token_id is None and tokenizer is not None:
            token_id = getattr(tokenizer, f"{removal}_token_id", None)
        if token_id is None:
            raise ValueError(
                f"removal={removal!r} needs the {removal} token id "
                f"({removal}_token_id): build the options with "
                f"DegradationOptions.for_tokenizer(tokenizer, removal={removal!r}), "
                f"or pass Replacement(<id>, name={removal!r})"
            )
        return Replacement(token_id, name=removal)
    if callable(removal) and not isinstance(removal, type):
        return CustomRemoval(removal)
    raise ValueError(
        f"unknown removal mode {removal!r}: use one of {REMOVAL_NAMES}, a token id "
        "or a RemovalStrategy (Deletion, Replacement, CustomRemoval)"
    )
