"""The PySide6 widgets. Importing this package first applies the PySide6 6.12 reference-count
workaround (ui/refcount_guard.py), so it covers every Qt call the process makes."""

from .refcount_guard import pin_singletons

pin_singletons()
