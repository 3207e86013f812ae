"""The SAQ worker process: the runner alone. It builds its SAQ worker from the job registry
(`app.jobs.registry`; the job functions are `app.jobs.handlers`), opens the process's
resources at startup, beats, and drains running jobs on SIGTERM (docs/architecture.md#processes).
"""
