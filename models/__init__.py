"""Model functions, registered by name. Models read no files but a pretrained backbone's weights
file (backbone_weights.py).

One module per model (registry.MODEL_MODULES), over heads/ (the head family every model_fn ends
in), tables/ (the models over a table's schema) and the shared pieces (training, precision,
class_weights, eval_pictures, drawing, blocks, backbones, registry). Imports common and features.
"""
