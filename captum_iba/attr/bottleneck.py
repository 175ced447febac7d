r"""The per-sample information bottleneck, equation by equation.

This module is meant to be read next to Section 3 and Appendix A of
Jiang, Tang, Xin & Lin, "Inserting Information Bottlenecks for Attribution in
Transformers" (EMNLP Findings 2020), which builds on Schulz et al. (ICLR 2020).
It holds only the mathematics; the Captum adapter that inserts the bottleneck
into a model lives in :mod:`captum_iba.attr.iba` and the noise priors
(where :math:`\mu` and :math:`\sigma` come from) in :mod:`captum_iba.attr.priors`.

Notation (the paper's): ``x`` is the chosen layer's output :math:`X`,
``alpha`` the learnable parameter with :math:`\lambda = \sigma(\alpha)`
(the paper writes :math:`\boldsymbol{\mu}` for :math:`\lambda`), and ``mean`` /
``std`` the statistics :math:`\mu_X, \sigma_X` of the noise
:math:`\epsilon \sim \mathcal{N}(\mu_X, \sigma_X^2)` and of the variational prior
:math:`Q(T) = \mathcal{N}(\mu_X, \sigma_X^2)`.

All capacities are in **nats** (natural logarithm); divide by
:data:`NATS_PER_BIT` for bits.
"""

import math
from typing import Union

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = [
    "NATS_PER_BIT",
    "attention_keep_bias",
    "bottleneck_lambda",
    "capacity",
    "complement_term",
    "empirical_beta",
    "inject_noise",
    "information_bottleneck_loss",
    "token_lambda",
]

#: Number of nats in one bit (``ln 2``): ``capacity_bits = capacity / NATS_PER_BIT``.
NATS_PER_BIT = math.log(2.0)


def bottleneck_lambda(alpha: Tensor) -> Tensor:
    r"""The signal weight :math:`\lambda = \sigma(\alpha) \in (0, 1)` (Section 3).

    Args:
        alpha (Tensor): The learnable parameter, any shape.

    Returns:
        Tensor: ``sigmoid(alpha)``, same shape.
    """
    return torch.sigmoid(alpha)


def inject_noise(
    x: Tensor, alpha: Tensor, mean: Tensor, std: Tensor, noise: Tensor
) -> Tensor:
    r"""Eq. (2): :math:`T = \lambda \odot X + (1 - \lambda) \odot \epsilon`.

    The noise is drawn as :math:`\epsilon = \mu + \sigma \cdot z` with
    :math:`z \sim \mathcal{N}(0, 1)` given as ``noise``, so that ``T`` is
    differentiable with respect to ``alpha`` (the reparameterisation trick).

    Args:
        x (Tensor): The layer output :math:`X`.
        alpha (Tensor): The parameter, broadcastable to ``x``.
        mean (Tensor): :math:`\mu`, broadcastable to ``x``.
        std (Tensor): :math:`\sigma`, broadcastable to ``x``.
        noise (Tensor): Standard normal draws :math:`z`, shape of ``x``.

    Returns:
        Tensor: The bottleneck output :math:`T`, shape of ``x``.
    """
    lam = bottleneck_lambda(alpha)
    return lam * x + (1.0 - lam) * (mean + std * noise)


def capacity(x: Tensor, alpha: Tensor, mean: Tensor, std: Tensor) -> Tensor:
    r"""Eqs. (3)-(4): :math:`D_{KL}[P(T \mid X) \,\|\, Q(T)]` per element, in nats.

    With Eq. (2), :math:`P(T \mid X) = \mathcal{N}(\lambda X + (1 - \lambda)\mu,
    (1 - \lambda)^2 \sigma^2)` and :math:`Q(T) = \mathcal{N}(\mu, \sigma^2)`.
    Standardising both by :math:`\mu, \sigma` gives the closed form

    .. math::
        D_{KL} = \tfrac{1}{2}\left(\sigma_z^2 + \mu_z^2 - 1 - \ln \sigma_z^2\right),
        \quad \mu_z = \lambda \frac{X - \mu}{\sigma},
        \quad \sigma_z^2 = (1 - \lambda)^2.

    :math:`\ln \sigma_z^2 = 2 \ln(1 - \lambda) = 2 \ln \sigma(-\alpha)` is computed
    from ``alpha`` with ``logsigmoid`` so that it stays finite as
    :math:`\lambda \to 1`. Summed over elements this is the variational upper
    bound on :math:`I(X; T)` of Eq. (4).

    Args:
        x (Tensor): The layer output :math:`X`.
        alpha (Tensor): The parameter, broadcastable to ``x``.
        mean (Tensor): :math:`\mu`, broadcastable to ``x``.
        std (Tensor): :math:`\sigma > 0`, broadcastable to ``x``.

    Returns:
        Tensor: The capacity of every element, in nats, shape of ``x``.
    """
    lam = bottleneck_lambda(alpha)
    mu_z = lam * (x - mean) / std
    log_var_z = 2.0 * F.logsigmoid(-alpha)
    var_z = torch.exp(log_var_z)
    return 0.5 * (var_z + mu_z**2 - 1.0 - log_var_z)


def information_bottleneck_loss(
    task_loss: Tensor, mean_capacity: Tensor, beta: Union[Tensor, float]
) -> Tensor:
    r"""Eq. (5): :math:`\mathcal{L} = \mathcal{L}_{CE} + \beta \cdot
    \mathbb{E}[D_{KL}[P(T \mid X) \| Q(T)]]`.

    As in Schulz et al., the expectation is the mean capacity over the
    bottleneck's elements (here: over the real tokens and features of one
    instance), so that ``beta`` does not depend on the sequence length.

    Args:
        task_loss (Tensor): :math:`\mathcal{L}_{CE}`, per instance.
        mean_capacity (Tensor): Mean capacity, per instance, in nats.
        beta (Tensor or float): The trade-off :math:`\beta \ge 0`, scalar or per
            instance.

    Returns:
        Tensor: The loss per instance.
    """
    return task_loss + beta * mean_capacity


def empirical_beta(
    task_loss: Tensor, total_capacity: Tensor, scale: float = 10.0
) -> Tensor:
    r"""Appendix A: :math:`\beta \approx 10 \times \mathcal{L}_{CE} / \mathcal{L}_{IB}`.

    Both losses are taken at the start of the optimisation (``alpha`` at its
    initial value), per instance, and treated as constants. :math:`\mathcal{L}_{IB}`
    is the *total* capacity of the instance's bottleneck (summed over its
    tokens and features): with it the rule gives the paper's
    :math:`\beta \approx 10^{-5}` for BERT-base, whereas the mean capacity per
    element (which the loss of Eq. (5) weighs with :math:`\beta`) would give
    values around :math:`10^{-2}`-:math:`1`.

    Args:
        task_loss (Tensor): :math:`\mathcal{L}_{CE}` per instance.
        total_capacity (Tensor): :math:`\mathcal{L}_{IB}`, the summed capacity
            per instance, in nats.
        scale (float, optional): The factor, 10 in the paper. Default: 10.

    Returns:
        Tensor: :math:`\beta` per instance (detached).
    """
    ratio = task_loss.detach() / total_capacity.detach().clamp_min(1e-12)
    return scale * ratio


# ---------------------------------------------------------------------------
# Not in the paper: deletion as the removal, and the complement term
# (docs/method.rst, "iba-deletion"; docs/studies/faithfulness_round2.rst).
# ---------------------------------------------------------------------------


def token_lambda(alpha: Tensor) -> Tensor:
    r"""Eq. (R1): one signal weight per token, :math:`\bar\lambda_t =
    \operatorname{mean}_h \sigma(\alpha_{t,h})`, for a ``(B, L, H)`` (or
    ``(B, L)``) ``alpha``.

    Args:
        alpha (Tensor): The parameter, ``(B, L, *features)`` or ``(B, L)``.

    Returns:
        Tensor: ``(B, L)``, in (0, 1).
    """
    lam = bottleneck_lambda(alpha)
    return lam.reshape(lam.shape[0], lam.shape[1], -1).mean(-1)


def attention_keep_bias(keep: Tensor) -> Tensor:
    r"""Eq. (R2): the additive attention bias that removes token :math:`t` to
    the degree :math:`1 - \bar\lambda_t`.

    Adding :math:`\ln \bar\lambda_t` to every attention logit
    :math:`s_{q,t}` towards token :math:`t` gives the weights

    .. math::
        a'_{q,t} = \frac{\bar\lambda_t\, e^{s_{q,t}}}
                        {\sum_k \bar\lambda_k\, e^{s_{q,k}}},

    so at :math:`\bar\lambda_t = 1` the attention is unchanged and as
    :math:`\bar\lambda_t \to 0` no query reads token :math:`t`: in every
    layer where the bias is added, the model computes what it computes with
    the token's attention mask set to 0, i.e. with the token deleted (its
    position ids kept).

    Args:
        keep (Tensor): :math:`\bar\lambda`, ``(B, L)`` in [0, 1].

    Returns:
        Tensor: ``(B, 1, 1, L)``, :math:`\ln \bar\lambda` (floored at the
        dtype's smallest normal number, so that 0 gives a large negative
        bias rather than -inf).
    """
    tiny = torch.finfo(keep.dtype).tiny
    return torch.log(keep.clamp_min(tiny))[:, None, None, :]


def complement_term(complement_task_loss: Tensor, gamma: float) -> Tensor:
    r"""Eq. (R3): :math:`\gamma\, e^{-\mathcal{L}_{task}(1 - \lambda)}`, per row.

    :math:`\mathcal{L}_{task}(1 - \lambda)` is the task loss when the mask is
    inverted (the tokens the mask keeps are removed and those it removes
    kept); for a loss in nats (the cross-entropy of the target),
    :math:`e^{-\mathcal{L}}` is the target's probability on that input. Adding
    it to Eq. (5) asks the tokens the mask keeps to be *necessary* as well as
    sufficient: removing them should take the prediction away, which is what
    the deletion test measures (the "complement" of Yu et al., 2019; the
    deletion game of Fong & Vedaldi, 2017).

    Args:
        complement_task_loss (Tensor): The task loss of each row with the
            inverted mask, in nats.
        gamma (float): The weight :math:`\gamma \ge 0`.

    Returns:
        Tensor: The term per row.
    """
    return gamma * torch.exp(-complement_task_loss)
