"""The SAQ worker process: builds its SAQ worker from the job registry (`app.jobs.registry`),
opens the process's resources at startup, beats, and drains running jobs on SIGTERM."""
