"""Where a task runs: TF_CONFIG roles, devices and distribution, the loopback cluster, deploy specs."""
