"""What each engine's command line accepts: its flags as the engine defines them (recorded from
its `--help` or its argument parser), the meaning swapgen gives each, and how a flag a user
passes in `extra_args` is read. Sizing, the emitters and the router's checks all read these
declarations; none restates a flag."""
