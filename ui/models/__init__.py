"""The model library dialog, its table, downloads and the main window's model button."""
