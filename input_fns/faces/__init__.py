"""Faces: photo folders in LFW's layout and its pair lists, person and pair records, the pair
sampler that streams training pairs, and synthetic faces for offline runs. Imports
input_fns.images, input_fns.records and common.
"""
