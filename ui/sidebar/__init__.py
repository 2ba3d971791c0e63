"""The conversation sidebar: past and open chats by day, search, pin, rename, delete with
undo, open in a tab (its data is app/history/sidebar.py's)."""
