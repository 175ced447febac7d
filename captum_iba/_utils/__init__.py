"""Internal helpers shared by every layer of the package (not public API).

* :mod:`~captum_iba._utils.common` - targets, devices, special ids, the Hugging
  Face positional call and the logits of a forward's output;
* :mod:`~captum_iba._utils.captum_compat` - the ONLY module importing Captum's
  private helpers;
* :mod:`~captum_iba._utils.modules` - the stack of transformer blocks of a model;
* :mod:`~captum_iba._utils.hooks` - reading and replacing a layer's output
  (forward hooks, and the stack replay of the fast path).
"""
