"""The prepare command, `python -m input_fns.prepare`: its flags and the dispatch to each kind's
writer. Nothing imports it but its own __main__ (and tests); it may import all of input_fns.
"""
