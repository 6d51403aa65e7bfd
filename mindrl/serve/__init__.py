"""mindrl's rewards as a service: a thread-safe scoring service and an HTTP server over it.

``ScoringService`` (service.py) scores requests from any thread on the reward pool's worker
processes; ``create_app`` (app.py) puts it behind FastAPI; ``mindrl serve-rewards`` (cli.py)
runs it. FastAPI and uvicorn are imported only by app.py / the command.
"""
