"""captum-iba: Information Bottleneck Attribution for transformers, for Captum."""

from captum_iba.version import __version__

__all__ = ["__version__"]
