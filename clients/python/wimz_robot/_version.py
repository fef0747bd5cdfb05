"""The version of the robot library: the repository VERSION, copied by scripts/generate.sh."""

__version__ = "1.2.0"
