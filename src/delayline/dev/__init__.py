"""The demo and the local harness (a pipeline in a child process, test helpers)."""
