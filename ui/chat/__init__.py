"""One chat tab: its message list, input box and settings panel."""
