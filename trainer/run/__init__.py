"""Running a model_dir: the Experiment's parts, hooks, checkpoints, the training lease, run files."""
