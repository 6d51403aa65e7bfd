"""Tools a model may call while it answers (tool-integrated reasoning), and the sandbox that
runs model-written code: :mod:`mindrl.tools.sandbox` (processes, limits, isolation),
:mod:`mindrl.tools.registry` (tools by name, user tools by ``module:function``)."""
