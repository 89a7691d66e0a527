"""What every layer uses: the model, time and units, the clock."""
