"""Where pending schedules are held until due. Default: Spark state."""
