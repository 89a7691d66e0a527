"""`delayline bench`: scenarios driven against a broker and a pipeline, and their figures."""
