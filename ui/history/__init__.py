"""The history dialog (view) and what ties it and the tabs to app.history.sync (controller)."""
