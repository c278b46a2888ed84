"""The REST API: HTTP lives here and nowhere else."""
