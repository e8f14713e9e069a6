"""Running a model_dir: the Experiment's parts, the mode runners, hooks, the end of a job.
Imports every trainer package but deploy.
"""
