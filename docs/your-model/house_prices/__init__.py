"""House prices from four numbers: an input kind of its own over tf.Example records
(records.py) and a regression model with a `regress` signature (model.py).

A package: --usr_dir=docs/your-model/house_prices imports it, and it imports its modules.
"""
from . import model, records  # noqa: F401  (each registers what it defines)
