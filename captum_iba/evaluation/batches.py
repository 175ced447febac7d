"""The batches a method explains, re-exported: they live with the other
batch types in :mod:`captum_iba.attr.batches` (one layer), where
:class:`TokenBatch` and :func:`rows_per_pass` are documented."""

from captum_iba.attr.batches import ROW_TOKENS, TokenBatch, rows_per_pass

__all__ = ["ROW_TOKENS", "TokenBatch", "rows_per_pass"]
