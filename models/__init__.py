"""Model functions, registered by name. Models read no files.
Imports common and features.
"""
