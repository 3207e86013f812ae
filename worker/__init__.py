"""The SAQ worker process: job functions and crons that call into `app/`."""
