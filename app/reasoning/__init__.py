"""Reasoning models in the app (issue #49): a tab's setting for thinking (`setting.py`)
and a reply's text split into thinking and answer (`reply.py`). A request is made ready
for the model in app/request/reasoning.py; the families and the split are engine.public's."""
