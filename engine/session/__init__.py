"""One conversation, one turn: the session the window, `ember chat` and the API server share."""
