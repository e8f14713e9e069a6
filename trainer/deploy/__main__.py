"""Job specs that run the trainer as a TF_CONFIG cluster on Kubeflow or Vertex AI.

  python -m trainer.deploy tfjob --name=NAME --image=IMAGE --workers=2 --ps=1 --evaluator \
      [--gpus=1] [--network_policy] [--env_from_secret=SECRET] [--env=KEY=VALUE] \
      [--service_account=NAME] -- --model_dir=gs://BUCKET/run --train_files=... [trainer flags]
  python -m trainer.deploy vertex --name=NAME --image=IMAGE --workers=2 --ps=1 --evaluator \
      [--service_account=EMAIL] [--tensorboard=RESOURCE] [--env=KEY=VALUE] \
      -- --model_dir=gs://BUCKET/run --train_files=... [trainer flags]
  (either with --sync instead of --ps: synchronous all-reduce, no parameter servers)

`tfjob` prints a kubeflow.org/v1 TFJob (and with --network_policy a NetworkPolicy
that lets only the job's own pods reach its gRPC port: TensorFlow's runtime has no
authentication); `vertex` prints a Vertex AI CustomJob spec (JSON). Every replica
runs `python -m trainer.main` (the image's entry point) with the trainer flags
after `--` and `--mode=train_and_evaluate`; the operator or Vertex sets TF_CONFIG.
Both end the job when the chief ends (TFJob: a job with a Chief succeeds when the
chief does, and `cleanPodPolicy: Running` then deletes the pods still running;
Vertex AI: the primary replica, worker pool 0, reports the job's status), so with an
evaluator the chief gets `--wait_for_eval_secs` and waits for the final evaluation.
Nothing is sent anywhere: apply the output with `kubectl apply -f -`, or POST the
CustomJob to Vertex AI's customJobs.create (its jobSpec is what
`gcloud ai custom-jobs create --config=FILE` takes).
"""
from common import cli
from common.errors import UserError
from trainer.cluster import replicas
from trainer.deploy import job_specs, options, tuning_specs

COMMANDS = ('tfjob', 'vertex', 'katib')


def main(argv):
    command, trainer_flags = (argv[1], argv[2:]) if len(argv) > 1 else (None, [])
    if command not in COMMANDS:
        raise UserError('give a command: tfjob (Kubeflow), katib (a Katib Experiment) or vertex '
                        '(Vertex AI; --hptune: a tuning job), then the flags, then -- and the '
                        'trainer flags')
    deploy_options = options.DeployOptions.from_flags(command)
    if deploy_options.tuning:
        print(tuning_specs.build(deploy_options, trainer_flags), end='')
    else:
        print(job_specs.build(deploy_options, trainer_flags),
              end='' if command == 'tfjob' else '\n')
    return cli.EXIT_OK


if __name__ == '__main__':
    options.define_flags()
    cli.run(main, own_modules=[replicas.__name__, options.__name__], user_errors=(UserError,),
            unknown_flag_hint='trainer flags go after --')
