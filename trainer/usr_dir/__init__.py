"""--usr_dir: folders of the user's own modules, imported before the trainer's flags are defined,
so that the models and input kinds they register (through trainer/api.py) are --model choices
with their params' flags, as tensor2tensor's --t2t_usr_dir adds problems and models.

folders.py finds each folder (a bucket's is copied to a local cache first) and hashes its
files; modules.py imports them; command_line.py reads --usr_dir before absl parses the flags
(from the command line, its --flagfile, or MODEL_DIR/flags.txt) and writes what flags.txt records.
Imports trainer.input_kinds and the packages below it.
"""
