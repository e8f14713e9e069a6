"""What a run is asked to do: the absl flag groups and the parsing of --model_params."""
