from common import cli
from common.errors import UserError
from input_fns.prepare import command, flags

__doc__ = command.__doc__  # what --help prints: the usage, written once in command.py

if __name__ == '__main__':
    flags.define_flags()
    cli.run(command.main, own_modules=['input_fns.prepare.flags'], user_errors=(UserError,),
            stopped_message="no half-written shard is left (a split's shards are put in place "
                            'once all are written, or removed); run the same command again')
