"""The demos behind `./run.sh` (digits) and `./run.sh faces`: each stage a command a user types."""
