"""Input kinds: what feeds a family of models, for training, evaluation, benchmarks and serving.
Imports trainer.model_dir and trainer.cluster.
"""
