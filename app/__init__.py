"""BatchChat's application layer (Qt-free): chats, the engine bridge, history, server, simulator."""
