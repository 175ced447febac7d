"""The application layer: data, fine-tuning, reproduction, the command line.

* :mod:`~captum_iba.app.data` - loaders of the text-classification corpora;
* :mod:`~captum_iba.app.finetune` - the fine-tuning recipes, the training loop
  and the cache of fine-tuned models.

Reproduction of the paper's results and the command line belong here too. The
core (:mod:`captum_iba.attr`, :mod:`captum_iba.metrics`, the evaluation and
visualization code, :mod:`captum_iba._utils`) never imports this package.
"""
