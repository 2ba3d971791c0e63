"""Chat → Preferences… (Ctrl+,): the app-wide defaults that new tabs start with."""

from .dialog import PreferencesDialog, open_preferences

__all__ = ["PreferencesDialog", "open_preferences"]
