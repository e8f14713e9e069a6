"""Model functions, registered by name. Models read no files but a pretrained backbone's weights
file (backbone_weights.py).
Imports common and features.
"""
