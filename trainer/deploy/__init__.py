"""`python -m trainer.deploy` (`./run.sh deploy`): the manifests that run the trainer as a cluster
on Kubeflow or Vertex AI. A command of its own: nothing here is imported by a training task.
Imports trainer.config, trainer.evaluation and the packages below them.
"""
