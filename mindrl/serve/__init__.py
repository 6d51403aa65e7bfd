"""mindrl's rewards as a service: a thread-safe scoring service and an HTTP server over it.

``ScoringService`` (service.py) scores requests from any thread on the reward pool's worker
processes; ``create_app`` (app.py) puts it behind FastAPI, with request bodies validated by the
pydantic models of schema.py; limits.py bounds each connection (header size, header and body
timeouts) and the shutdown; ``mindrl serve-rewards`` (cli.py) runs it. FastAPI, pydantic and
uvicorn are imported only by app.py, schema.py, limits.py / the command.
"""
