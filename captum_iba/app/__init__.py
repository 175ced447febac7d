"""The application layer: data, fine-tuning, models, reproduction and the CLI.

* :mod:`~captum_iba.app.data` - loaders of the text-classification corpora;
* :mod:`~captum_iba.app.finetune` - the fine-tuning recipes, the training loop
  and the cache of fine-tuned models;
* :mod:`~captum_iba.app.models` - loading classifiers with ``from_pretrained``;
* :mod:`~captum_iba.app.reproduce` - the paper's experiments;
* :mod:`~captum_iba.app.cli` and :mod:`~captum_iba.app.commands` - the
  ``captum-iba`` command; :mod:`~captum_iba.app.checks` - its argument checks,
  run before any model loads.

The core (:mod:`captum_iba.attr`, :mod:`captum_iba.metrics`,
:mod:`captum_iba.evaluation`, :mod:`captum_iba.visualization`,
:mod:`captum_iba._utils`) never imports this package.
"""
