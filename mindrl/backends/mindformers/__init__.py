"""backend=mindformers: tensor/pipeline-parallel training through mindformers (Ascend; written
against its documented API, not run here). ``layout`` is pure and tested; ``backend`` imports
mindspore and mindformers only when the backend is built."""
