"""The launcher: the one package above `app` and `ui`. It parses nothing itself: app/main.py
decides what a command line asks for, and the launcher hands it the window's start-up
(ui/startup.py), so `app` never imports `ui`."""
