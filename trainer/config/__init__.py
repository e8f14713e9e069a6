"""What a run is asked to do: the absl flag groups, Settings, the modes, --model_params, and
what tuning searches and reads.
Imports trainer.usr_dir, trainer.api, trainer.serving and the packages below them.
"""
