"""The history dialog (view) and what ties it and the tabs to app.history.writer (controller),
and the history's state in words (words)."""
