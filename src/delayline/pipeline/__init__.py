"""The Spark Structured Streaming job: read, validate, hold, fire."""
